package gitlab

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// How long a 429 is waited out inside one call. GitLab's Retry-After is
// the time left in its window (at most a minute on gitlab.com); a longer
// or missing one is capped or defaulted rather than trusted, so a broken
// proxy cannot park a step for an hour. The wait never outlasts the
// call's context: what does not fit before the step's deadline is handed
// back as the 429 (with RetryAfter), and the workflow waits it out as a
// rescheduled step instead (docs/workflow.md, "GitLab's limits").
const (
	MaxRetryAfter     = time.Minute
	defaultRetryAfter = time.Second
)

// Why a call was held back, for Options.OnRateLimited.
const (
	// LimitedByGitLab is a 429 GitLab answered.
	LimitedByGitLab = "gitlab"
	// LimitedByPace is this instance's own pace (gitlab.rateLimit.*)
	// refusing a call that could not wait for its turn before the
	// deadline.
	LimitedByPace = "paced"
)

// IsRateLimited says err is a 429: GitLab's, or this instance's own pace
// with no time left to wait. It is a wait, never a failure: the request
// was not applied, so it may be sent again as it is.
func IsRateLimited(err error) bool { return hasStatus(err, http.StatusTooManyRequests) }

// WaitFor makes a 429 an engine.Waiter: the engine waits it out (at least
// a second) instead of failing a step that returned it as an error.
func (e *Error) WaitFor() (time.Duration, bool) {
	if e.Status != http.StatusTooManyRequests {
		return 0, false
	}
	return max(e.RetryAfter, time.Second), true
}

// RetryAfterOf is how long a 429 asks to wait (0 for any other error).
func RetryAfterOf(err error) time.Duration {
	if e, ok := errors.AsType[*Error](err); ok && e.Status == http.StatusTooManyRequests {
		return e.RetryAfter
	}
	return 0
}

// Pacer is one instance's pace towards GitLab: a token bucket for every
// API call (gitlab.rateLimit.apiPerMinute) and one per project for the
// calls that start a pipeline (gitlab.rateLimit.pipelinesPerMinute). A
// bucket refills at the rate per minute ÷ 60 per second and holds one
// token, so an idle instance's first call never waits and any minute sees
// at most the rate plus one call. Clients that share a Pacer share the
// budget (the workflow's and the preview's client do). The zero value is
// unpaced until a rate is set.
type Pacer struct {
	mu       sync.Mutex
	apiRate  int
	api      *rate.Limiter
	pipeRate int
	pipes    map[string]*rate.Limiter
}

// NewPacer returns an unpaced Pacer (the rates come from Settings).
func NewPacer() *Pacer { return &Pacer{} }

func perMinute(n int) *rate.Limiter { return rate.NewLimiter(rate.Limit(float64(n)/60), 1) }

// reserve takes a turn from the buckets that apply under s (rebuilt when a
// rate changed); a nil or empty result means unpaced.
func (p *Pacer) reserve(s Settings, project string, pipeline bool) []*rate.Reservation {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.apiRate != s.APIPerMinute {
		p.apiRate, p.api = s.APIPerMinute, nil
		if s.APIPerMinute > 0 {
			p.api = perMinute(s.APIPerMinute)
		}
	}
	if p.pipeRate != s.PipelinesPerMinute {
		p.pipeRate, p.pipes = s.PipelinesPerMinute, map[string]*rate.Limiter{}
	}
	var out []*rate.Reservation
	if p.api != nil {
		out = append(out, p.api.Reserve())
	}
	if pipeline && p.pipeRate > 0 {
		if p.pipes == nil {
			p.pipes = map[string]*rate.Limiter{}
		}
		l := p.pipes[project]
		if l == nil {
			l = perMinute(p.pipeRate)
			p.pipes[project] = l
		}
		out = append(out, l.Reserve())
	}
	return out
}

// wait waits for the call's turn. A turn that would come after ctx's
// deadline is given back and answered as a 429 of our own with the wait in
// RetryAfter, so the caller reschedules instead of running out of time.
func (p *Pacer) wait(ctx context.Context, s Settings, op, project string, pipeline bool) error {
	if p == nil {
		return nil
	}
	rs := p.reserve(s, project, pipeline)
	var d time.Duration
	for _, r := range rs {
		d = max(d, r.Delay())
	}
	if d <= 0 {
		return nil
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		for _, r := range rs {
			r.Cancel()
		}
		return &Error{Op: op, Status: http.StatusTooManyRequests, RetryAfter: d,
			Message: fmt.Sprintf("paced by gitlab.rateLimit.*: next turn in %s, after this step's deadline", d.Round(time.Millisecond))}
	}
	return sleep(ctx, d)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// paceNote carries a 429's Retry-After from the transport to paced: the
// client library and the direct calls both drop the answer's headers.
type paceNote struct {
	retryAfter time.Duration
	got        bool
}

type paceKey struct{}

// noteTransport records the Retry-After of a 429 in the request's
// paceNote (if its context has one).
type noteTransport struct{ next http.RoundTripper }

func (t noteTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusTooManyRequests {
		if n, ok := req.Context().Value(paceKey{}).(*paceNote); ok {
			n.retryAfter, n.got = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
		}
	}
	return resp, err
}

// parseRetryAfter reads Retry-After as seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(0, t.Sub(now)), true
	}
	return 0, false
}

// retryWait is how long to wait for a 429: its Retry-After, capped at
// MaxRetryAfter; 1 s when it sent none (or 0).
func (n *paceNote) retryWait() time.Duration {
	if !n.got || n.retryAfter <= 0 {
		return defaultRetryAfter
	}
	return min(n.retryAfter, MaxRetryAfter)
}

// paced runs attempt in this instance's pace and waits out GitLab's 429s:
// a 429 means the request was not applied, so it is sent again after
// Retry-After — as long as that fits before ctx's deadline; otherwise the
// 429 is returned with RetryAfter set. Neither a 429 nor a wait counts
// against the breaker (breakerExcluded).
//
// A context without a deadline waits out 429s for at most MaxRetryAfter
// in all, so a GitLab that never stops refusing cannot hold a caller
// forever.
func (c *Client) paced(ctx context.Context, s Settings, op, project string, pipeline bool, attempt func(ctx context.Context) error) error {
	until, ok := ctx.Deadline()
	if !ok {
		until = time.Now().Add(MaxRetryAfter)
	}
	for {
		if err := c.pacer.wait(ctx, s, op, project, pipeline); err != nil {
			if IsRateLimited(err) {
				c.rateLimited(LimitedByPace)
			}
			return err
		}
		note := &paceNote{}
		err := attempt(context.WithValue(ctx, paceKey{}, note))
		e, ok := errors.AsType[*Error](err)
		if !ok || e.Status != http.StatusTooManyRequests {
			return err
		}
		e.RetryAfter = note.retryWait()
		c.rateLimited(LimitedByGitLab)
		if time.Until(until) < e.RetryAfter {
			return err
		}
		c.logger.Info("gitlab: 429, waiting Retry-After", "op", op, "retryAfter", e.RetryAfter)
		if sleep(ctx, e.RetryAfter) != nil {
			return err
		}
	}
}

func (c *Client) rateLimited(kind string) {
	if c.onRateLimited != nil {
		c.onRateLimited(kind)
	}
}

// breakerExcluded says the breaker ignores err: a 429 is GitLab healthy
// and asking us to slow down, neither a success nor a failure.
func breakerExcluded(err error) bool { return IsRateLimited(err) }
