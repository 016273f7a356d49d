package approval

import (
	"net/http"

	"changeflow/internal/outbound"
)

// Error is every failure of the client: the operation, the real HTTP
// status (0 when no answer arrived) and the system's message; Service is
// "approval". Unknown says the request may have been applied although no
// answer arrived: look up by operationId before submitting again.
// BreakerOpen says the call was not attempted.
type Error = outbound.Error

// StatusOf returns the HTTP status of err's *Error, or 0.
func StatusOf(err error) int { return outbound.StatusOf(err) }

// IsNotFound: 404.
func IsNotFound(err error) bool { return StatusOf(err) == http.StatusNotFound }

// IsAlreadyDecided: 409 — a withdraw reached an approval that was
// approved or rejected first.
func IsAlreadyDecided(err error) bool { return StatusOf(err) == http.StatusConflict }

// OutcomeUnknown: the request may have been applied; look up first.
func OutcomeUnknown(err error) bool { return outbound.OutcomeUnknown(err) }

// IsBreakerOpen: the call was refused by the open breaker.
func IsBreakerOpen(err error) bool { return outbound.IsBreakerOpen(err) }

// IsTransient: no answer, 429 or 5xx — a later retry may succeed.
func IsTransient(err error) bool { return outbound.IsTransient(err) }
