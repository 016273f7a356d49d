package identity

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"

	"changeflow/internal/config"
)

// DependencySettings are the outbound-call settings of one dependency
// (R-EXT-1), read per call so configuration reloads apply.
type DependencySettings struct {
	// Timeout bounds each call; ≤ 0 means 5s (every call has a deadline).
	Timeout time.Duration
	// BreakerFailures consecutive failures open the breaker (≤ 0 means 5)
	// for BreakerOpenFor (≤ 0 means 30s).
	BreakerFailures int
	BreakerOpenFor  time.Duration
}

// SettingsFromConfig reads dependency's settings from a snapshot:
// http.timeout.<dependency> and breaker.*.
func SettingsFromConfig(s *config.Snapshot, dependency string) DependencySettings {
	to, _ := s.HTTPTimeout(dependency)
	b := s.Breaker()
	return DependencySettings{Timeout: to, BreakerFailures: b.Failures, BreakerOpenFor: b.OpenFor}
}

func (d DependencySettings) withDefaults() DependencySettings {
	if d.Timeout <= 0 {
		d.Timeout = 5 * time.Second
	}
	if d.BreakerFailures <= 0 {
		d.BreakerFailures = 5
	}
	if d.BreakerOpenFor <= 0 {
		d.BreakerOpenFor = 30 * time.Second
	}
	return d
}

// breakerTransport gives every request to one dependency a deadline and
// sends it through the dependency's circuit breaker: transport errors,
// timeouts and 5xx answers count as failures, and while the breaker is
// open requests fail at once without touching the network. The breaker is
// rebuilt when its settings change, which forgets its counts — a reload
// of breaker.* is rare and starting closed is the safe side.
type breakerTransport struct {
	name     string
	next     http.RoundTripper
	settings func() DependencySettings

	mu  sync.Mutex
	cb  *gobreaker.CircuitBreaker[*http.Response]
	cfg DependencySettings
}

func newBreakerTransport(name string, next http.RoundTripper, settings func() DependencySettings) *breakerTransport {
	if next == nil {
		next = http.DefaultTransport
	}
	if settings == nil {
		settings = func() DependencySettings { return DependencySettings{} }
	}
	return &breakerTransport{name: name, next: next, settings: settings}
}

func (t *breakerTransport) breaker(s DependencySettings) *gobreaker.CircuitBreaker[*http.Response] {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cb == nil || t.cfg.BreakerFailures != s.BreakerFailures || t.cfg.BreakerOpenFor != s.BreakerOpenFor {
		failures := uint32(s.BreakerFailures)
		t.cb = gobreaker.NewCircuitBreaker[*http.Response](gobreaker.Settings{
			Name:        t.name,
			Timeout:     s.BreakerOpenFor,
			ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= failures },
			// The caller going away says nothing about the dependency.
			IsExcluded: func(err error) bool { return errors.Is(err, context.Canceled) },
		})
		t.cfg = s
	}
	return t.cb
}

// serverError carries a 5xx answer through the breaker as a failure.
type serverError struct{ resp *http.Response }

func (e *serverError) Error() string {
	return fmt.Sprintf("%s answered %d", e.resp.Request.URL.Host, e.resp.StatusCode)
}

func (t *breakerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	s := t.settings().withDefaults()
	cb := t.breaker(s)
	ctx, cancel := context.WithTimeout(req.Context(), s.Timeout)
	resp, err := cb.Execute(func() (*http.Response, error) {
		resp, err := t.next.RoundTrip(req.WithContext(ctx))
		if err != nil {
			return nil, err
		}
		if resp.StatusCode >= 500 {
			return resp, &serverError{resp: resp}
		}
		return resp, nil
	})
	if se, ok := errors.AsType[*serverError](err); ok {
		resp, err = se.resp, nil
	}
	if err != nil {
		cancel()
		return nil, fmt.Errorf("%s: %w", t.name, err)
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelOnClose releases the call's deadline once the body is consumed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}
