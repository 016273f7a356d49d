package gitlab

import (
	"context"
	"errors"
	"net/http"
	"sync"

	"github.com/sony/gobreaker/v2"
)

// guard applies the per-call deadline and the GitLab circuit breaker
// (R-EXT-1). There is one guard per dependency: every bot's client and the
// direct-HTTP approver share it, because they all fail together when
// GitLab is down.
type guard struct {
	mu  sync.Mutex
	cb  *gobreaker.CircuitBreaker[struct{}]
	cfg Settings
}

// do runs fn with a deadline of s.Timeout through the breaker. An open
// breaker answers at once with a *Error{Op: op, BreakerOpen: true}.
func (g *guard) do(ctx context.Context, s Settings, op string, fn func(ctx context.Context) error) error {
	_, err := g.breaker(s).Execute(func() (struct{}, error) {
		ctx, cancel := context.WithTimeout(ctx, s.Timeout)
		defer cancel()
		return struct{}{}, fn(ctx)
	})
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		return &Error{Op: op, BreakerOpen: true, Message: "circuit open", Err: err}
	}
	return err
}

// healthyAnswer says err is an answer from a working GitLab: any 4xx but
// 429 is GitLab refusing this request, not GitLab failing, so it must not
// open the breaker (a run of 401s from duplicate approvals would otherwise
// cut the service off from a healthy GitLab).
func healthyAnswer(err error) bool {
	if err == nil {
		return true
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Status >= 400 && e.Status < 500 && e.Status != http.StatusTooManyRequests
	}
	return false
}

// breaker returns the breaker for s, rebuilt when breaker.* changed (which
// forgets its counts: rare, and starting closed is the safe side).
func (g *guard) breaker(s Settings) *gobreaker.CircuitBreaker[struct{}] {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cb == nil || g.cfg.BreakerFailures != s.BreakerFailures || g.cfg.BreakerOpenFor != s.BreakerOpenFor {
		failures := uint32(s.BreakerFailures)
		g.cb = gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{
			Name:         "gitlab",
			Timeout:      s.BreakerOpenFor,
			ReadyToTrip:  func(n gobreaker.Counts) bool { return n.ConsecutiveFailures >= failures },
			IsSuccessful: healthyAnswer,
			// The caller going away says nothing about GitLab; our own
			// deadline passing does (DeadlineExceeded is counted).
			IsExcluded: func(err error) bool { return errors.Is(err, context.Canceled) },
		})
		g.cfg = s
	}
	return g.cb
}
