// Package permission is the client of the permission service:
// POST {permission.baseURL}/v1/check {subject, ruleCodes} answers
// {granted:[…]}. All a route's rule codes go in one round trip. Every call
// has a deadline and passes a circuit breaker; any failure is an
// error, which the authorization link turns into a denial.
package permission

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"changeflow/internal/config"
	"changeflow/internal/outbound"
)

// Errors of a check. The caller denies on every error alike; these exist
// for logs and tests.
var (
	// ErrNotConfigured: permission.baseURL is unset.
	ErrNotConfigured = errors.New("permission: base URL not configured")
	// ErrBreakerOpen: recent checks failed; this one was not attempted.
	ErrBreakerOpen = errors.New("permission: circuit breaker open")
	// ErrBadAnswer: the service answered something other than 200 with
	// {granted:[…]}.
	ErrBadAnswer = errors.New("permission: unusable answer")
)

// Settings are read on every check, so configuration reloads apply:
// BaseURL is permission.baseURL ("" denies every check: ErrNotConfigured),
// Timeout http.timeout.permission (≤ 0 means 2s), and breaker.*
// (outbound.Endpoint).
type Settings outbound.Endpoint

// SettingsFromConfig reads permission.baseURL, http.timeout.permission and
// breaker.* from a snapshot.
func SettingsFromConfig(s *config.Snapshot) Settings {
	return Settings(outbound.EndpointFromConfig(s, "permission", s.Endpoints().Permission))
}

// call is s's call settings; the client applies the fallbacks.
func (s Settings) call() outbound.Settings { return outbound.Endpoint(s).Call() }

// Options configures a Client.
type Options struct {
	// Settings is called on every check; nil denies everything (no URL).
	Settings func() Settings
	// Transport is the HTTP transport (default http.DefaultTransport).
	Transport http.RoundTripper
}

// Client checks rule codes against the permission service.
type Client struct {
	// out's breaker counts only what says the service itself is unwell:
	// no answer, our deadline, a 5xx (countsAsFailure). A 4xx answer is
	// about the check that got it — typically a subject the service does
	// not know — and denies that caller alone: counting it would let anyone
	// who can send five requests as an unknown user deny every operator for
	// the breaker's open interval.
	out *outbound.Client[Settings]
}

// New returns a Client; it does no I/O.
func New(opts Options) *Client {
	return &Client{out: outbound.NewClient(outbound.Options[Settings]{
		Service: "permission", Settings: opts.Settings, Call: Settings.call, Timeout: 2 * time.Second,
		Transport: opts.Transport, IsSuccessful: func(err error) bool { return !countsAsFailure(err) }, Adapt: adapt,
	})}
}

// StatusError is a non-200 answer from the service. It matches
// ErrBadAnswer with errors.Is.
type StatusError struct {
	// Status is the HTTP status the service answered.
	Status int
}

func (e *StatusError) Error() string { return fmt.Sprintf("%v: status %d", ErrBadAnswer, e.Status) }

// Is makes a StatusError an ErrBadAnswer.
func (e *StatusError) Is(target error) bool { return target == ErrBadAnswer }

// countsAsFailure says err tells about the service's health, so it counts
// towards opening the breaker: a 5xx answer, or any error without an
// answer (transport error, our deadline). A 4xx (429 included: the issue's
// rule is "transport, timeouts and 5xx") and a 200 with an unusable body
// are answers from a service that is up; they deny this check without
// cutting off everybody else. Either way the caller is denied, so what
// this choice trades is only how fast a broken service is short-circuited.
func countsAsFailure(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true // also when the deadline cut the body short
	}
	var se *StatusError
	if errors.As(err, &se) {
		return se.Status >= 500
	}
	return !errors.Is(err, ErrBadAnswer)
}

type checkRequest struct {
	Subject   string   `json:"subject"`
	RuleCodes []string `json:"ruleCodes"`
}

type checkResponse struct {
	Granted *[]string `json:"granted"`
}

// Check asks which of ruleCodes subject holds, in one round trip, and
// returns the granted ones that were asked for (a code the service grants
// without being asked is not trusted). A nil error with an empty list
// means "none granted"; any error means the answer is unknown — the
// caller must deny.
func (c *Client) Check(ctx context.Context, subject string, ruleCodes []string) ([]string, error) {
	cfg := c.out.Settings()
	if cfg.BaseURL == "" {
		return nil, ErrNotConfigured
	}
	if subject == "" || len(ruleCodes) == 0 {
		return nil, errors.New("permission: subject and rule codes are required")
	}
	body, err := json.Marshal(checkRequest{Subject: subject, RuleCodes: ruleCodes})
	if err != nil {
		return nil, err
	}
	var granted []string
	err = c.out.Do(ctx, cfg, outbound.Request{Op: "Check", Method: http.MethodPost, URL: outbound.JoinURL(cfg.BaseURL, "v1/check"), Body: body,
		Answer: func(status int, raw []byte) (err error) { granted, err = answer(status, raw); return err }})
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(granted))
	for _, g := range granted {
		if slices.Contains(ruleCodes, g) && !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	return out, nil
}

// answer reads the grant list of a 200. The body of any other answer is
// not put into the error: it must not reach a log line that could reach a
// client.
func answer(status int, raw []byte) ([]string, error) {
	if status != http.StatusOK {
		return nil, &StatusError{Status: status}
	}
	var out checkResponse
	if err := json.NewDecoder(bytes.NewReader(raw)).Decode(&out); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadAnswer, err)
	}
	if out.Granted == nil {
		return nil, fmt.Errorf("%w: no granted list", ErrBadAnswer)
	}
	return *out.Granted, nil
}

// adapt is this package's error contract for the client's *outbound.Error:
// the open breaker is ErrBreakerOpen; no answer is "permission: <cause>";
// an answer whose body was cut short is what its status makes it (a
// StatusError, or for a 200 an ErrBadAnswer) — the cause kept, so our
// deadline cutting the body still counts against the breaker.
func adapt(e *outbound.Error) error {
	switch {
	case e.BreakerOpen:
		return fmt.Errorf("%w: %w", ErrBreakerOpen, e.Err)
	case e.Status == 0:
		return fmt.Errorf("permission: %w", e.Err)
	case e.Status != http.StatusOK:
		return &StatusError{Status: e.Status}
	default:
		return fmt.Errorf("%w: %w", ErrBadAnswer, e.Err)
	}
}
