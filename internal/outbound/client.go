package outbound

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// Options configures a Client. S is the adapter's own settings type (base
// URL, tokens, and the call settings); the adapter keeps it public because
// its callers build it, so the Client only needs to know where the call
// settings are inside it.
type Options[S any] struct {
	// Service names the dependency: the Service of every *Error, the
	// prefix of a transport failure (RoundTripper) and, unless BreakerName
	// is set, the breaker's name.
	Service string
	// BreakerName names the breaker; "" means Service.
	BreakerName string
	// Settings is read once per call, so a reload applies without a
	// restart; nil means S's zero value (nothing configured).
	Settings func() S
	// Call picks the call settings out of S (required).
	Call func(S) Settings
	// Timeout is this client's fallback deadline, used when the call
	// settings' Timeout is ≤ 0 (every call has a deadline).
	Timeout time.Duration
	// Transport is the HTTP transport (default http.DefaultTransport).
	// Plain net/http never replays a POST on its own (only idempotent
	// requests on a reused connection), so a write is sent once per call.
	Transport http.RoundTripper
	// IsSuccessful says an error is a healthy answer that must not count
	// against the breaker (Breaker.IsSuccessful); nil counts every error.
	// It sees the error after Adapt, i.e. in the adapter's own type.
	IsSuccessful func(error) bool
	// IsExcluded says an error counts neither as a success nor as a
	// failure of the breaker (Breaker.IsExcluded), after Adapt.
	IsExcluded func(error) bool
	// Adapt turns this package's *Error (no answer, a body cut short, an
	// unusable or refused answer, the open breaker) into the error the
	// adapter's callers test for; nil keeps *Error. It runs inside the
	// breaker, so IsSuccessful judges what the caller will see.
	Adapt func(*Error) error
}

// Client is the plumbing of one dependency's HTTP client, built the same
// way by every adapter: the settings source read once per call, the
// client's deadline fallback, the one breaker of the dependency (rebuilt
// when breaker.* changes) and the error contract hooks. The adapter keeps
// only its endpoints, its public types and that contract.
type Client[S any] struct {
	service  string
	settings func() S
	call     func(S) Settings
	timeout  time.Duration
	adapt    func(*Error) error
	http     *http.Client
	breaker  Breaker[struct{}]
}

// NewClient returns a Client; it does no I/O.
func NewClient[S any](o Options[S]) *Client[S] {
	if o.Settings == nil {
		o.Settings = func() S { var zero S; return zero }
	}
	if o.Transport == nil {
		o.Transport = http.DefaultTransport
	}
	if o.BreakerName == "" {
		o.BreakerName = o.Service
	}
	c := &Client[S]{service: o.Service, settings: o.Settings, call: o.Call, timeout: o.Timeout,
		adapt: o.Adapt, http: &http.Client{Transport: o.Transport}}
	c.breaker.Name = o.BreakerName
	c.breaker.IsSuccessful = o.IsSuccessful
	c.breaker.IsExcluded = o.IsExcluded
	return c
}

// Settings reads the settings source once; pass the result to Call or Do
// so a call's base URL and its deadline come from the same reading.
func (c *Client[S]) Settings() S { return c.settings() }

// CallSettings is s's call settings with the fallbacks applied: the
// client's deadline and the breaker's 5 failures / 30s.
func (c *Client[S]) CallSettings(s S) Settings { return c.call(s).WithDefaults(c.timeout) }

// HTTP is the plain HTTP client (no deadline, no breaker), for a library
// that is handed a transport and whose calls go through Call.
func (c *Client[S]) HTTP() *http.Client { return c.http }

// Call runs fn through the breaker with the call's deadline (see
// Breaker.Call). An open breaker answers at once with an *Error whose
// BreakerOpen is set, adapted; fn's own error comes back as fn gave it.
func (c *Client[S]) Call(ctx context.Context, s S, op string, fn func(ctx context.Context) error) error {
	_, err := c.breaker.Call(ctx, c.CallSettings(s), func(ctx context.Context) (struct{}, error) {
		return struct{}{}, fn(ctx)
	})
	if IsOpen(err) {
		return c.adapted(&Error{Service: c.service, Op: op, BreakerOpen: true, Message: "circuit open", Err: err})
	}
	return err
}

// Request is one JSON request of Client.Do.
type Request struct {
	// Op names the operation in errors, e.g. "Submit".
	Op     string
	Method string
	URL    string
	// Header is sent as well (Accept and Content-Type are set by Do).
	Header http.Header
	// Body is the JSON body; nil sends none.
	Body []byte
	// Out receives a 2xx answer's JSON (nil: not decoded). Used only when
	// Answer is nil.
	Out any
	// Answer judges the answer when one arrived in full; nil means
	// DecodeAnswer with Out. It runs inside the breaker: what it returns
	// is what the breaker counts (after Adapt, for an *Error).
	Answer func(status int, raw []byte) error
}

// Do sends r through the breaker with the call's deadline, reads at most
// MaxBody of the answer (the package Do) and judges it: no answer, a body
// cut short and the open breaker are *Errors as there; the answer itself
// is r.Answer's (by default a non-2xx is AnswerError and a 2xx is decoded
// into r.Out). Every *Error is adapted before the breaker counts it.
func (c *Client[S]) Do(ctx context.Context, s S, r Request) error {
	answer := r.Answer
	if answer == nil {
		answer = func(status int, raw []byte) error { return DecodeAnswer(c.service, r.Op, status, raw, r.Out) }
	}
	return c.Call(ctx, s, r.Op, func(ctx context.Context) error {
		status, raw, err := Do(ctx, c.http, c.service, r.Op, r.Method, r.URL, r.Header, r.Body)
		if err == nil {
			err = answer(status, raw)
		}
		return c.adapted(err)
	})
}

// adapted is err through Adapt when it is this package's *Error (the
// adapter's own errors pass as they are).
func (c *Client[S]) adapted(err error) error {
	if e, ok := err.(*Error); ok && c.adapt != nil {
		return c.adapt(e)
	}
	return err
}

// Success says status is a 2xx.
func Success(status int) bool { return status >= 200 && status <= 299 }

// DecodeAnswer is the usual judgement of an answer: a non-2xx is
// AnswerError; a 2xx is decoded into out (nil: not read), and one that
// does not decode is an *Error "unusable answer" with that status —
// counted by the breaker, since a working dependency does not answer so.
func DecodeAnswer(service, op string, status int, raw []byte, out any) error {
	if !Success(status) {
		return AnswerError(service, op, status, raw)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return &Error{Service: service, Op: op, Status: status, Message: "unusable answer: " + err.Error(), Err: err}
	}
	return nil
}

// AnswerError is a non-2xx answer as an *Error with its status and the
// dependency's message, read from a body {"message": string} or
// {"error": string} (message first); the status text when there is none.
// A body of another shape yields the status text: the message is for
// people and logs, the status is what callers test.
func AnswerError(service, op string, status int, raw []byte) *Error {
	e := &Error{Service: service, Op: op, Status: status, Message: http.StatusText(status)}
	var b struct {
		Message string `json:"message"`
		Error   string `json:"error"`
	}
	if json.Unmarshal(raw, &b) == nil {
		if b.Message != "" {
			e.Message = b.Message
		} else if b.Error != "" {
			e.Message = b.Error
		}
	}
	return e
}

// JoinURL is base with exactly one "/" before path (path has none of its
// own): configured base URLs come with or without the trailing slash.
func JoinURL(base, path string) string { return strings.TrimSuffix(base, "/") + "/" + path }
