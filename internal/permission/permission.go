// Package permission is the client of the permission service (R-AUTH-1):
// POST {permission.baseURL}/v1/check {subject, ruleCodes} answers
// {granted:[…]}. All a route's rule codes go in one round trip. Every call
// has a deadline and passes a circuit breaker (R-EXT-1); any failure is an
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
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"

	"changeflow/internal/config"
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
	to, _ := s.HTTPTimeout("permission")
	b := s.Breaker()
	return Settings{BaseURL: s.Endpoints().Permission, Timeout: to, BreakerFailures: b.Failures, BreakerOpenFor: b.OpenFor}
}

func (s Settings) withDefaults() Settings {
	if s.Timeout <= 0 {
		s.Timeout = 2 * time.Second
	}
	if s.BreakerFailures <= 0 {
		s.BreakerFailures = 5
	}
	if s.BreakerOpenFor <= 0 {
		s.BreakerOpenFor = 30 * time.Second
	}
	return s
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

	mu  sync.Mutex
	cb  *gobreaker.CircuitBreaker[[]string]
	cfg Settings
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
	return &Client{settings: settings, http: &http.Client{Transport: tr}}
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
	s := c.settings().withDefaults()
	if s.BaseURL == "" {
		return nil, ErrNotConfigured
	}
	if subject == "" || len(ruleCodes) == 0 {
		return nil, errors.New("permission: subject and rule codes are required")
	}
	body, err := json.Marshal(checkRequest{Subject: subject, RuleCodes: ruleCodes})
	if err != nil {
		return nil, err
	}
	url := strings.TrimSuffix(s.BaseURL, "/") + "/v1/check"
	granted, err := c.breaker(s).Execute(func() ([]string, error) {
		ctx, cancel := context.WithTimeout(ctx, s.Timeout)
		defer cancel()
		return c.call(ctx, url, body)
	})
	switch {
	case errors.Is(err, gobreaker.ErrOpenState), errors.Is(err, gobreaker.ErrTooManyRequests):
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
		return nil, fmt.Errorf("%w: status %d", ErrBadAnswer, resp.StatusCode)
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

// breaker returns the breaker for s, rebuilt when breaker.* changed (which
// forgets its counts: rare, and starting closed is the safe side).
func (c *Client) breaker(s Settings) *gobreaker.CircuitBreaker[[]string] {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cb == nil || c.cfg.BreakerFailures != s.BreakerFailures || c.cfg.BreakerOpenFor != s.BreakerOpenFor {
		failures := uint32(s.BreakerFailures)
		c.cb = gobreaker.NewCircuitBreaker[[]string](gobreaker.Settings{
			Name:        "permission",
			Timeout:     s.BreakerOpenFor,
			ReadyToTrip: func(n gobreaker.Counts) bool { return n.ConsecutiveFailures >= failures },
			// The caller going away says nothing about the service; our
			// own deadline passing does (DeadlineExceeded is counted).
			IsExcluded: func(err error) bool { return errors.Is(err, context.Canceled) },
		})
		c.cfg = s
	}
	return c.cb
}
