package gitlab

import (
	"context"
	"errors"

	"changeflow/internal/outbound"
)

// guard applies the per-call deadline and the GitLab circuit breaker.
// There is one guard per dependency: every bot's client and the
// direct-HTTP approver share it, because they all fail together when
// GitLab is down.
type guard struct {
	cb outbound.Breaker[struct{}]
}

func newGuard(name string) *guard {
	if name == "" {
		name = "gitlab"
	}
	return &guard{cb: outbound.Breaker[struct{}]{Name: name, IsSuccessful: healthyAnswer}}
}

// do runs fn with a deadline of s.Timeout through the breaker. An open
// breaker answers at once with a *Error{Op: op, BreakerOpen: true}.
func (g *guard) do(ctx context.Context, s Settings, op string, fn func(ctx context.Context) error) error {
	_, err := g.cb.Call(ctx, s.call(), func(ctx context.Context) (struct{}, error) {
		return struct{}{}, fn(ctx)
	})
	if outbound.IsOpen(err) {
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
	return errors.As(err, &e) && outbound.HealthyAnswer(e.Status)
}
