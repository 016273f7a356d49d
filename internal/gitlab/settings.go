package gitlab

import (
	"strings"
	"time"

	"changeflow/internal/config"
	"changeflow/internal/outbound"
)

// Settings are read on every call, so configuration reloads apply without
// a restart (a changed base URL or token builds a new client).
type Settings struct {
	// BaseURL is gitlab.baseURL, GitLab's root ("…/gitlab/"); /api/v4 is
	// appended. "" fails every call with a *Error (Status 0).
	BaseURL string
	// Tokens are gitlab.tokens.{committer,approver1,approver2,doctor}.
	Tokens Bots
	// Timeout is http.timeout.gitlab, the deadline of one call; ≤ 0 means 10s.
	Timeout time.Duration
	// BreakerFailures consecutive failures (≤ 0 means 5) open the GitLab
	// breaker for BreakerOpenFor (≤ 0 means 30s).
	BreakerFailures int
	BreakerOpenFor  time.Duration
	// APIPerMinute and PipelinesPerMinute are gitlab.rateLimit.*: this
	// instance's pace (0 = unpaced; see Pacer).
	APIPerMinute       int
	PipelinesPerMinute int
}

// SettingsFromConfig reads gitlab.baseURL, gitlab.tokens.*,
// http.timeout.gitlab and breaker.* from a snapshot.
func SettingsFromConfig(s *config.Snapshot) Settings {
	o := outbound.SettingsFromConfig(s, "gitlab")
	tok := func(name string) string { t, _, _ := s.GitLabToken(name); return t }
	return Settings{
		BaseURL: s.Endpoints().GitLab,
		Tokens: Bots{
			Committer: tok(string(Committer)),
			Approver1: tok(string(Approver1)),
			Approver2: tok(string(Approver2)),
			Doctor:    tok(string(Doctor)),
		},
		Timeout:         o.Timeout,
		BreakerFailures: o.BreakerFailures,
		BreakerOpenFor:  o.BreakerOpenFor,

		APIPerMinute:       s.GitLabRateLimit().APIPerMinute,
		PipelinesPerMinute: s.GitLabRateLimit().PipelinesPerMinute,
	}
}

// call is s's call settings; the client applies the fallbacks (a 10s
// deadline, the breaker's).
func (s Settings) call() outbound.Settings {
	return outbound.Settings{Timeout: s.Timeout, BreakerFailures: s.BreakerFailures, BreakerOpenFor: s.BreakerOpenFor}
}

// apiBase is BaseURL with exactly one trailing "/api/v4/".
func (s Settings) apiBase() string {
	b := strings.TrimSuffix(s.BaseURL, "/")
	b = strings.TrimSuffix(b, "/api/v4")
	return b + "/api/v4/"
}
