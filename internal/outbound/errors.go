package outbound

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
)

// Error is a failed outbound call: the dependency, the operation, the
// real HTTP status (0 when no answer arrived: transport error, deadline,
// open breaker) and the dependency's message. The approval client's
// *approval.Error is this type; the GitLab adapter keeps its own *Error
// (it also carries check items) and formats through this one.
type Error struct {
	// Service names the dependency in the message, e.g. "approval".
	Service string
	// Op is the client operation, e.g. "Submit".
	Op string
	// Status is the HTTP status; 0 means no answer.
	Status int
	// Message is the dependency's message, or what went wrong on our side.
	Message string
	// Unknown says the request may have been applied although no answer
	// arrived (the connection broke or the deadline passed after it was
	// sent): read remote state before repeating a write.
	Unknown bool
	// BreakerOpen says the call was not attempted.
	BreakerOpen bool
	// Err is the underlying cause, if any.
	Err error
}

// Error formats service, op, status and message:
// "approval Submit: status 503: upstream down".
func (e *Error) Error() string {
	s := e.Op + ": "
	if e.Service != "" {
		s = e.Service + " " + s
	}
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

// TransportError is a failure without an answer. It is an unknown outcome
// unless the connection was never made (a dial error): the request may
// have reached the dependency and been applied.
func TransportError(service, op string, err error) *Error {
	e := &Error{Service: service, Op: op, Message: err.Error(), Err: err, Unknown: true}
	var dial *net.OpError
	if errors.As(err, &dial) && dial.Op == "dial" {
		e.Unknown = false // never connected: nothing was sent
	}
	if errors.Is(err, context.DeadlineExceeded) {
		e.Message = "deadline exceeded"
	}
	return e
}

// HealthyAnswer says status is the dependency refusing this request, not
// failing: any 4xx but 429. A breaker whose IsSuccessful uses it is not
// opened by a run of refusals (401s from duplicate approvals, 404s from
// look-ups) from a dependency that is up.
func HealthyAnswer(status int) bool {
	return status >= 400 && status < 500 && status != http.StatusTooManyRequests
}

// TransientStatus says a later retry may succeed: no answer (0), 429 or
// 5xx.
func TransientStatus(status int) bool {
	return status == 0 || status == http.StatusTooManyRequests || status >= 500
}

// StatusOf returns the HTTP status of err's *Error, or 0.
func StatusOf(err error) int {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Status
	}
	return 0
}

// OutcomeUnknown says err is an *Error whose request may have been
// applied: read remote state before repeating a write.
func OutcomeUnknown(err error) bool {
	e, ok := errors.AsType[*Error](err)
	return ok && e.Unknown
}

// IsBreakerOpen says err is an *Error for a call the open breaker refused.
func IsBreakerOpen(err error) bool {
	e, ok := errors.AsType[*Error](err)
	return ok && e.BreakerOpen
}

// IsTransient says err is an *Error a later retry may cure: no answer, 429
// or 5xx (TransientStatus).
func IsTransient(err error) bool {
	e, ok := errors.AsType[*Error](err)
	return ok && TransientStatus(e.Status)
}
