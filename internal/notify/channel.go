package notify

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// This file holds what the channels share beyond the contract in
// notify.go: the types filter and the "call again later" answer.

// WantsKind says whether a channel configured for types carries k: empty
// types means every kind.
func WantsKind(types []Kind, k Kind) bool {
	return len(types) == 0 || slices.Contains(types, k)
}

// CheckKinds refuses a configured types list naming a kind changeflow
// does not emit, so a typo ("request.inEffect") is an error at start
// rather than a channel that silently hears nothing.
func CheckKinds(types []Kind) error {
	for _, k := range types {
		if !k.Valid() {
			return fmt.Errorf("unknown event kind %q", k)
		}
	}
	return nil
}

// RetryAfterError is a destination asking to be called again no earlier
// than After (an HTTP 429 with Retry-After): a retry like any error, but
// not a sign that the destination is broken, so it does not count against
// the channel's circuit breaker. After is 0 when the destination named
// no time; the outbox then uses its own backoff.
type RetryAfterError struct {
	After time.Duration
	Err   error
}

func (e *RetryAfterError) Error() string {
	if e.After > 0 {
		return fmt.Sprintf("%v (retry after %s)", e.Err, e.After)
	}
	return e.Err.Error()
}

func (e *RetryAfterError) Unwrap() error { return e.Err }

// RetryAfter returns the wait a destination asked for, when err is (or
// wraps) a *RetryAfterError; the outbox waits at least that long before
// the next attempt.
func RetryAfter(err error) (time.Duration, bool) {
	var r *RetryAfterError
	if errors.As(err, &r) {
		return r.After, true
	}
	return 0, false
}
