package config

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
)

func TestRateLimitFallsOpen(t *testing.T) {
	for _, c := range []struct {
		name, yaml string
		want       int
		fellBack   bool
		reason     string
	}{
		{"missing apply uses the built-in 10", missing, 10, false, reasonBuiltin},
		{"configured limit is used", `25`, 25, false, ""},
		{"limit as text is used", `"25"`, 25, false, ""},
		{"empty means no limiting", `""`, 0, true, "fell back: empty → no limiting"},
		{"null means no limiting", ``, 0, true, "empty → no limiting"},
		{"whitespace means no limiting", `"  "`, 0, true, "empty → no limiting"},
		{"zero means no limiting", `0`, 0, true, "value '0' ≤ 0 → no limiting"},
		{"negative means no limiting", `-3`, 0, true, "value '-3' ≤ 0 → no limiting"},
		{"non-numeric means no limiting", `abc`, 0, true, "fell back: value 'abc' not a number → no limiting"},
		{"misspelled number means no limiting", `"1O"`, 0, true, "not a number → no limiting"},
		{"fraction means no limiting", `2.5`, 0, true, "not a whole number → no limiting"},
		{"a list means no limiting", `[10]`, 0, true, "not a number"},
	} {
		t.Run(c.name, func(t *testing.T) {
			doc := "ratelimit:\n  window: 30s\n"
			if c.yaml != missing {
				doc += "  apply:\n    limit: " + c.yaml + "\n"
			}
			limit, window, r := loadYAML(t, doc).RateLimit("apply")
			require.Equal(t, c.want, limit)
			require.Equal(t, 30*time.Second, window)
			require.Equal(t, c.fellBack, r.FellBack)
			if c.fellBack || c.yaml == missing {
				require.NotEmpty(t, r.Reason)
			}
			require.Contains(t, r.Reason, c.reason)
		})
	}
	t.Run("an unconfigured bucket is not limited", func(t *testing.T) {
		limit, window, r := loadYAML(t, "{}\n").RateLimit("unconfigured")
		require.Zero(t, limit)
		require.Equal(t, time.Minute, window)
		require.True(t, r.FellBack)
		require.Equal(t, "fell back: missing → no limiting", r.Reason)
	})
	t.Run("bucket names are case-insensitive", func(t *testing.T) {
		s := loadYAML(t, "ratelimit:\n  Reports:\n    LIMIT: 3\n")
		limit, _, _ := s.RateLimit("REPORTS")
		require.Equal(t, 3, limit)
		require.Equal(t, []string{"admincheck", "apply", "authz", "callbacks", "events", "preview", "reports", "stats"}, s.Buckets())
	})
}

func TestRouteRulesDenyWhenMissing(t *testing.T) {
	for _, c := range []struct {
		name, yaml string
		want       []string
		fellBack   bool
		reason     string
	}{
		{"list is used", `[ops.read, admin]`, []string{"ops.read", "admin"}, false, ""},
		{"comma-separated text is used", `"ops.read, admin"`, []string{"ops.read", "admin"}, false, ""},
		{"single code is a list of one", `admin`, []string{"admin"}, false, ""},
		{"empty means deny", `""`, []string{}, true, "fell back: empty → deny"},
		{"empty list means deny", `[]`, []string{}, true, "fell back: empty → deny"},
		{"null means deny", ``, []string{}, true, "empty → deny"},
		{"only blank entries mean deny", `["", "  "]`, []string{}, true, "only blank entries → deny"},
		{"blank entries are dropped", `[admin, ""]`, []string{"admin"}, true, "dropped 1 blank entry"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := loadYAML(t, "authz:\n  routes:\n    my-route:\n      rules: "+c.yaml+"\n")
			rules, r := s.RouteRules("my-route")
			require.Equal(t, c.want, rules)
			require.Equal(t, c.fellBack, r.FellBack)
			require.Contains(t, r.Reason, c.reason)
		})
	}
	t.Run("a route nobody configured is denied", func(t *testing.T) {
		rules, r := loadYAML(t, "{}\n").RouteRules("other")
		require.Empty(t, rules)
		require.True(t, r.FellBack)
		require.Equal(t, "fell back: missing → deny", r.Reason)
	})
	t.Run("ops routes have built-in rules that configuration can replace", func(t *testing.T) {
		s := loadYAML(t, "authz:\n  routes:\n    OPS-CONFIG-GET:\n      rules: [auditor]\n")
		rules, r := s.RouteRules(RouteOpsConfigGet)
		require.Equal(t, []string{"auditor"}, rules)
		require.Equal(t, SourceFile, r.Source)
		rules, r = s.RouteRules(RouteOpsRoundsRun)
		require.Equal(t, []string{"ops.write", "admin"}, rules)
		require.Equal(t, SourceDefault, r.Source)
	})
	t.Run("the returned slice is a copy", func(t *testing.T) {
		s := loadYAML(t, "{}\n")
		rules, _ := s.RouteRules(RouteOpsConfigGet)
		rules[0] = "everyone"
		again, _ := s.RouteRules(RouteOpsConfigGet)
		require.Equal(t, "ops.read", again[0])
	})
}

