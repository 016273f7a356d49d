package outbound

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"
)

// Breaker is one dependency's circuit breaker: BreakerFailures consecutive
// failures open it for BreakerOpenFor, during which calls fail at once
// without touching the network. It is rebuilt when the breaker settings
// change, which forgets its counts: a reload of breaker.* is rare, and
// starting closed is the safe side. The zero value works (an unnamed
// breaker that counts every error as a failure); set Name and IsSuccessful
// before the first call.
type Breaker[T any] struct {
	// Name names the breaker (gobreaker's Settings.Name).
	Name string
	// IsSuccessful says an error is a healthy answer that must not count
	// as a failure (see HealthyAnswer); nil counts every error.
	IsSuccessful func(error) bool
	// IsExcluded says an error counts neither way (a dependency asking us
	// to slow down, e.g. GitLab's 429); nil excludes only the caller
	// going away.
	IsExcluded func(error) bool

	mu       sync.Mutex
	cb       *gobreaker.CircuitBreaker[T]
	failures int
	openFor  time.Duration
	built    bool
}

// For returns the breaker for s (s with defaults applied), rebuilding it
// when BreakerFailures or BreakerOpenFor changed.
func (b *Breaker[T]) For(s Settings) *gobreaker.CircuitBreaker[T] {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.built || b.failures != s.BreakerFailures || b.openFor != s.BreakerOpenFor {
		failures := uint32(s.BreakerFailures)
		b.cb = gobreaker.NewCircuitBreaker[T](gobreaker.Settings{
			Name:         b.Name,
			Timeout:      s.BreakerOpenFor,
			ReadyToTrip:  func(n gobreaker.Counts) bool { return n.ConsecutiveFailures >= failures },
			IsSuccessful: b.IsSuccessful,
			// The caller going away says nothing about the dependency; our
			// own deadline passing does (DeadlineExceeded is counted).
			IsExcluded: func(err error) bool {
				return errors.Is(err, context.Canceled) || (b.IsExcluded != nil && b.IsExcluded(err))
			},
		})
		b.failures, b.openFor, b.built = s.BreakerFailures, s.BreakerOpenFor, true
	}
	return b.cb
}

// Call runs fn through the breaker for s with a deadline of s.Timeout
// (which must be > 0: apply WithDefaults first). The deadline is inside
// the breaker, so a call that runs out of time counts as a failure. An open
// breaker answers at once with an error for which IsOpen holds.
func (b *Breaker[T]) Call(ctx context.Context, s Settings, fn func(ctx context.Context) (T, error)) (T, error) {
	return b.For(s).Execute(func() (T, error) {
		ctx, cancel := context.WithTimeout(ctx, s.Timeout)
		defer cancel()
		return fn(ctx)
	})
}

// IsOpen says err is the breaker refusing the call (open, or half-open
// with its one trial call already out): the call was not attempted.
func IsOpen(err error) bool {
	return errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests)
}
