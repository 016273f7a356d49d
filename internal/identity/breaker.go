package identity

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"changeflow/internal/config"
	"changeflow/internal/outbound"
)

// DependencySettings are the outbound-call settings of one dependency,
// read per call so configuration reloads apply: Timeout bounds
// each call (≤ 0 means 5s: every call has a deadline); BreakerFailures
// consecutive failures open the breaker (≤ 0 means 5) for BreakerOpenFor
// (≤ 0 means 30s).
type DependencySettings = outbound.Settings

// SettingsFromConfig reads dependency's settings from a snapshot:
// http.timeout.<dependency> and breaker.*.
func SettingsFromConfig(s *config.Snapshot, dependency string) DependencySettings {
	return outbound.SettingsFromConfig(s, dependency)
}

// withDefaults is d with the fallbacks (a 5s deadline, the breaker's).
func withDefaults(d DependencySettings) DependencySettings { return d.WithDefaults(5 * time.Second) }

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
	// breaker counts transport errors, timeouts and 5xx (serverError) as
	// failures; any other answer is a success.
	breaker outbound.Breaker[*http.Response]
}

func newBreakerTransport(name string, next http.RoundTripper, settings func() DependencySettings) *breakerTransport {
	if next == nil {
		next = http.DefaultTransport
	}
	if settings == nil {
		settings = func() DependencySettings { return DependencySettings{} }
	}
	t := &breakerTransport{name: name, next: next, settings: settings}
	t.breaker.Name = name
	return t
}

// serverError carries a 5xx answer through the breaker as a failure.
type serverError struct{ resp *http.Response }

func (e *serverError) Error() string {
	return fmt.Sprintf("%s answered %d", e.resp.Request.URL.Host, e.resp.StatusCode)
}

func (t *breakerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	s := withDefaults(t.settings())
	cb := t.breaker.For(s)
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
