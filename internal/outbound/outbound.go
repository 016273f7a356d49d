// Package outbound is the plumbing every outbound HTTP client of the
// service shares: Client, built the same way by each adapter from its
// settings source, its dependency's name and its deadline fallback, owning
// the dependency's circuit breaker (rebuilt when breaker.* changes) and
// doing one request with its deadline, a bounded read and the error
// carrying the real HTTP status. The approval, permission, GitLab and
// identity clients build on it; each keeps its endpoints, its public types
// and its error contract (which statuses count against its breaker, which
// error a caller tests for), because those differ on purpose.
package outbound

import (
	"time"

	"changeflow/internal/config"
)

// The fallbacks of the breaker settings, shared by every dependency; the
// deadline's fallback is each client's own (GitLab 10s, approval 5s,
// permission 2s, identity 5s), so it is an argument of WithDefaults.
const (
	DefaultBreakerFailures = 5
	DefaultBreakerOpenFor  = 30 * time.Second
)

// Settings are one dependency's call settings, read on every call so a
// configuration reload applies without a restart.
type Settings struct {
	// Timeout bounds each call; ≤ 0 means the client's fallback (every
	// call has a deadline).
	Timeout time.Duration
	// BreakerFailures consecutive failures open the breaker (≤ 0 means 5)
	// for BreakerOpenFor (≤ 0 means 30s).
	BreakerFailures int
	BreakerOpenFor  time.Duration
}

// SettingsFromConfig reads http.timeout.<dependency> and breaker.* from a
// snapshot.
func SettingsFromConfig(s *config.Snapshot, dependency string) Settings {
	to, _ := s.HTTPTimeout(dependency)
	b := s.Breaker()
	return Settings{Timeout: to, BreakerFailures: b.Failures, BreakerOpenFor: b.OpenFor}
}

// WithDefaults replaces every value ≤ 0 by its fallback: timeout for the
// deadline, DefaultBreakerFailures and DefaultBreakerOpenFor.
func (s Settings) WithDefaults(timeout time.Duration) Settings {
	if s.Timeout <= 0 {
		s.Timeout = timeout
	}
	if s.BreakerFailures <= 0 {
		s.BreakerFailures = DefaultBreakerFailures
	}
	if s.BreakerOpenFor <= 0 {
		s.BreakerOpenFor = DefaultBreakerOpenFor
	}
	return s
}

// Endpoint is the settings of a dependency reached at one base URL with
// no credentials of its own (the approval system, the permission
// service). Such an adapter declares its Settings as this type, so its
// callers still write approval.Settings{BaseURL: …, Timeout: …} while the
// fields and their reading are written once; the adapter's doc says what
// its fallback deadline is and what an empty BaseURL does to a call.
type Endpoint struct {
	// BaseURL is <dependency>.baseURL.
	BaseURL string
	// Timeout bounds one call; ≤ 0 means the client's fallback.
	Timeout time.Duration
	// BreakerFailures consecutive failures (≤ 0 means 5) open the breaker
	// for BreakerOpenFor (≤ 0 means 30s).
	BreakerFailures int
	BreakerOpenFor  time.Duration
}

// EndpointFromConfig reads http.timeout.<dependency> and breaker.* from a
// snapshot, with baseURL (the snapshot's <dependency>.baseURL).
func EndpointFromConfig(s *config.Snapshot, dependency, baseURL string) Endpoint {
	o := SettingsFromConfig(s, dependency)
	return Endpoint{BaseURL: baseURL, Timeout: o.Timeout, BreakerFailures: o.BreakerFailures, BreakerOpenFor: o.BreakerOpenFor}
}

// Call is e's call settings, fallbacks not yet applied (Client does).
func (e Endpoint) Call() Settings {
	return Settings{Timeout: e.Timeout, BreakerFailures: e.BreakerFailures, BreakerOpenFor: e.BreakerOpenFor}
}
