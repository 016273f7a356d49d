package config

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// textCase is one value of a text-like item and its expected resolution.
type textCase struct {
	name     string
	yaml     string
	want     string // Resolution.Value
	fellBack bool
	reason   string // substring; "" = Reason empty or builtin
}

func runTextCases(t *testing.T, key string, cases []textCase) {
	t.Helper()
	runTextCasesWith(t, key, map[string]string{"sim.embedded": "false"}, cases)
}

// runTextCasesWith sets the other keys in extra besides the one under test.
func runTextCasesWith(t *testing.T, key string, extra map[string]string, cases []textCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			kv := maps.Clone(extra)
			if c.yaml != missing {
				kv[key] = c.yaml
			}
			r, ok := loadYAML(t, yamlDoc(kv)).Resolution(key)
			require.True(t, ok)
			require.Equal(t, c.want, r.Value, r.Reason)
			require.Equal(t, c.fellBack, r.FellBack, r.Reason)
			if c.fellBack || c.yaml == missing {
				require.NotEmpty(t, r.Reason)
			}
			require.Contains(t, r.Reason, c.reason)
		})
	}
}

func TestDatabaseDriver(t *testing.T) {
	runTextCases(t, KeyDatabaseDriver, []textCase{
		{"missing is sqlite", missing, "sqlite", false, reasonBuiltin},
		{"empty is sqlite", `""`, "sqlite", true, "empty → default sqlite"},
		{"whitespace is sqlite", `"  "`, "sqlite", true, "empty → default sqlite"},
		{"upper-case SQLite is sqlite", `SQLite`, "sqlite", false, ""},
	})
	t.Run("mysql with a DSN is accepted, password masked", func(t *testing.T) {
		s := loadYAML(t, "database:\n  driver: MySQL\n  dsn: \"app:s3cret@tcp(db:3306)/changeflow?parseTime=true\"\n")
		db := s.Database()
		require.Equal(t, DriverMySQL, db.Driver)
		require.Equal(t, "app:s3cret@tcp(db:3306)/changeflow?parseTime=true", db.DSN)
		r, _ := s.Resolution(KeyDatabaseDSN)
		require.Equal(t, "app:****@tcp(db:3306)/changeflow?parseTime=true", r.Value)
		require.NotContains(t, r.Value, "s3cret")
	})
	for _, c := range []struct{ name, doc, msg string }{
		{"misspelled driver stops startup", "database:\n  driver: mysq\n", "database.driver 'mysq' (from file) is not sqlite or mysql"},
		{"postgres stops startup", "database:\n  driver: postgres\n", "is not sqlite or mysql"},
		{"a number stops startup", "database:\n  driver: -1\n", "is not sqlite or mysql"},
		{"mysql without a DSN stops startup", "database:\n  driver: mysql\n", "database.dsn is empty but database.driver is mysql"},
		{"mysql with a blank DSN stops startup", "database:\n  driver: mysql\n  dsn: \"  \"\n", "database.dsn is empty"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := writeFile(t, t.TempDir(), "changeflow.yaml", c.doc)
			_, err := Load(context.Background(), testOptions(p))
			require.ErrorIs(t, err, ErrInvalid)
			require.ErrorContains(t, err, c.msg)
		})
	}
}

func TestDatabaseDSN(t *testing.T) {
	runTextCases(t, KeyDatabaseDSN, []textCase{
		{"missing with sqlite is the default file under var/", missing, defaultSQLiteDSN, false, reasonBuiltin},
		{"empty with sqlite is the default", `""`, defaultSQLiteDSN, true, "empty → default sqlite DSN"},
		{"custom sqlite DSN is kept", `"file:/data/cf.db?_pragma=busy_timeout(1000)"`, "file:/data/cf.db?_pragma=busy_timeout(1000)", false, ""},
	})
}

