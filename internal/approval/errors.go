package approval

import (
	"errors"
	"fmt"
	"net/http"
)

// Error is every failure of the client: the operation, the real HTTP
// status (0 when no answer arrived) and the system's message.
type Error struct {
	Op      string
	Status  int
	Message string
	// Unknown says the request may have been applied although no answer
	// arrived: look up by operationId before submitting again.
	Unknown bool
	// BreakerOpen says the call was not attempted.
	BreakerOpen bool
	Err         error
}

// Error formats op, status and message.
func (e *Error) Error() string {
	s := "approval " + e.Op + ": "
	switch {
	case e.BreakerOpen:
		s += "circuit open"
	case e.Status == 0 && e.Unknown:
		s += "no answer, outcome unknown"
	case e.Status == 0:
		s += "no answer"
	default:
		s += fmt.Sprintf("status %d", e.Status)
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Err != nil && e.Err.Error() != e.Message {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap exposes the cause.
func (e *Error) Unwrap() error { return e.Err }

// StatusOf returns the HTTP status of err's *Error, or 0.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// IsNotFound: 404.
func IsNotFound(err error) bool { return StatusOf(err) == http.StatusNotFound }

// OutcomeUnknown: the request may have been applied; look up first.
func OutcomeUnknown(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Unknown
}

// IsBreakerOpen: the call was refused by the open breaker.
func IsBreakerOpen(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.BreakerOpen
}

// IsTransient: no answer, 429 or 5xx — a later retry may succeed.
func IsTransient(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	return e.Status == 0 || e.Status == http.StatusTooManyRequests || e.Status >= 500
}
