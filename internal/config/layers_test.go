package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
)

func TestLayerPrecedence(t *testing.T) {
	file := "batch:\n  maxRequests: 10\n"
	for _, c := range []struct {
		name    string
		file    bool
		environ []string
		overlay map[string]any
		want    int
		source  string
	}{
		{"built-in default alone", false, nil, nil, 50, SourceDefault},
		{"file beats default", true, nil, nil, 10, SourceFile},
		{"env beats file", true, []string{"CHANGEFLOW_BATCH_MAXREQUESTS=20"}, nil, 20, SourceEnv},
		{"overlay beats env", true, []string{"CHANGEFLOW_BATCH_MAXREQUESTS=20"}, map[string]any{"batch.maxRequests": 30}, 30, SourceOverlay},
		{"overlay beats default without file", false, nil, map[string]any{"batch": map[string]any{"maxRequests": 30}}, 30, SourceOverlay},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := testOptions("")
			if c.file {
				o.File = writeFile(t, t.TempDir(), "changeflow.yaml", file)
			}
			o.Environ, o.Overlay = c.environ, c.overlay
			n, r := mustLoad(t, o).Current().Int(KeyBatchMaxRequests)
			require.Equal(t, c.want, n)
			require.Equal(t, c.source, r.Source)
		})
	}
}

