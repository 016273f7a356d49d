package config

import "testing"

// TestKeymapCanonical is the table of how a dotted key from any source is
// matched onto a known key: fixed parts case-insensitively, a target's
// name as written, every other family's entry lower-cased.
func TestKeymapCanonical(t *testing.T) {
	km := newKeymap(itemTable("x"))
	tests := []struct {
		name, key      string
		canon, declare string
		ok             bool
	}{
		{"a flat key in any case", "SERVER.Listen", KeyServerListen, "", true},
		{"a bare target declares it", "targets.Legacy-FTP", "", "Legacy-FTP", true},
		{"a target's field keeps the target's case", "TARGETS.Payments.ACCESSMODE", "targets.Payments.accessMode", "", true},
		{"a target's dotted field", "targets.db.Window.Start", "targets.db.window.start", "", true},
		{"an unknown target field", "targets.db.colour", "", "", false},
		{"a lone family name", "targets", "", "", false},
		{"a rate-limit bucket is lower-cased", "rateLimit.Submit.Limit", "ratelimit.submit.limit", "", true},
		{"a rate-limit key needs its limit", "ratelimit.submit.window", "", "", false},
		{"a route's rules", "Authz.Routes.Ops-Read.Rules", "authz.routes.ops-read.rules", "", true},
		{"a route needs its rules", "authz.routes.ops", "", "", false},
		{"a GitLab token", "GitLab.Tokens.Main", "gitlab.tokens.main", "", true},
		{"a GitLab token has no suffix", "gitlab.tokens.main.x", "", "", false},
		{"a known callback token", "callbacks.tokens.Approval", "callbacks.tokens." + CallbackApproval, "", true},
		{"a previous callback token keeps its capital", "callbacks.tokens.DEPLOYPREVIOUS", "callbacks.tokens." + CallbackDeploy + previousSuffix, "", true},
		{"an unknown callback token stays as given", "callbacks.tokens.Other", "callbacks.tokens.other", "", true},
		{"an HTTP timeout", "HTTP.Timeout.GitLab", "http.timeout.gitlab", "", true},
		{"a blank part", "http.timeout. ", "", "", false},
		{"an empty part", "targets..title", "", "", false},
		{"an unknown family", "nope.a.b", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			canon, declare, ok := km.canonical(tt.key)
			if canon != tt.canon || declare != tt.declare || ok != tt.ok {
				t.Fatalf("canonical(%q) = %q, %q, %v; want %q, %q, %v", tt.key, canon, declare, ok, tt.canon, tt.declare, tt.ok)
			}
		})
	}
}