func TestCallbackTokensRejectWhenMissing(t *testing.T) {
	s := loadYAML(t, "callbacks:\n  tokens:\n    approval: \" s3cret \"\n    deploy: \"  \"\n")
	tok, ok, r := s.CallbackToken("approval")
	require.True(t, ok)
	require.Equal(t, "s3cret", tok, "tokens are trimmed")
	require.Equal(t, masked, r.Value)

	tok, ok, r = s.CallbackToken(CallbackDeploy)
	require.False(t, ok)
	require.Empty(t, tok)
	require.True(t, r.FellBack)
	require.Equal(t, "fell back: empty → reject every callback", r.Reason)

	_, ok, r = s.CallbackToken(CallbackGitLab)
	require.False(t, ok)
	require.Equal(t, "fell back: missing → reject every callback", r.Reason)

	_, ok, r = s.CallbackToken("unheard-of")
	require.False(t, ok)
	require.True(t, r.FellBack)

	for _, e := range s.Effective() {
		require.NotContains(t, e.Value, "s3cret", e.Key)
	}
	keys := map[string]bool{}
	for _, e := range s.Effective() {
		keys[e.Key] = true
	}
	for _, name := range []string{"approval", "deploy", "gitlab"} {
		require.True(t, keys["callbacks.tokens."+name], "every callback token is listed, set or not")
	}
}

func TestGitLabTokens(t *testing.T) {
	s := loadYAML(t, "gitlab:\n  tokens:\n    committer: abc\n    Approver1: \"\"\n")
	tok, ok, r := s.GitLabToken("committer")
	require.True(t, ok)
	require.Equal(t, "abc", tok)
	require.Equal(t, masked, r.Value)
	_, ok, r = s.GitLabToken("approver1")
	require.False(t, ok)
	require.Equal(t, "fell back: empty → no token", r.Reason)
	_, ok, r = s.GitLabToken("approver2")
	require.False(t, ok)
	require.Equal(t, "fell back: missing → no token", r.Reason)
	require.Equal(t, []string{"approver1", "committer"}, s.GitLabTokenNames())
}

func TestHTTPTimeoutsAlwaysHaveADeadline(t *testing.T) {
	s := loadYAML(t, "http:\n  timeout:\n    gitlab: 3s\n    approval: -1s\n    permission: abc\n    deploy: 250ms\n")
	for _, c := range []struct {
		dep      string
		want     time.Duration
		fellBack bool
		reason   string
	}{
		{"gitlab", 3 * time.Second, false, ""},
		{"approval", time.Millisecond, true, "negative → clamped to 1ms"},
		{"permission", 2 * time.Second, true, "value 'abc' not a duration → default 2s"},
		{"oidc", 5 * time.Second, false, reasonBuiltin},
		{"deploy", 250 * time.Millisecond, false, ""},
		{"unlisted", 10 * time.Second, false, "unlisted"},
	} {
		t.Run(c.dep, func(t *testing.T) {
			d, r := s.HTTPTimeout(c.dep)
			require.Equal(t, c.want, d)
			require.Equal(t, c.fellBack, r.FellBack)
			require.Contains(t, r.Reason, c.reason)
		})
	}
}

func TestEffectiveIsSortedAndComplete(t *testing.T) {
	s := loadYAML(t, "targets:\n  b: {accessMode: OPEN}\n  a: {accessMode: CLOSED}\nratelimit:\n  preview: {limit: 5}\n")
	eff := s.Effective()
	seen := map[string]bool{}
	for i, r := range eff {
		if i > 0 {
			require.Less(t, eff[i-1].Key, r.Key)
		}
		require.NotEmpty(t, r.Source, r.Key)
		if r.FellBack {
			require.NotEmpty(t, r.Reason, r.Key)
		}
		seen[r.Key] = true
	}
	for _, it := range itemTable("x") {
		require.True(t, seen[it.key], "every item is listed: %s", it.key)
	}
	for _, k := range []string{"targets.a.accessMode", "targets.b.window.end", "ratelimit.preview.limit", "ratelimit.apply.limit", "authz.routes.ops-config-get.rules", "http.timeout.gitlab"} {
		require.True(t, seen[k], k)
	}
	require.Equal(t, []string{"a", "b"}, []string{s.Targets()[0].Key, s.Targets()[1].Key})
}

// TestGetenvAloneReachesDeclaredFamilies covers the binary's case: run has
// only a getenv, no environment list, and must still override a declared
// target's field and a built-in bucket's limit.
func TestGetenvAloneReachesDeclaredFamilies(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "changeflow.yaml")
	if err := os.WriteFile(file, []byte("targets:\n  payments-db-readonly:\n    accessMode: OPEN\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"CHANGEFLOW_TARGETS_PAYMENTS_DB_READONLY_ACCESSMODE": "CLOSED",
		"CHANGEFLOW_RATELIMIT_APPLY_LIMIT":                   "3",
	}
	m, err := Load(context.Background(), Options{File: file, Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tg, ok := m.Current().Target("payments-db-readonly")
	if !ok || tg.AccessMode != domain.AccessClosed {
		t.Fatalf("target = %+v, %v; want accessMode CLOSED from the environment", tg, ok)
	}
	if limit, _, _ := m.Current().RateLimit("apply"); limit != 3 {
		t.Fatalf("apply limit = %d, want 3 from the environment", limit)
	}
}
