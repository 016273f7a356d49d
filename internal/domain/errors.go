// Package domain holds changeflow's vocabulary: the error model, the request,
// binding and batch state enums and the transition table. It imports no
// driver, client or net/http, so every other package can depend on it.
package domain

import (
	"errors"
	"fmt"
)

// Code is a machine-readable outcome carried in every API envelope. Clients
// branch on it ("what should I do next"), so codes are stable names, never
// free text.
type Code string

// Error codes of docs/api.md, "User endpoints". Each maps to exactly one HTTP status in
// httpapi's table; a code not listed there is a 500.
const (
	CodeOK              Code = "OK"
	CodeAccepted        Code = "ACCEPTED"
	CodeDuplicateSubmit Code = "DUPLICATE_SUBMIT"
	CodeInvalidArgument Code = "INVALID_ARGUMENT"
	CodeUnauthenticated Code = "UNAUTHENTICATED"
	CodeAccessDenied    Code = "ACCESS_DENIED"
	// CodeUnknownAccount: the login worked, but what it names is no
	// account of the identity directory (or, with no directory, not an
	// account name), so changeflow will not act for it; the message says
	// who to ask.
	CodeUnknownAccount   Code = "UNKNOWN_ACCOUNT"
	CodeTargetNotOpen    Code = "TARGET_NOT_OPEN"
	CodeNotFound         Code = "NOT_FOUND"
	CodeMethodNotAllowed Code = "METHOD_NOT_ALLOWED"
	// CodeMisdirected: the request's Host is not an address this server
	// answers for (DNS rebinding defence, httpapi hosts.go).
	CodeMisdirected       Code = "MISDIRECTED_REQUEST"
	CodeRequestInProgress Code = "REQUEST_IN_PROGRESS"
	CodeAlreadyInEffect   Code = "ALREADY_IN_EFFECT"
	// CodeNotInEffect: access can be given back or revoked only while it
	// is in effect (VALIDATED); the message says where the request is.
	CodeNotInEffect Code = "NOT_IN_EFFECT"
	// CodeReviewNotAllowed: the caller may not decide this review item
	// (their own access, or not an owner of the target nor an operator);
	// the message says who decides it.
	CodeReviewNotAllowed Code = "REVIEW_NOT_ALLOWED"
	// CodeReviewConflict: the review item was decided already, its
	// campaign is closed, or the target has an open campaign.
	CodeReviewConflict      Code = "REVIEW_CONFLICT"
	CodeIdempotencyReused   Code = "IDEMPOTENCY_KEY_REUSED"
	CodeIdempotencyInFlight Code = "IDEMPOTENCY_IN_FLIGHT"
	CodeRateLimited         Code = "RATE_LIMITED"
	CodeRetryLater          Code = "RETRY_LATER"
	CodeInternal            Code = "INTERNAL_ERROR"
)

// GenericMessage is the only message a client ever sees for a server-side
// failure: the cause stays in the log.
const GenericMessage = "Something went wrong on our side. Please try again later."

// AccessDeniedMessage is the fixed 403 message, so a rejected caller cannot
// learn which permission the route needs.
const AccessDeniedMessage = "Access denied"

// Error is the one typed error of the system. Message is safe to show to a
// user; Detail is for the log only and never leaves the process.
type Error struct {
	Code    Code
	Message string
	Detail  string
	Err     error
	// Fields names every bad input of a CodeInvalidArgument error and
	// what is wrong with each, so a client can show each problem beside
	// its field; empty when the input as a whole is unusable (not JSON,
	// too large). Message stays the one line for clients that show one.
	Fields []FieldProblem
	// Data is what the refusal refers to, sent as the envelope's data
	// (e.g. the request a 409 REQUEST_IN_PROGRESS is about), so a client
	// can link to it; nil for most errors. Only what the caller may see:
	// never sent with a 500.
	Data any
}

// FieldProblem is one bad input of a request: Field as the client named
// it (a body field's dotted JSON path, a query, path or header parameter's
// name) and Problem in plain words that complete the name ("must be
// between 1 and 30 for this target").
type FieldProblem struct {
	Field   string
	Problem string
}

// Error returns the log-side text: code, detail and cause. It is never what
// the client sees (that is Message).
func (e *Error) Error() string {
	s := string(e.Code)
	if e.Detail != "" {
		s += ": " + e.Detail
	} else if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap exposes the cause to errors.Is / errors.As.
func (e *Error) Unwrap() error { return e.Err }

// Errorf builds a client-facing error: msg is shown to the user, the detail
// (formatted from format and args, %w honoured) goes to the log.
func Errorf(code Code, msg, format string, args ...any) *Error {
	cause := fmt.Errorf(format, args...)
	return &Error{Code: code, Message: msg, Detail: cause.Error(), Err: errors.Unwrap(cause)}
}

// E builds a client-facing error whose user message is also its detail.
func E(code Code, msg string) *Error { return &Error{Code: code, Message: msg} }

// Internal wraps an unexpected failure; the client sees GenericMessage.
func Internal(detail string, err error) *Error {
	return &Error{Code: CodeInternal, Message: GenericMessage, Detail: detail, Err: err}
}

// ErrorCode returns the code of the first *Error in err's chain, or
// CodeInternal for anything unknown (an unknown error is a server error).
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// Sentinel errors that stores and services return; edges translate them.
var (
	// ErrNotFound: the named row or resource does not exist.
	ErrNotFound = errors.New("not found")
	// ErrPreempted: a guarded write matched no row because the state it
	// expected was changed elsewhere (I6). Callers re-read; never retry blind.
	ErrPreempted = errors.New("preempted: state changed concurrently")
	// ErrDuplicate: a unique constraint said "already there" (I4). Stores
	// usually turn it into an answer (false, winner) rather than return it.
	ErrDuplicate = errors.New("duplicate key")
	// ErrBusy: the database asked us to come back later (lock wait timeout,
	// SQLITE_BUSY). Rounds treat it as "try next round".
	ErrBusy = errors.New("database busy")
)