func TestSecretsAreMaskedInDSNs(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"user:pw@tcp(h:3306)/db", "user:****@tcp(h:3306)/db"},
		{"user@tcp(h)/db", "user@tcp(h)/db"},
		{"mysql://user:pw@h:3306/db", "mysql://user:xxxxx@h:3306/db"},
		{"file:x.db?_pragma=foreign_keys(1)", "file:x.db?_pragma=foreign_keys(1)"},
		{"h/db?user=u&password=pw&tls=true", "h/db?user=u&password=****&tls=true"},
		{"us:er:p@ss@tcp(h)/db", "us:****@tcp(h)/db"},
	} {
		require.Equal(t, c.want, maskDSN(c.in), c.in)
	}
}

func TestServerListen(t *testing.T) {
	runTextCases(t, KeyServerListen, []textCase{
		{"missing is loopback 8080", missing, "127.0.0.1:8080", false, reasonBuiltin},
		{"empty is loopback 8080", `""`, "127.0.0.1:8080", true, "empty → default 127.0.0.1:8080"},
		{"whitespace is loopback 8080", `"  "`, "127.0.0.1:8080", true, "empty"},
		{"all interfaces is accepted", `":9000"`, ":9000", false, ""},
		{"no port falls back to loopback", `localhost`, "127.0.0.1:8080", true, "value 'localhost' not host:port → default 127.0.0.1:8080"},
		{"port out of range falls back", `"0.0.0.0:99999"`, "127.0.0.1:8080", true, "not host:port"},
		{"negative port falls back", `"0.0.0.0:-1"`, "127.0.0.1:8080", true, "not host:port"},
		{"a number falls back", `8080`, "127.0.0.1:8080", true, "not host:port"},
	})
}

func TestDependencyURLs(t *testing.T) {
	t.Parallel()
	for _, key := range []string{KeyGitLabBaseURL, KeyApprovalBaseURL, KeyPermissionBaseURL, KeyOIDCIssuer} {
		t.Run(key, func(t *testing.T) {
			runTextCases(t, key, []textCase{
				{"missing is unset", missing, "", false, reasonBuiltin + " (unset)"},
				{"empty is unset", `""`, "", true, "fell back: empty → unset"},
				{"whitespace is unset", `"  "`, "", true, "empty → unset"},
				{"https URL is kept", `https://gitlab.example/`, "https://gitlab.example/", false, ""},
				{"upper-case scheme is accepted", `HTTP://sim:8090/x/`, "HTTP://sim:8090/x/", false, ""},
				{"misspelled scheme is unset", `htps://gitlab.example`, "", true, "not an absolute http(s) URL → unset"},
				{"relative path is unset", `/gitlab/`, "", true, "not an absolute http(s) URL"},
				{"a number is unset", `-3`, "", true, "not an absolute http(s) URL"},
				{"a password in the URL is masked", `"https://bot:pw@gitlab.example/"`, "https://bot:xxxxx@gitlab.example/", false, ""},
			})
		})
	}
}

func TestLogLevel(t *testing.T) {
	runTextCases(t, KeyLogLevel, []textCase{
		{"missing is info", missing, "info", false, reasonBuiltin},
		{"empty is info", `""`, "info", true, "empty → info"},
		{"whitespace is info", `"  "`, "info", true, "empty → info"},
		{"upper-case DEBUG is debug", `DEBUG`, "debug", false, ""},
		{"warning is warn", `Warning`, "warn", false, ""},
		{"misspelled is info", `eror`, "info", true, "fell back: value 'eror' unknown → info"},
		{"a number is info", `-4`, "info", true, "unknown → info"},
	})
	s := loadYAML(t, "log: {level: error}\n")
	l, _ := s.LogLevel()
	require.Equal(t, slog.LevelError, l)
}

func TestInstanceID(t *testing.T) {
	runTextCases(t, KeyInstanceID, []textCase{
		{"missing is host name and pid", missing, "testhost-42", false, "host name + pid"},
		{"empty is host name and pid", `""`, "testhost-42", true, "empty → default testhost-42"},
		{"whitespace is host name and pid", `"   "`, "testhost-42", true, "empty"},
		{"inner whitespace is refused", `"node a"`, "testhost-42", true, "contains whitespace"},
		{"explicit id is kept", `node-a`, "node-a", false, ""},
	})
	t.Run("an unreadable host name still yields a unique id", func(t *testing.T) {
		o := testOptions("")
		o.Hostname = func() (string, error) { return "", errors.New("no uts") }
		require.Equal(t, "changeflow-42", mustLoad(t, o).Current().Instance().ID)
	})
}

