// Package outbound is the plumbing every outbound HTTP client of the
// service shares: the per-dependency settings with their clamped
// fallbacks, the circuit breaker rebuilt when breaker.* changes, the error
// carrying the real HTTP status, and the one-request helper that gives a
// call its deadline and bounds what it reads. The approval, permission,
// GitLab and identity clients build on it; each keeps its own public
// types and error contract (which statuses count against its breaker,
// which error a caller tests for), because those differ on purpose.
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
