package identity

import (
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

// newIssuerClient is the plumbing of every call to the issuer (discovery
// and JWKS): a 5s deadline fallback and the "oidc" breaker, which counts
// transport errors, timeouts and 5xx answers; any other answer is a
// success. Those reads go through its RoundTripper, which keeps the
// deadline until the body is closed.
func newIssuerClient(settings func() DependencySettings, tr http.RoundTripper) *outbound.Client[DependencySettings] {
	return outbound.NewClient(outbound.Options[DependencySettings]{
		Service: "oidc", Settings: settings, Call: func(s DependencySettings) outbound.Settings { return s },
		Timeout: 5 * time.Second, Transport: tr,
	})
}
