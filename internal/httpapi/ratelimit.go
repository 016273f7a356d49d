package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/identity"
	"changeflow/internal/metrics"
	"changeflow/internal/ratelimit"
)

// RateLimitSpec is a route's rate-limit metadata.
// The limit is configuration item ratelimit.<Bucket>.limit,
// read on every request; its built-in default lives with the other
// defaults in internal/config (apply = 10), so a route never carries a
// second copy of it.
type RateLimitSpec struct {
	// Bucket names the quota, e.g. "apply". Routes sharing a bucket share
	// the caller's quota.
	Bucket string
	// Message is the 429's user message; "" means defaultRateLimitMessage.
	Message string
}

// defaultRateLimitMessage is the 429 text of a spec without its own.
const defaultRateLimitMessage = "Too many requests, please try again later."

// RateLimiting is the rate-limit link's dependencies (Deps.RateLimit).
type RateLimiting struct {
	// Limiter holds the sliding-window logs; pass the one a
	// ratelimit.Janitor sweeps. nil gets a fresh one, private to the
	// server, reclaimed only as traffic flows.
	Limiter *ratelimit.Limiter
	// Config supplies limits, the window and the trusted proxies; it is
	// read on every request, so a reload applies to the next request.
	// Usually the *config.Manager. nil disables rate limiting (logged at
	// start-up): with no configuration every limit is "missing", and a
	// missing limit means no limiting.
	Config RateLimitConfig
	// Quota divides a limit among the live instances when
	// ratelimit.global.enabled is on; nil keeps per-instance
	// limits whatever the switch says.
	Quota RateLimitQuota
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// RateLimitConfig reads the configuration in force; *config.Manager
// implements it.
type RateLimitConfig interface {
	Current() *config.Snapshot
}

// RateLimitQuota turns a global limit into this instance's share;
// *ratelimit.Quota implements it.
type RateLimitQuota interface {
	PerInstance(limit int) int
}

// rateLimiter is the server's rate-limit link state: one limiter and one
// counter shared by every rate-limited route.
type rateLimiter struct {
	deps    RateLimiting
	logger  *slog.Logger
	limited *prometheus.CounterVec
}

// newRateLimiter builds the link state and registers
// changeflow_rate_limited_total. The counter is labelled by bucket only —
// never by subject — so its series stay bounded by the number of buckets.
// A registry that refuses it leaves the counter unregistered:
// rate limiting works the same, only the series is missing (and logged).
func newRateLimiter(d Deps) *rateLimiter {
	rl := &rateLimiter{deps: d.RateLimit, logger: d.Logger}
	if rl.deps.Limiter == nil {
		rl.deps.Limiter = ratelimit.New()
	}
	if rl.deps.Now == nil {
		rl.deps.Now = time.Now
	}
	rl.limited = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "changeflow_rate_limited_total",
		Help: "Requests refused with 429 RATE_LIMITED, by rate-limit bucket.",
	}, []string{"bucket"})
	if d.Metrics != nil {
		if err := d.Metrics.Register(rl.limited); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
					rl.limited = existing
				}
			} else {
				d.Logger.Error("rate-limited counter not registered; rate limiting continues", "err", err)
			}
		}
	}
	return rl
}

// rateLimit is the first link of a route's chain (docs/api.md "Rate limiting"). It decides
// before the body is read or decoded, and on refusal writes its own
// envelope and stops: a refused request reaches neither authorization nor
// the API or business-activity metrics, and is counted only in
// changeflow_rate_limited_total.
//
// Rate limiting runs before the idempotency check, so a duplicate
// submission over quota gets 429 rather than DUPLICATE_SUBMIT. Accepted:
// the client retries after Retry-After and then gets the
// replay; the alternative would read and hash the body of every refused
// request, which is the work rate limiting exists to avoid.
func (s *Server) rateLimit(spec RateLimitSpec, next http.Handler) http.Handler {
	rl := s.rl
	if rl.deps.Config == nil {
		rl.logger.Warn("rate limiting disabled: no configuration source", "bucket", spec.Bucket)
		return next
	}
	msg := spec.Message
	if msg == "" {
		msg = defaultRateLimitMessage
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rl.allow(w, r, spec.Bucket, msg) {
			next.ServeHTTP(w, r)
		}
	})
}

// allow spends one request of bucket for r's caller. When the bucket is
// exhausted it writes the 429 (with Retry-After) itself, counts it, and
// reports false. The rate-limit link uses it for a route's own bucket; a
// handler uses it for a bucket that only some of its requests spend (the
// admin check on someone else's request).
func (rl *rateLimiter) allow(w http.ResponseWriter, r *http.Request, bucket, msg string) bool {
	if rl.deps.Config == nil {
		return true
	}
	snap := rl.deps.Config.Current()
	limit, window, _ := snap.RateLimit(bucket)
	if limit <= 0 {
		// ≤ 0, missing or unparsable (config resolves all three to 0):
		// no limiting, because a broken threshold must not block
		// legitimate traffic.
		return true
	}
	if rl.deps.Quota != nil {
		if global, _ := snap.Bool(config.KeyRateLimitGlobalEnabled); global {
			limit = rl.deps.Quota.PerInstance(limit)
		}
	}
	ok, retry := rl.deps.Limiter.Allow(rateLimitKey(bucket+":", r, snap), limit, window, rl.deps.Now())
	if ok {
		return true
	}
	rl.countLimited(bucket)
	w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(retry)))
	writeJSON(w, rl.logger, StatusOf(domain.CodeRateLimited), Envelope{Code: domain.CodeRateLimited, Message: msg})
	return false
}

// rateLimitKey is the limiter key "bucket:subject". The subject is whose
// quota a request spends: the canonical account when the edge resolved
// one, so one person's tabs and browsers share a quota; otherwise "ip:" +
// the client address, so that one anonymous caller cannot exhaust a bucket
// shared by every anonymous caller.
func rateLimitKey(prefix string, r *http.Request, snap *config.Snapshot) string {
	if res, ok := identity.FromContext(r.Context()); ok && res.Authenticated() {
		return prefix + res.Identity.Account
	}
	trusted, _ := snap.TrustedProxies()
	var buf [96]byte
	b := append(append(buf[:0], prefix...), "ip:"...)
	return string(appendClientAddr(b, r.RemoteAddr, r.Header.Values("X-Forwarded-For"), trusted))
}

// retryAfterSeconds is the Retry-After value: whole seconds rounded up,
// at least 1, since "0" would invite an immediate retry that fails again.
func retryAfterSeconds(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	return max(s, 1)
}

// countLimited increments the 429 counter. Like every metric write it may
// not change the outcome: a failure is logged and the 429 still goes out.
func (rl *rateLimiter) countLimited(bucket string) {
	defer func() {
		if v := recover(); v != nil {
			rl.logger.Error("metric failed; request continues", "metric", "rate_limited", "panic", fmt.Sprint(v))
		}
	}()
	b, ok := metrics.Label(bucket)
	if !ok {
		return
	}
	rl.limited.WithLabelValues(b).Inc()
}