func TestGitLabProjects(t *testing.T) {
	runTextCases(t, KeyGitLabProjects, []textCase{
		{"missing is none", missing, "", false, "built-in default (none)"},
		{"empty is none", `""`, "", true, "empty → none"},
		{"empty list is none", `[]`, "", true, "empty → none"},
		{"ids and paths are kept", `[1, "config/bindings", group/sub/proj]`, "1, config/bindings, group/sub/proj", false, ""},
		{"a single id is a list of one", `7`, "7", false, ""},
		{"comma-separated text is a list", `"1, 2"`, "1, 2", false, ""},
		{"negative id is dropped", `[1, -3]`, "1", true, "dropped '-3' (not a positive project id)"},
		{"malformed path is dropped", `[1, "no slash", "a/../b"]`, "1", true, "dropped 'no slash' (not a project id or group/project path); 'a/../b'"},
		{"blank entries are dropped", `[1, "", " "]`, "1", true, "dropped 2 blank entries"},
	})
}

func TestTrustedProxies(t *testing.T) {
	runTextCases(t, KeyRateLimitTrustedProxies, []textCase{
		{"missing is none", missing, "", false, "peer address is the client"},
		{"empty is none", `""`, "", true, "empty → none"},
		{"an explicit empty list is none, no fallback", `[]`, "", false, ""},
		{"IPs and CIDRs are kept", `[10.0.0.1, "192.168.0.0/16", "::1"]`, "10.0.0.1/32, 192.168.0.0/16, ::1/128", false, ""},
		{"CIDR host bits are masked", `["10.1.2.3/8"]`, "10.0.0.0/8", false, ""},
		{"malformed entries are dropped", `[10.0.0.1, "10.0.0.300", proxy.local]`, "10.0.0.1/32", true, "dropped '10.0.0.300' (not an IP or CIDR); 'proxy.local' (not an IP or CIDR)"},
	})
	// OIDC only: identity.trustedProxies: [] trusts no peer and, being a
	// choice, logs no fallback on start.
	runTextCases(t, KeyIdentityTrustedProxies, []textCase{
		{"missing is none", missing, "", false, reasonBuiltin},
		{"empty is none", `""`, "", true, "empty → none"},
		{"an explicit empty list is none, no fallback", `[]`, "", false, ""},
	})
	p, _ := loadYAML(t, "ratelimit:\n  trustedProxies: \"10.0.0.0/8, 127.0.0.1\"\n").TrustedProxies()
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("127.0.0.1/32")}, p)
}

func TestEtcdSettings(t *testing.T) {
	t.Parallel()
	// An unreachable endpoint costs one dial timeout at Load; keep it short.
	runTextCasesWith(t, KeyEtcdEndpoints, map[string]string{KeyEtcdDialTimeout: "100ms"}, []textCase{
		{"missing is no config center", missing, "", false, "no config center"},
		{"empty is no config center", `""`, "", true, "empty → no config center"},
		{"blank entries are dropped", `["http://a:2379", " "]`, "http://a:2379", true, "dropped 1 blank entry"},
	})
	runTextCases(t, KeyEtcdPrefix, []textCase{
		{"missing is /changeflow", missing, "/changeflow", false, reasonBuiltin},
		{"empty is /changeflow", `""`, "/changeflow", true, "empty → default /changeflow"},
		{"trailing slash is removed", `/cf/prod/`, "/cf/prod", false, ""},
	})
	runTextCases(t, KeyEtcdPassword, []textCase{
		{"missing is none", missing, "", false, reasonBuiltin},
		{"blank is none", `"  "`, "", true, "empty → unset"},
		{"set password is masked", `hunter2`, masked, false, ""},
	})
}

func TestIdentityDirectoryFile(t *testing.T) {
	runTextCases(t, KeyIdentityDirectoryFile, []textCase{
		{"missing is unset", missing, "", false, reasonBuiltin},
		{"empty is unset", `""`, "", true, "empty → unset"},
		{"path is kept", `var/directory.yaml`, "var/directory.yaml", false, ""},
	})
}

