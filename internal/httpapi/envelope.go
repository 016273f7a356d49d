package httpapi

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"changeflow/internal/domain"
)

// Envelope is the shape of every JSON response except the legacy endpoints
// and /metrics (docs/api.md): clients branch on Code, show Message, read Data.
type Envelope struct {
	Code    domain.Code `json:"code"`
	Message string      `json:"message"`
	Data    any         `json:"data"`
}

// statusOf is the one table from error code to HTTP status. A code
// that is not here is a server error: unknown must never look like success
// or like the client's fault.
var statusOf = map[domain.Code]int{
	domain.CodeOK:                  http.StatusOK,
	domain.CodeAccepted:            http.StatusAccepted,
	domain.CodeDuplicateSubmit:     http.StatusAccepted,
	domain.CodeInvalidArgument:     http.StatusBadRequest,
	domain.CodeUnauthenticated:     http.StatusUnauthorized,
	domain.CodeAccessDenied:        http.StatusForbidden,
	domain.CodeUnknownAccount:      http.StatusForbidden,
	domain.CodeTargetNotOpen:       http.StatusForbidden,
	domain.CodeNotFound:            http.StatusNotFound,
	domain.CodeMethodNotAllowed:    http.StatusMethodNotAllowed,
	domain.CodeMisdirected:         http.StatusMisdirectedRequest,
	domain.CodeRequestInProgress:   http.StatusConflict,
	domain.CodeAlreadyInEffect:     http.StatusConflict,
	domain.CodeNotInEffect:         http.StatusConflict,
	domain.CodeReviewNotAllowed:    http.StatusForbidden,
	domain.CodeReviewConflict:      http.StatusConflict,
	domain.CodeIdempotencyReused:   http.StatusUnprocessableEntity,
	domain.CodeIdempotencyInFlight: http.StatusConflict,
	domain.CodeRateLimited:         http.StatusTooManyRequests,
	domain.CodeRetryLater:          http.StatusServiceUnavailable,
	domain.CodeInternal:            http.StatusInternalServerError,
}

// StatusOf returns the HTTP status for code, 500 for an unknown code.
func StatusOf(code domain.Code) int {
	if s, ok := statusOf[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// writeJSON encodes v with status. An encoding failure can only be logged:
// the header is already out.
func writeJSON(w http.ResponseWriter, logger *slog.Logger, status int, v any) {
	h := w.Header()
	h["Content-Type"] = jsonContentTypeValue // shared values, headers.go
	h["X-Content-Type-Options"] = nosniffValue
	w.WriteHeader(status)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		logger.Warn("write response", "err", err)
	}
}

// respond writes a success envelope with the status that belongs to code.
func respond(w http.ResponseWriter, logger *slog.Logger, code domain.Code, data any) {
	writeJSON(w, logger, StatusOf(code), Envelope{Code: code, Message: "", Data: data})
}

// busyMessage is what a client reads when the database asked to come back
// later, and busyRetryAfterSeconds the Retry-After sent with it (and with
// every RETRY_LATER that has none of its own): a node loss takes the proxy
// about a second to notice and a conflict far less, so one second is
// enough and does not leave callers idle.
const (
	busyMessage           = "The service is busy; please retry shortly."
	busyRetryAfterSeconds = 1
)

// writeError maps err onto the envelope and logs it at the level its class
// deserves: client errors at warn with the detail, server errors at error
// with the cause, and the client of a server error sees only the generic
// message. An error that is not a *domain.Error is a server error
// whatever its text says, so no driver or upstream message can leak.
func writeError(w http.ResponseWriter, r *http.Request, logger *slog.Logger, err error) {
	var de *domain.Error
	if !errors.As(err, &de) {
		de = domain.Internal("unclassified error", err)
	}
	if de.Code == domain.CodeInternal && errors.Is(err, domain.ErrBusy) {
		// The database said "later": a lock wait ran out, a conflict with
		// another instance (a Galera node) outlived the store's retries,
		// or the database node is unreachable or not ready. Nothing was
		// written, so it is an answer with a retry hint, not a failure.
		de = &domain.Error{Code: domain.CodeRetryLater, Message: busyMessage, Err: err}
	}
	if de.Code == domain.CodeRetryLater && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", strconv.Itoa(busyRetryAfterSeconds))
	}
	status := StatusOf(de.Code)
	msg, data := de.Message, de.Data
	attrs := []any{"code", de.Code, "status", status, "method", r.Method, "path", r.URL.Path, "err", err.Error()}
	if status == http.StatusInternalServerError {
		// Unexpected failures only: RETRY_LATER (503) is a deliberate
		// answer whose message tells the user what to do.
		msg, data = domain.GenericMessage, nil
		logger.Error("request failed", attrs...)
	} else {
		logger.Warn("request rejected", attrs...)
	}
	if de.Code == domain.CodeAccessDenied {
		// Fixed text whatever the cause, so a rejected caller cannot learn
		// which permission the route needs.
		msg = domain.AccessDeniedMessage
	}
	if de.Code == domain.CodeInvalidArgument {
		// Every 400 names its bad fields (fields.go); an empty list means
		// the input as a whole was unusable, and the message says how.
		data = invalidDataOf(de.Fields)
	}
	writeJSON(w, logger, status, Envelope{Code: de.Code, Message: msg, Data: data})
}
