package gitlab

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// windowCounter counts events per key in fixed windows of the simulator's
// clock: a key's window opens at its first event and lasts the window
// length; the first event after it opens the next one. A fixed window is
// what GitLab's Rack::Attack throttles use (a counter per period), and it
// gives a client a Retry-After it can honour exactly: the time left in the
// window.
type windowCounter struct {
	mu   sync.Mutex
	wins map[string]*rateWindow
}

type rateWindow struct {
	start time.Time
	count int
}

// take counts one event for key at now against limit per window. ok says
// the event is within the limit (and was counted); observed is the count
// in the window afterwards (the refused event included, as GitLab's
// RateLimit-Observed), reset when the window ends.
func (c *windowCounter) take(key string, now time.Time, limit int, window time.Duration) (ok bool, observed int, reset time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.wins == nil {
		c.wins = map[string]*rateWindow{}
	}
	win := c.wins[key]
	if win == nil || !now.Before(win.start.Add(window)) {
		win = &rateWindow{start: now}
		c.wins[key] = win
	}
	win.count++
	reset = win.start.Add(window)
	if win.count > limit {
		return false, win.count, reset
	}
	return true, win.count, reset
}

// peek reports key's window at now without counting an event.
func (c *windowCounter) peek(key string, now time.Time, window time.Duration) (count int, start, reset time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	win := c.wins[key]
	if win == nil || !now.Before(win.start.Add(window)) {
		return 0, now, now
	}
	return win.count, win.start, win.start.Add(window)
}

// clear forgets every window (a reset of the world).
func (c *windowCounter) clear() {
	c.mu.Lock()
	c.wins = nil
	c.mu.Unlock()
}

// retryAfterSeconds is the whole seconds until reset, at least 1: the
// Retry-After a client may wait for.
func retryAfterSeconds(now, reset time.Time) int {
	return max(1, int(math.Ceil(reset.Sub(now).Seconds())))
}

// setRateLimitHeaders writes the RateLimit-* headers gitlab.com sends
// with a throttled answer.
func setRateLimitHeaders(h http.Header, limit, observed int, now, reset time.Time) {
	h.Set("RateLimit-Name", "throttle_authenticated_api")
	h.Set("RateLimit-Limit", strconv.Itoa(limit))
	h.Set("RateLimit-Observed", strconv.Itoa(observed))
	h.Set("RateLimit-Remaining", strconv.Itoa(max(0, limit-observed)))
	h.Set("RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
	h.Set("RateLimit-ResetTime", reset.UTC().Format(http.TimeFormat))
	h.Set("Retry-After", strconv.Itoa(retryAfterSeconds(now, reset)))
}

// withAPIRate applies api_rate_per_minute per authenticated user (runs
// inside withAuth): one request over the limit is GitLab's 429 "Retry
// later" with Retry-After and the RateLimit-* headers, and does nothing.
// Only /api/v4 passes here: the control API and the MR pages are never
// limited.
func (s *Server) withAPIRate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		set := s.settings()
		u := caller(r)
		if set.APIRatePerMinute <= 0 || u == nil {
			next.ServeHTTP(w, r)
			return
		}
		now := s.now()
		ok, observed, reset := s.apiRate.take(strconv.FormatInt(u.ID, 10), now, set.APIRatePerMinute, set.RateWindow)
		if !ok {
			s.log.Info("api rate limit", "user", u.Username, "observed", observed, "limit", set.APIRatePerMinute)
			setRateLimitHeaders(w.Header(), set.APIRatePerMinute, observed, now, reset)
			writeError(w, http.StatusTooManyRequests, "Retry later")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// pipelineAllowed counts one pipeline creation for project p against
// pipeline_rate_per_minute; false means over the limit: the caller creates
// no pipeline (a push still lands, as on gitlab.com). reset is when the
// project's window ends.
func (s *Server) pipelineAllowed(p *project) (ok bool, reset time.Time) {
	set := s.settings()
	if set.PipelineRatePerMinute <= 0 {
		return true, time.Time{}
	}
	ok, observed, reset := s.pipelineRate.take(strconv.FormatInt(p.ID, 10), s.now(), set.PipelineRatePerMinute, set.RateWindow)
	if !ok {
		s.log.Info("pipeline rate limit: pipeline not created", "project", p.ID, "observed", observed, "limit", set.PipelineRatePerMinute)
	}
	return ok, reset
}