func TestGroupedViewsMatchTheItems(t *testing.T) {
	s := loadYAML(t, `
server: {listen: ":9000", shutdownTimeout: 5}
database: {maxOpenConns: 20}
workflow: {approveFirst: on, workers: 8}
approval: {maxRetries: 5, checkItems: {enabled: yes}}
batch: {maxRequests: 10, interval: 2s}
polling: {rebase: {shortAttempts: 3}}
breaker: {failures: 2}
sim: {embedded: true, listen: "127.0.0.1:9090"}
gitlab: {baseURL: "http://127.0.0.1:8090/gitlab/"}
`)
	require.Equal(t, ":9000", s.Server().Listen)
	require.Equal(t, 5*time.Second, s.Server().ShutdownTimeout)
	require.Equal(t, 20, s.Database().MaxOpenConns)
	require.Equal(t, Workflow{ApproveFirst: true, Workers: 8, QueueSize: 100, LeaseDuration: 30 * time.Second, MaxRegenerations: 3, PollInterval: time.Second}, s.Workflow())
	require.Equal(t, Approval{BaseURL: "http://127.0.0.1:9090/approval/", MaxRetries: 5, Backoff: 500 * time.Millisecond, CheckItems: true, VerifyDecisions: true}, s.Approval())
	require.Equal(t, Batch{Interval: 2 * time.Second, MaxRequests: 10, MaxSplitDepth: 6, Timeout: 30 * time.Minute, ResumeAfter: 2 * time.Minute, GatherWindow: 2 * time.Second, StrayInterval: 5 * time.Minute}, s.Batch())
	require.Equal(t, PollingTier{ShortInterval: 2 * time.Second, ShortAttempts: 3, LongInterval: 10 * time.Second, Timeout: 10 * time.Minute}, s.Polling(PollingRebase))
	require.Equal(t, PollingTier{ShortInterval: 5 * time.Second, ShortAttempts: 12, LongInterval: 30 * time.Second, Timeout: time.Hour}, s.Polling(PollingPipeline))
	require.Equal(t, PollingTier{ShortInterval: 30 * time.Second, ShortAttempts: 10, LongInterval: 5 * time.Minute, Timeout: 24 * time.Hour}, s.Polling(PollingApproval))
	require.Equal(t, Breaker{Failures: 2, OpenFor: 30 * time.Second}, s.Breaker())
	require.Equal(t, Idempotency{TTL: 24 * time.Hour, CleanupInterval: 10 * time.Minute, InFlightLease: 30 * time.Second}, s.Idempotency())
	// gitlab.baseURL is set explicitly and wins; the other three are
	// derived from sim.listen because the simulators are embedded.
	require.Equal(t, Endpoints{
		GitLab: "http://127.0.0.1:8090/gitlab/", Approval: "http://127.0.0.1:9090/approval/",
		Permission: "http://127.0.0.1:9090/permission/", OIDCIssuer: "http://127.0.0.1:9090/oidc/",
		SimEmbedded: true, SimListen: "127.0.0.1:9090",
	}, s.Endpoints())
	require.True(t, s.RestartRequired(KeyServerListen))
	require.False(t, s.RestartRequired(KeyWorkflowApproveFirst))
}

func TestAccessorsReportUnknownKeys(t *testing.T) {
	s := loadYAML(t, "{}\n")
	_, r := s.Duration("no.such.key")
	require.True(t, r.FellBack)
	_, r = s.Int(KeyServerListen) // wrong type is a programming error too
	require.True(t, r.FellBack)
	_, ok := s.Resolution("no.such.key")
	require.False(t, ok)
}

