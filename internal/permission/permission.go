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
	"io"
	"net/http"
	"slices"
	"strings"
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

// Settings are read per call, so configuration reloads apply.
type Settings struct {
	// BaseURL is permission.baseURL; "" denies every check.
	BaseURL string
	// Timeout bounds one check; ≤ 0 means 2s.
	Timeout time.Duration
	// BreakerFailures consecutive failures (≤ 0 means 5) open the breaker
	// for BreakerOpenFor (≤ 0 means 30s).
	BreakerFailures int
	BreakerOpenFor  time.Duration
}

// SettingsFromConfig reads permission.baseURL, http.timeout.permission and
// breaker.* from a snapshot.
func SettingsFromConfig(s *config.Snapshot) Settings {
	o := outbound.SettingsFromConfig(s, "permission")
	return Settings{BaseURL: s.Endpoints().Permission, Timeout: o.Timeout, BreakerFailures: o.BreakerFailures, BreakerOpenFor: o.BreakerOpenFor}
}

// call is s's call settings with the fallbacks applied (2s deadline).
func (s Settings) call() outbound.Settings {
	return outbound.Settings{Timeout: s.Timeout, BreakerFailures: s.BreakerFailures, BreakerOpenFor: s.BreakerOpenFor}.WithDefaults(2 * time.Second)
}

// Options configures a Client.
type Options struct {
	// Settings is called on every check; nil denies everything (no URL).
	Settings func() Settings
	// Transport is the HTTP transport (default http.DefaultTransport).
	Transport http.RoundTripper
}

// Client checks rule codes against the permission service.
type Client struct {
	settings func() Settings
	http     *http.Client
	// breaker counts only what says the service itself is unwell: no
	// answer, our deadline, a 5xx (countsAsFailure). A 4xx answer is about
	// the check that got it — typically a subject the service does not know
	// — and denies that caller alone: counting it would let anyone who can
	// send five requests as an unknown user deny every operator for the
	// breaker's open interval.
	breaker outbound.Breaker[[]string]
}

// New returns a Client; it does no I/O.
func New(opts Options) *Client {
	settings := opts.Settings
	if settings == nil {
		settings = func() Settings { return Settings{} }
	}
	tr := opts.Transport
	if tr == nil {
		tr = http.DefaultTransport
	}
	c := &Client{settings: settings, http: &http.Client{Transport: tr}}
	c.breaker.Name = "permission"
	c.breaker.IsSuccessful = func(err error) bool { return !countsAsFailure(err) }
	return c
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

// maxAnswer bounds the answer read: a grant list is small, and a huge
// body from a broken service must not be read into memory.
const maxAnswer = 1 << 20

// Check asks which of ruleCodes subject holds, in one round trip, and
// returns the granted ones that were asked for (a code the service grants
// without being asked is not trusted). A nil error with an empty list
// means "none granted"; any error means the answer is unknown — the
// caller must deny.
func (c *Client) Check(ctx context.Context, subject string, ruleCodes []string) ([]string, error) {
	cfg := c.settings()
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
	url := strings.TrimSuffix(cfg.BaseURL, "/") + "/v1/check"
	granted, err := c.breaker.Call(ctx, cfg.call(), func(ctx context.Context) ([]string, error) {
		return c.call(ctx, url, body)
	})
	switch {
	case outbound.IsOpen(err):
		return nil, fmt.Errorf("%w: %w", ErrBreakerOpen, err)
	case err != nil:
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

func (c *Client) call(ctx context.Context, url string, body []byte) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("permission: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("permission: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// The upstream body is not read into the error: it must not reach
		// a log line that could reach a client.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
		return nil, &StatusError{Status: resp.StatusCode}
	}
	var out checkResponse
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswer)).Decode(&out); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadAnswer, err)
	}
	if out.Granted == nil {
		return nil, fmt.Errorf("%w: no granted list", ErrBadAnswer)
	}
	return *out.Granted, nil
}
