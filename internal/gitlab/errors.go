package gitlab

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"changeflow/internal/outbound"
)

// Error is every failure of this package: the operation, the real HTTP
// status (0 when no answer arrived: transport error, deadline, open
// breaker) and GitLab's message. Use errors.As, or the Is* helpers, which
// look through wrapping.
type Error struct {
	// Op is the port operation, e.g. "CreateMR".
	Op string
	// Status is GitLab's HTTP status; 0 means no answer.
	Status int
	// Message is GitLab's message, or what went wrong on our side.
	Message string
	// Unknown says the request may have been applied although no answer
	// arrived (the connection broke or the deadline passed after it was
	// sent). A caller must read remote state before repeating a write.
	Unknown bool
	// BreakerOpen says the call was not attempted.
	BreakerOpen bool
	// RetryAfter is how long a 429 asks to wait (pacing.go): GitLab's
	// Retry-After, capped, or this instance's own pace.
	RetryAfter time.Duration
	// CurrentCheckItems is the project's current check-item list when a
	// 422 on approve carried one (direct-HTTP approver only).
	CurrentCheckItems []CheckItem
	// Err is the underlying cause, if any.
	Err error
}

// Error formats op, status and message as every outbound client does
// ("gitlab CreateMR: status 409: …").
func (e *Error) Error() string { return e.outbound().Error() }

// outbound is e as the shared error (CurrentCheckItems aside).
func (e *Error) outbound() *outbound.Error {
	return &outbound.Error{Service: "gitlab", Op: e.Op, Status: e.Status, Message: e.Message,
		Unknown: e.Unknown, BreakerOpen: e.BreakerOpen, Err: e.Err}
}

// fromOutbound is the shared error as this package's *Error.
func fromOutbound(o *outbound.Error) *Error {
	return &Error{Op: o.Op, Status: o.Status, Message: o.Message, Unknown: o.Unknown, BreakerOpen: o.BreakerOpen, Err: o.Err}
}

// Unwrap exposes the cause.
func (e *Error) Unwrap() error { return e.Err }

// shared is err's *Error as the shared error, for the shared Is*
// helpers; nil when err holds no *Error. (nil, not a nil *outbound.Error:
// that would be a non-nil error.)
func shared(err error) error {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.outbound()
	}
	return nil
}

// StatusOf returns the HTTP status of err's *Error, or 0.
func StatusOf(err error) int { return outbound.StatusOf(shared(err)) }

func hasStatus(err error, status int) bool { return StatusOf(err) == status }

// IsNotFound: 404.
func IsNotFound(err error) bool { return hasStatus(err, http.StatusNotFound) }

// IsConflict: 409 (MR already open for the branch; sha not the head).
func IsConflict(err error) bool { return hasStatus(err, http.StatusConflict) }

// IsUnauthorized: 401 — on approve ambiguous (duplicate or refused), settled
// only by reading the approvals as that bot.
func IsUnauthorized(err error) bool { return hasStatus(err, http.StatusUnauthorized) }

// IsForbidden: 403, a permission failure.
func IsForbidden(err error) bool { return hasStatus(err, http.StatusForbidden) }

// IsBadRequest: 400 (branch exists, file exists or missing, …).
func IsBadRequest(err error) bool { return hasStatus(err, http.StatusBadRequest) }

// IsMethodNotAllowed: 405, merge refused because the MR is not mergeable now.
func IsMethodNotAllowed(err error) bool { return hasStatus(err, http.StatusMethodNotAllowed) }

// IsUnprocessable: 422 (merge failed, check items stale).
func IsUnprocessable(err error) bool { return hasStatus(err, http.StatusUnprocessableEntity) }

// IsMergeFailed: 422 or the older 406 "Branch cannot be merged".
func IsMergeFailed(err error) bool {
	s := StatusOf(err)
	return s == http.StatusUnprocessableEntity || s == http.StatusNotAcceptable
}

// OutcomeUnknown says err is a *Error whose request may have been applied:
// read before retrying a write.
func OutcomeUnknown(err error) bool { return outbound.OutcomeUnknown(shared(err)) }

// IsBreakerOpen says the call was refused by the open circuit breaker.
func IsBreakerOpen(err error) bool { return outbound.IsBreakerOpen(shared(err)) }

// IsTransient says a retry later may succeed: no answer, 429 or 5xx.
func IsTransient(err error) bool { return outbound.IsTransient(shared(err)) }

// IsStaleWrite says a commit was refused because what the caller read is
// no longer what the commit would land on: a 400 with one of the messages
// GitLab's commits API (Files::MultiService, Gitaly's UserCommitFiles)
// gives when a file was created, changed or deleted since it was read, a
// branch was created meanwhile, or the branch moved under the update. Such
// a refusal is answered by a fresh read and a new commit, never by a
// failure state. The messages are matched as GitLab words them; a 400 with
// any other message (a path that is not valid, bad content) is not stale.
func IsStaleWrite(err error) bool {
	var e *Error
	if !errors.As(err, &e) || e.Status != http.StatusBadRequest {
		return false
	}
	for _, m := range [...]string{
		"A file with this name already exists",
		"A file with this name doesn't exist",
		"has changed since you started editing it",
		"already exists. Switch to that branch",
		"Could not update",
		"Cannot find start_sha",
	} {
		if strings.Contains(e.Message, m) {
			return true
		}
	}
	return false
}