func TestEnvironmentNames(t *testing.T) {
	file := `
targets:
  payments-db-readonly: {accessMode: CLOSED}
  prod-console: {accessMode: TEST_WINDOW}
gitlab:
  projects: [1]
`
	load := func(t *testing.T, environ []string) *Snapshot {
		t.Helper()
		o := testOptions(writeFile(t, t.TempDir(), "changeflow.yaml", file))
		o.Environ = environ
		return mustLoad(t, o).Current()
	}
	t.Run("camelCase keys are matched case-insensitively", func(t *testing.T) {
		s := load(t, []string{"CHANGEFLOW_WORKFLOW_APPROVEFIRST=true", "CHANGEFLOW_polling_rebase_SHORTATTEMPTS=4"})
		require.True(t, s.Workflow().ApproveFirst)
		require.Equal(t, 4, s.Polling(PollingRebase).ShortAttempts)
		require.Empty(t, s.Unknown())
	})
	t.Run("underscores reach a target key with dashes declared in the file", func(t *testing.T) {
		s := load(t, []string{"CHANGEFLOW_TARGETS_PAYMENTS_DB_READONLY_ACCESSMODE=open"})
		tg, _ := s.Target("payments-db-readonly")
		require.Equal(t, domain.AccessOpen, tg.AccessMode)
		r, _ := s.Resolution("targets.payments-db-readonly.accessMode")
		require.Equal(t, SourceEnv, r.Source)
		require.Len(t, s.Targets(), 2, "no second target is invented")
	})
	t.Run("a literal dash in the name works too", func(t *testing.T) {
		s := load(t, []string{"CHANGEFLOW_TARGETS_PAYMENTS-DB-READONLY_ACCESSMODE=OPEN"})
		tg, _ := s.Target("payments-db-readonly")
		require.Equal(t, domain.AccessOpen, tg.AccessMode)
	})
	t.Run("window fields of a target", func(t *testing.T) {
		s := load(t, []string{"CHANGEFLOW_TARGETS_PROD_CONSOLE_WINDOW_START=09:00", "CHANGEFLOW_TARGETS_PROD_CONSOLE_WINDOW_END=17:00"})
		tg, _ := s.Target("prod-console")
		open, why := tg.Open(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
		require.True(t, open, why)
	})
	t.Run("an undeclared target is created lower-cased", func(t *testing.T) {
		s := load(t, []string{"CHANGEFLOW_TARGETS_SCRATCH_ACCESSMODE=OPEN"})
		tg, ok := s.Target("scratch")
		require.True(t, ok)
		require.Equal(t, domain.AccessOpen, tg.AccessMode)
	})
	t.Run("families: buckets, routes, tokens, timeouts", func(t *testing.T) {
		s := load(t, []string{
			"CHANGEFLOW_RATELIMIT_PREVIEW_LIMIT=5",
			"CHANGEFLOW_RATELIMIT_APPLY_LIMIT=0",
			"CHANGEFLOW_AUTHZ_ROUTES_OPS_CONFIG_GET_RULES=auditor, admin",
			"CHANGEFLOW_GITLAB_TOKENS_COMMITTER=tok",
			"CHANGEFLOW_CALLBACKS_TOKENS_DEPLOY=cb",
			"CHANGEFLOW_HTTP_TIMEOUT_GITLAB=3",
		})
		limit, _, _ := s.RateLimit("preview")
		require.Equal(t, 5, limit)
		limit, _, r := s.RateLimit("apply")
		require.Zero(t, limit)
		require.Equal(t, SourceEnv, r.Source)
		rules, r := s.RouteRules(RouteOpsConfigGet)
		require.Equal(t, []string{"auditor", "admin"}, rules)
		require.Equal(t, SourceEnv, r.Source)
		tok, ok, _ := s.GitLabToken("committer")
		require.True(t, ok)
		require.Equal(t, "tok", tok)
		tok, ok, _ = s.CallbackToken("deploy")
		require.True(t, ok)
		require.Equal(t, "cb", tok)
		d, _ := s.HTTPTimeout("gitlab")
		require.Equal(t, 3*time.Second, d)
	})
	t.Run("lists are comma-separated", func(t *testing.T) {
		s := load(t, []string{"CHANGEFLOW_GITLAB_PROJECTS=1, group/proj", "CHANGEFLOW_RATELIMIT_TRUSTEDPROXIES=[10.0.0.0/8]"})
		p, _ := s.List(KeyGitLabProjects)
		require.Equal(t, []string{"1", "group/proj"}, p)
		tp, _ := s.TrustedProxies()
		require.Len(t, tp, 1)
	})
	t.Run("an empty variable counts as unset", func(t *testing.T) {
		s := load(t, []string{"CHANGEFLOW_GITLAB_PROJECTS="})
		p, r := s.List(KeyGitLabProjects)
		require.Equal(t, []string{"1"}, p)
		require.Equal(t, SourceFile, r.Source)
	})
	t.Run("a whitespace variable is set and falls back", func(t *testing.T) {
		s := load(t, []string{"CHANGEFLOW_BATCH_MAXREQUESTS=  "})
		n, r := s.Int(KeyBatchMaxRequests)
		require.Equal(t, 50, n)
		require.True(t, r.FellBack)
		require.Equal(t, SourceEnv, r.Source)
	})
	t.Run("test harness and foreign variables are not configuration", func(t *testing.T) {
		s := load(t, []string{"CHANGEFLOW_TEST_ETCD=http://x", "HOME=/root", "CHANGEFLOW_NOPE=1", "CHANGEFLOW_WORKFLOW_APROVEFIRST=true"})
		require.Equal(t, []string{"env: CHANGEFLOW_NOPE", "env: CHANGEFLOW_WORKFLOW_APROVEFIRST"}, s.Unknown())
	})
	t.Run("getenv alone reaches the flat items", func(t *testing.T) {
		o := testOptions("")
		o.Getenv = func(k string) string {
			return map[string]string{"CHANGEFLOW_SERVER_LISTEN": ":9999", "CHANGEFLOW_DATABASE_DRIVER": "SQLITE"}[k]
		}
		s := mustLoad(t, o).Current()
		require.Equal(t, ":9999", s.Server().Listen)
		r, _ := s.Resolution(KeyServerListen)
		require.Equal(t, SourceEnv, r.Source)
	})
	t.Run("getenv wins over a stale environ entry", func(t *testing.T) {
		o := testOptions("")
		o.Environ = []string{"CHANGEFLOW_SERVER_LISTEN=:1"}
		o.Getenv = func(k string) string {
			if k == "CHANGEFLOW_SERVER_LISTEN" {
				return ":2"
			}
			return ""
		}
		require.Equal(t, ":2", mustLoad(t, o).Current().Server().Listen)
	})
}

func TestEveryFlatItemHasAnEnvironmentName(t *testing.T) {
	t.Parallel()
	for _, it := range itemTable("x") {
		if it.key == KeyDatabaseDriver || it.key == KeyDatabaseDSN {
			continue // a bad value there is a startup error, covered elsewhere
		}
		t.Run(it.key, func(t *testing.T) {
			o := testOptions("")
			o.Environ = []string{envPrefix + envName(it.key) + "=  "}
			if it.key == KeyEtcdEndpoints {
				o.Environ = append(o.Environ, "CHANGEFLOW_CONFIG_ETCD_DIALTIMEOUT=100ms")
			}
			r, ok := mustLoad(t, o).Current().Resolution(it.key)
			require.True(t, ok)
			require.Equal(t, SourceEnv, r.Source, "CHANGEFLOW_%s must map to %s", envName(it.key), it.key)
		})
	}
}

func TestOverlayAcceptsNestedAndDottedKeys(t *testing.T) {
	o := testOptions("")
	o.Overlay = map[string]any{
		"sim.embedded": true,
		"targets": map[string]any{
			"local-demo": map[string]any{"accessMode": "OPEN", "batching": false},
		},
	}
	s := mustLoad(t, o).Current()
	require.True(t, s.Endpoints().SimEmbedded)
	tg, ok := s.Target("local-demo")
	require.True(t, ok)
	require.Equal(t, domain.AccessOpen, tg.AccessMode)
	require.False(t, tg.Batching)
}