// TestSimulatorURLsDeriveFromSimListen: with the simulators embedded, one
// port setting moves every dependency URL that is not set explicitly; an
// explicit URL wins; without embedded simulators nothing is invented.
func TestSimulatorURLsDeriveFromSimListen(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       Endpoints
		fellBack   bool
	}{
		{"embedded, nothing set: the default simulator port", "sim: {embedded: true}\n", Endpoints{
			GitLab: "http://127.0.0.1:8090/gitlab/", Approval: "http://127.0.0.1:8090/approval/",
			Permission: "http://127.0.0.1:8090/permission/", OIDCIssuer: "http://127.0.0.1:8090/oidc/",
			SimEmbedded: true, SimListen: "127.0.0.1:8090"}, false},
		{"embedded on another port: every URL follows", "sim: {embedded: true, listen: \"127.0.0.1:9191\"}\n", Endpoints{
			GitLab: "http://127.0.0.1:9191/gitlab/", Approval: "http://127.0.0.1:9191/approval/",
			Permission: "http://127.0.0.1:9191/permission/", OIDCIssuer: "http://127.0.0.1:9191/oidc/",
			SimEmbedded: true, SimListen: "127.0.0.1:9191"}, false},
		{"all interfaces are reached over loopback", "sim: {embedded: true, listen: \":9191\"}\n", Endpoints{
			GitLab: "http://127.0.0.1:9191/gitlab/", Approval: "http://127.0.0.1:9191/approval/",
			Permission: "http://127.0.0.1:9191/permission/", OIDCIssuer: "http://127.0.0.1:9191/oidc/",
			SimEmbedded: true, SimListen: ":9191"}, false},
		{"an explicit URL wins", "sim: {embedded: true, listen: \"127.0.0.1:9191\"}\noidc: {issuer: \"https://login.example/\"}\n", Endpoints{
			GitLab: "http://127.0.0.1:9191/gitlab/", Approval: "http://127.0.0.1:9191/approval/",
			Permission: "http://127.0.0.1:9191/permission/", OIDCIssuer: "https://login.example/",
			SimEmbedded: true, SimListen: "127.0.0.1:9191"}, false},
		{"a malformed URL falls back to the simulator", "sim: {embedded: true}\ngitlab: {baseURL: \"gitlab:8090\"}\n", Endpoints{
			GitLab: "http://127.0.0.1:8090/gitlab/", Approval: "http://127.0.0.1:8090/approval/",
			Permission: "http://127.0.0.1:8090/permission/", OIDCIssuer: "http://127.0.0.1:8090/oidc/",
			SimEmbedded: true, SimListen: "127.0.0.1:8090"}, true},
		{"a port chosen at start cannot be derived", "sim: {embedded: true, listen: \"127.0.0.1:0\"}\n", Endpoints{
			SimEmbedded: true, SimListen: "127.0.0.1:0"}, false},
		{"not embedded: nothing is invented", "sim: {listen: \"127.0.0.1:9191\"}\n", Endpoints{
			SimListen: "127.0.0.1:9191"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := loadYAML(t, tc.yaml)
			require.Equal(t, tc.want, s.Endpoints())
			_, r := s.String(KeyGitLabBaseURL)
			require.Equal(t, tc.fellBack, r.FellBack, r.Reason)
			if tc.want.SimEmbedded && tc.want.GitLab != "" {
				require.Contains(t, r.Reason, "derived from sim.listen")
			}
		})
	}
}

func TestOIDCAccountClaim(t *testing.T) {
	runTextCases(t, KeyOIDCAccountClaim, []textCase{
		{"missing is sub", missing, "sub", false, reasonBuiltin},
		{"empty is sub", `""`, "sub", true, "empty → sub"},
		{"email is a claim name", `email`, "email", false, ""},
		{"a namespaced claim is a claim name", `"https://corp.example/employee_id"`, "https://corp.example/employee_id", false, ""},
		{"a claim with a space is not a claim name", `"preferred username"`, "sub", true, "not a claim name"},
		{"aud names no person", `aud`, "sub", true, "describes the token"},
		{"email_verified names no person", `email_verified`, "sub", true, "describes the token"},
	})
}

func TestOIDCAccountField(t *testing.T) {
	runTextCases(t, KeyOIDCAccountField, []textCase{
		{"missing is account", missing, "account", false, reasonBuiltin},
		{"empty is account", `""`, "account", true, "empty → account"},
		{"EMAIL is email", `EMAIL`, "email", false, ""},
		{"employeeid is employeeId", `employeeid`, "employeeId", false, ""},
		{"a typo is account, the strictest field", `emial`, "account", true, "unknown → account"},
	})
}
