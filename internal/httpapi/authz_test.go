package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/identity"
	"changeflow/internal/metrics"
	"changeflow/internal/permission"
	simoidc "changeflow/internal/sim/oidc"
	simperm "changeflow/internal/sim/permission"
)

// authzWorld is a server with test routes behind the real identity
// resolver, the real permission client, and the permission and OIDC
// simulators over real HTTP.
type authzWorld struct {
	h       http.Handler
	perm    *simperm.Server
	oidc    *simoidc.Server
	metrics *metrics.Metrics
	audits  *fakeAuditor
	clock   *testClock // the OIDC verifier's
}

// testClock is a settable clock starting at the real time (minted tokens
// carry real times).
type testClock struct{ t atomic.Pointer[time.Time] }

func newTestClock() *testClock {
	c := &testClock{}
	now := time.Now()
	c.t.Store(&now)
	return c
}

func (c *testClock) Now() time.Time { return *c.t.Load() }

func (c *testClock) Advance(d time.Duration) {
	next := c.Now().Add(d)
	c.t.Store(&next)
}

// Routes of the world. ops-read needs ops.read or admin (built-in rules of
// config.RouteOpsRequestGet), ops-write ops.write or admin; the rest are
// misconfigured on purpose.
const (
	pathOpsRead     = "/t/ops-read"
	pathOpsWrite    = "/t/ops-write/{id}"
	pathUser        = "/t/user"
	pathNoRules     = "/t/no-rules"
	pathEmptyRules  = "/t/empty-rules"
	routeEmptyRules = "test-empty"
)

type fakeAuditor struct {
	mu      sync.Mutex
	entries []AuditEntry
}

func (f *fakeAuditor) Audit(_ context.Context, e AuditEntry) error {
	f.mu.Lock()
	f.entries = append(f.entries, e)
	f.mu.Unlock()
	return nil
}

// echo answers 200 with who the handler sees, after decoding the body
// when there is one (400 on malformed JSON, as real handlers will).
func echo(params func(r *http.Request, body map[string]any) map[string]any) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if r.Method == http.MethodPost {
			if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
				writeError(w, r, slog.New(slog.DiscardHandler), domain.E(domain.CodeInvalidArgument, "malformed JSON body"))
				return
			}
		}
		res, _ := identity.FromContext(r.Context())
		data := map[string]any{"account": res.Identity.Account, "trusted": res.Identity.Trusted, "grants": grantsFromContext(r.Context())}
		if params != nil {
			data["params"] = params(r, body)
		}
		respond(w, slog.New(slog.DiscardHandler), domain.CodeOK, data)
	})
}

func newAuthzWorld(t *testing.T, overlay map[string]any) *authzWorld {
	t.Helper()
	sim, err := simperm.New(simperm.Options{Grants: simperm.LocalGrants()})
	if err != nil {
		t.Fatal(err)
	}
	permTS := httptest.NewServer(sim)
	t.Cleanup(func() { _ = sim.Close(); permTS.Close() })

	is, err := simoidc.New(simoidc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/oidc/", http.StripPrefix("/oidc", is))
	oidcTS := httptest.NewServer(mux)
	t.Cleanup(oidcTS.Close)
	is.SetIssuer(oidcTS.URL + "/oidc")

	ov := map[string]any{
		"permission.baseURL":                         permTS.URL + "/",
		"authz.routes." + routeEmptyRules + ".rules": []any{},
	}
	for k, v := range overlay {
		ov[k] = v
	}
	mgr, err := config.Load(t.Context(), config.Options{Overlay: ov})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mgr.Close() })

	w := &authzWorld{clock: newTestClock()}
	dir, err := identity.OpenDirectory(filepath.Join("..", "..", "cmd", "changeflow", "local", "directory.yaml"), identity.FileDirectoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	resolver := identity.NewResolver(identity.Options{
		Directory:      dir,
		TrustedProxies: identity.LoopbackPrefixes,
		OIDC: identity.NewOIDC(identity.OIDCOptions{Issuer: is.Issuer(), Now: w.clock.Now,
			Policy:   func() identity.OIDCPolicy { return identity.PolicyFromConfig(mgr.Current()) },
			Settings: func() identity.DependencySettings { return identity.SettingsFromConfig(mgr.Current(), "oidc") }}),
	})
	perms := permission.New(permission.Options{Settings: func() permission.Settings { return permission.SettingsFromConfig(mgr.Current()) }})

	logger := slog.New(slog.DiscardHandler)
	m := metrics.New(logger, "test")
	audits := &fakeAuditor{}
	w.perm, w.oidc, w.metrics, w.audits = sim, is, m, audits
	d := Deps{Logger: logger, Metrics: m, Ready: fakeReady{}, Version: "test",
		Identity: resolver, Hosts: func() HostPolicy { return HostPolicyFromConfig(mgr.Current()) }, Authz: Authorization{Config: mgr, Permissions: perms, Auditor: audits}}
	srv := &Server{deps: d} // the audit helper needs only the deps
	opsWrite := echo(func(r *http.Request, body map[string]any) map[string]any {
		res, _ := identity.FromContext(r.Context())
		p := opsParams(body, res.Identity)
		srv.audit(r.Context(), res.Identity, config.RouteOpsRequestRetrigger, r.PathValue("id"), "k-"+r.PathValue("id"), p, "OK")
		return p
	})
	w.h = newServer(d,
		route{pattern: "GET " + pathOpsRead, handler: echo(nil), metrics: true, rules: config.RouteOpsRequestGet},
		route{pattern: "POST " + pathOpsWrite, handler: opsWrite, metrics: true, rules: config.RouteOpsRequestRetrigger},
		route{pattern: "POST " + pathUser, handler: echo(nil), metrics: true, login: true},
		route{pattern: "GET " + pathNoRules, handler: echo(nil), metrics: true, rules: "no-such-route"},
		route{pattern: "GET " + pathEmptyRules, handler: echo(nil), metrics: true, rules: routeEmptyRules},
	)
	return w
}

// caller is how a request logs in.
type caller struct {
	peer    string   // RemoteAddr; default loopback
	host    string   // Host; default httptest's example.com
	user    string   // X-Auth-Request-User
	users   []string // X-Auth-Request-User sent once per value
	email   string   // X-Auth-Request-Email
	bearer  string
	nothing bool // no credentials at all
}

func (w *authzWorld) do(t *testing.T, method, path string, c caller, body string) (*httptest.ResponseRecorder, Envelope, time.Duration) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, path, rd)
	r.RemoteAddr = "127.0.0.1:40000"
	if c.peer != "" {
		r.RemoteAddr = c.peer
	}
	if c.host != "" {
		r.Host = c.host
	}
	if c.user != "" {
		r.Header.Set(identity.HeaderUser, c.user)
	}
	for _, u := range c.users {
		r.Header.Add(identity.HeaderUser, u)
	}
	if c.email != "" {
		r.Header.Set(identity.HeaderEmail, c.email)
	}
	if c.bearer != "" {
		r.Header.Set("Authorization", "Bearer "+c.bearer)
	}
	rec := httptest.NewRecorder()
	start := time.Now()
	w.h.ServeHTTP(rec, r)
	took := time.Since(start)
	conformRecorded(t, r, []byte(body), rec.Code, rec.Header(), rec.Body.Bytes())
	var env Envelope
	if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil {
		t.Fatalf("%s %s: not an envelope: %s", method, path, rec.Body.String())
	}
	return rec, env, took
}

func (w *authzWorld) mint(t *testing.T, req simoidc.TokenRequest) string {
	t.Helper()
	tok, err := w.oidc.Mint(req)
	if err != nil {
		t.Fatal(err)
	}
	return tok.Token
}

// wantStatus checks status and code, and that every 403 says exactly
// "Access denied" and every 401 asks for a login.
func wantStatus(t *testing.T, rec *httptest.ResponseRecorder, env Envelope, status int) {
	t.Helper()
	if rec.Code != status {
		t.Fatalf("status %d, want %d: %s", rec.Code, status, rec.Body.String())
	}
	switch status {
	case http.StatusForbidden:
		if env.Code != domain.CodeAccessDenied || env.Message != "Access denied" || env.Data != nil {
			t.Fatalf("403 body %s", rec.Body.String())
		}
	case http.StatusUnauthorized:
		if env.Code != domain.CodeUnauthenticated || rec.Header().Get("WWW-Authenticate") == "" {
			t.Fatalf("401 body %s, WWW-Authenticate %q", rec.Body.String(), rec.Header().Get("WWW-Authenticate"))
		}
	}
}

func TestAuthorizationOfAnOpsReadRoute(t *testing.T) {
	w := newAuthzWorld(t, nil)
	otherIssuer, err := simoidc.New(simoidc.Options{Issuer: w.oidc.Issuer()})
	if err != nil {
		t.Fatal(err)
	}
	forged, err := otherIssuer.Mint(simoidc.TokenRequest{Sub: "adam"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		c      caller
		status int
		who    string
	}{
		// 401: no usable login.
		{"no identity", caller{nothing: true}, 401, ""},
		{"proxy headers from an untrusted peer", caller{peer: "203.0.113.9:5000", user: "adam"}, 401, ""},
		{"garbage proxy header", caller{user: "adam smith"}, 401, ""},
		{"bad token", caller{bearer: "not-a-jwt"}, 401, ""},
		{"expired token", caller{bearer: w.mint(t, simoidc.TokenRequest{Sub: "adam", TTL: simoidc.TTL{Duration: -time.Minute}})}, 401, ""},
		{"token signed by a key the issuer does not publish", caller{bearer: forged.Token}, 401, ""},
		// 403: a login without the rule.
		{"alice holds no ops rule", caller{user: "alice@corp.example"}, 403, ""},
		{"bob by employee ID holds no ops rule", caller{user: "E10024"}, 403, ""},
		{"unknown employee ID", caller{user: "E99999"}, 403, ""},
		// 200: olivia operates, adam administers.
		{"olivia by email", caller{user: "olivia@corp.example"}, 200, "olivia"},
		{"olivia by employee ID", caller{user: "E10031"}, 200, "olivia"},
		{"adam by admin rule", caller{user: "adam"}, 200, "adam"},
		{"olivia by OIDC token", caller{bearer: w.mint(t, simoidc.TokenRequest{Sub: "olivia", Email: "olivia@corp.example"})}, 200, "olivia"},
		{"adam by OIDC token", caller{bearer: w.mint(t, simoidc.TokenRequest{Sub: "adam"})}, 200, "adam"},
		// Impersonation through claims (security review finding 1): none of
		// these is adam.
		{"opaque sub with preferred_username adam", caller{bearer: w.mint(t, simoidc.TokenRequest{Sub: "opaque-9f8e7d", Claims: map[string]any{"preferred_username": "adam"}})}, 403, ""},
		{"opaque sub with adam's email, unverified", caller{bearer: w.mint(t, simoidc.TokenRequest{Sub: "opaque-9f8e7d", Claims: map[string]any{"email": "adam@corp.example"}})}, 403, ""},
		{"adam's employee ID as sub", caller{bearer: w.mint(t, simoidc.TokenRequest{Sub: "E10001"})}, 403, ""},
		{"adam's email as sub", caller{bearer: w.mint(t, simoidc.TokenRequest{Sub: "adam@corp.example", Email: "adam@corp.example"})}, 401, ""},
		{"token issued an hour ahead", caller{bearer: w.mint(t, simoidc.TokenRequest{Sub: "adam", IssuedIn: simoidc.TTL{Duration: time.Hour}})}, 401, ""},
		{"token for two audiences without azp", caller{bearer: w.mint(t, simoidc.TokenRequest{Sub: "adam", Aud: simoidc.Audience{"other-app", "changeflow"}})}, 401, ""},
		// Duplicate identity headers (finding 6).
		{"two user headers, alice then adam", caller{users: []string{"alice", "adam"}}, 401, ""},
		{"two user headers, adam then alice", caller{users: []string{"adam", "alice"}}, 401, ""},
		{"unknown user beside adam's email", caller{user: "E55555", email: "adam@corp.example"}, 401, ""},
	}
	// The 403s of logins the directory does not know are UNKNOWN_ACCOUNT
	// (refused before the permission service is asked); the others are a
	// known account without the rule.
	unknown := map[string]string{
		"unknown employee ID":                      "E99999",
		"opaque sub with preferred_username adam":  "opaque-9f8e7d",
		"opaque sub with adam's email, unverified": "opaque-9f8e7d",
		"adam's employee ID as sub":                "E10001",
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, env, _ := w.do(t, "GET", pathOpsRead, tt.c, "")
			if acct, ok := unknown[tt.name]; ok {
				wantUnknownAccount(t, rec, env, acct)
			} else {
				wantStatus(t, rec, env, tt.status)
			}
			if tt.status == 200 {
				data := env.Data.(map[string]any)
				if data["account"] != tt.who || data["trusted"] != true {
					t.Fatalf("handler saw %v, want trusted %s", data, tt.who)
				}
			}
		})
	}
	t.Run("grants reach the handler", func(t *testing.T) {
		_, env, _ := w.do(t, "GET", pathOpsRead, caller{user: "adam"}, "")
		if g := fmt.Sprint(env.Data.(map[string]any)["grants"]); g != "[admin]" {
			t.Fatalf("grants %s", g)
		}
	})
	t.Run("one round trip with all the route's rule codes", func(t *testing.T) {
		checks := w.perm.Checks()
		last := checks[len(checks)-1]
		if fmt.Sprint(last.RuleCodes) != "[ops.read admin]" {
			t.Fatalf("rule codes sent: %v", last.RuleCodes)
		}
	})
}

func TestTokenOfARotatedAwayKeyIs401(t *testing.T) {
	w := newAuthzWorld(t, nil)
	old := w.mint(t, simoidc.TokenRequest{Sub: "adam"})
	rec, env, _ := w.do(t, "GET", pathOpsRead, caller{bearer: old}, "")
	wantStatus(t, rec, env, 200)
	if _, err := w.oidc.Rotate(true, 0); err != nil {
		t.Fatal(err)
	}
	// The new key's kid is unknown; it is fetched once the last download
	// is older than oidc.jwksMinRefresh.
	w.clock.Advance(identity.DefaultJWKSMinRefresh)
	rec, env, _ = w.do(t, "GET", pathOpsRead, caller{bearer: w.mint(t, simoidc.TokenRequest{Sub: "adam"})}, "")
	wantStatus(t, rec, env, 200)
	// From that download on the old key is gone.
	deadline := time.Now().Add(5 * time.Second)
	for {
		rec, env, _ = w.do(t, "GET", pathOpsRead, caller{bearer: old}, "")
		if rec.Code != 200 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	wantStatus(t, rec, env, 401)
}

func TestMissingRuleConfigurationDenies(t *testing.T) {
	w := newAuthzWorld(t, nil)
	for _, path := range []string{pathNoRules, pathEmptyRules} {
		t.Run(path, func(t *testing.T) {
			before := len(w.perm.Checks())
			rec, env, _ := w.do(t, "GET", path, caller{user: "adam"}, "")
			wantStatus(t, rec, env, 403)
			if len(w.perm.Checks()) != before {
				t.Fatal("with no rule codes there is nothing to ask the permission service")
			}
			rec, env, _ = w.do(t, "GET", path, caller{nothing: true}, "")
			wantStatus(t, rec, env, 401)
		})
	}
}

func TestPermissionServiceFailuresDeny(t *testing.T) {
	t.Run("500", func(t *testing.T) {
		w := newAuthzWorld(t, nil)
		if err := w.perm.SetFaults(simperm.Faults{ErrorStatus: 500, ErrorCount: 1}); err != nil {
			t.Fatal(err)
		}
		rec, env, _ := w.do(t, "GET", pathOpsRead, caller{user: "adam"}, "")
		wantStatus(t, rec, env, 403)
		rec, env, _ = w.do(t, "GET", pathOpsRead, caller{user: "adam"}, "")
		wantStatus(t, rec, env, 200)
	})
	t.Run("slow past the deadline is denied at the deadline", func(t *testing.T) {
		w := newAuthzWorld(t, map[string]any{"http.timeout.permission": "150ms"})
		if err := w.perm.SetFaults(simperm.Faults{SlowMs: 20_000}); err != nil {
			t.Fatal(err)
		}
		rec, env, took := w.do(t, "GET", pathOpsRead, caller{user: "adam"}, "")
		wantStatus(t, rec, env, 403)
		if took > 5*time.Second {
			t.Fatalf("took %v; the deadline is 150ms", took)
		}
	})
	t.Run("open breaker denies fast without calling the service", func(t *testing.T) {
		w := newAuthzWorld(t, map[string]any{"breaker.failures": 2, "breaker.openFor": "1h"})
		if err := w.perm.SetFaults(simperm.Faults{ErrorStatus: 503, ErrorCount: 2}); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			rec, env, _ := w.do(t, "GET", pathOpsRead, caller{user: "adam"}, "")
			wantStatus(t, rec, env, 403)
		}
		calls := len(w.perm.Checks())
		rec, env, took := w.do(t, "GET", pathOpsRead, caller{user: "adam"}, "")
		wantStatus(t, rec, env, 403)
		if n := len(w.perm.Checks()); n != calls {
			t.Fatalf("the open breaker let %d calls through", n-calls)
		}
		if took > time.Second {
			t.Fatalf("took %v", took)
		}
	})
	t.Run("permission service not configured", func(t *testing.T) {
		w := newAuthzWorld(t, map[string]any{"permission.baseURL": ""})
		rec, env, _ := w.do(t, "GET", pathOpsRead, caller{user: "adam"}, "")
		wantStatus(t, rec, env, 403)
	})
}

func TestNoAuthorizationDependenciesDeny(t *testing.T) {
	rt := route{pattern: "GET /t/ops", handler: echo(nil), rules: config.RouteOpsRequestGet}
	for name, d := range map[string]Deps{
		"no resolver":             {Authz: Authorization{}},
		"no config or permission": {Identity: identity.NewResolver(identity.Options{TrustedProxies: identity.LoopbackPrefixes})},
	} {
		t.Run(name, func(t *testing.T) {
			d.Logger, d.Metrics, d.Ready = slog.New(slog.DiscardHandler), metrics.New(slog.New(slog.DiscardHandler), "test"), fakeReady{}
			w := &authzWorld{h: newServer(d, rt)}
			rec, env, _ := w.do(t, "GET", "/t/ops", caller{user: "adam"}, "")
			if rec.Code != 401 && rec.Code != 403 {
				t.Fatalf("got %d", rec.Code)
			}
			wantStatus(t, rec, env, rec.Code)
		})
	}
}

func TestDecidedBeforeTheBodyIsRead(t *testing.T) {
	w := newAuthzWorld(t, nil)
	const malformed = `{"step": `
	tests := []struct {
		name   string
		path   string
		c      caller
		status int
	}{
		{"unauthenticated caller with a malformed body gets 401, not 400", "/t/ops-write/op-1", caller{nothing: true}, 401},
		{"untrusted peer with a malformed body gets 401", pathUser, caller{peer: "198.51.100.7:1", user: "alice"}, 401},
		{"caller without the rule with a malformed body gets 403, not 400", "/t/ops-write/op-1", caller{user: "alice"}, 403},
		{"authorized caller with a malformed body reaches the handler: 400", "/t/ops-write/op-1", caller{user: "olivia"}, 400},
		{"login-only route: logged-in caller reaches the handler: 400", pathUser, caller{user: "bob"}, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, env, _ := w.do(t, "POST", tt.path, tt.c, malformed)
			wantStatus(t, rec, env, tt.status)
		})
	}
}

func TestLoginOnlyRoutes(t *testing.T) {
	w := newAuthzWorld(t, nil)
	rec, env, _ := w.do(t, "POST", pathUser, caller{nothing: true}, `{}`)
	wantStatus(t, rec, env, 401)
	before := len(w.perm.Checks())

	accounts := map[string]string{}
	for _, c := range []caller{{user: "alice"}, {user: "Alice@Corp.Example"}, {user: "E10023"}, {bearer: w.mint(t, simoidc.TokenRequest{Sub: "alice"})}} {
		rec, env, _ := w.do(t, "POST", pathUser, c, `{}`)
		wantStatus(t, rec, env, 200)
		data := env.Data.(map[string]any)
		accounts[fmt.Sprintf("%v %v", data["account"], data["trusted"])] = c.user + c.bearer
	}
	if len(accounts) != 1 || accounts["alice true"] == "" {
		t.Fatalf("every login form of alice must resolve to the one trusted account: %v", accounts)
	}
	if len(w.perm.Checks()) != before {
		t.Fatal("a login-only route must not ask the permission service")
	}

	t.Run("a token with an opaque sub and preferred_username adam is not adam on a user route", func(t *testing.T) {
		// The account is opaque-9f8e7d, never adam — and since the
		// directory does not know it, the route is refused before its
		// handler runs (it used to serve opaque-9f8e7d's own records).
		tok := w.mint(t, simoidc.TokenRequest{Sub: "opaque-9f8e7d", Claims: map[string]any{"preferred_username": "adam"}})
		rec, env, _ := w.do(t, "POST", pathUser, caller{bearer: tok}, `{}`)
		wantUnknownAccount(t, rec, env, "opaque-9f8e7d")
	})

	t.Run("an unknown bare ID is refused as an unknown account", func(t *testing.T) {
		rec, env, _ := w.do(t, "POST", pathUser, caller{user: "E99999"}, `{}`)
		wantUnknownAccount(t, rec, env, "E99999")
	})
}

// wantUnknownAccount: the answer is 403 UNKNOWN_ACCOUNT naming account,
// with a message that says who to ask, and no handler ran (the echo
// handler's data would carry "trusted").
func wantUnknownAccount(t *testing.T, rec *httptest.ResponseRecorder, env Envelope, account string) {
	t.Helper()
	if rec.Code != 403 || env.Code != domain.CodeUnknownAccount {
		t.Fatalf("got %d %s, want 403 UNKNOWN_ACCOUNT: %s", rec.Code, env.Code, rec.Body.String())
	}
	if env.Message != unknownAccountMessage || !strings.Contains(env.Message, "Ask the team that runs changeflow") {
		t.Fatalf("message %q", env.Message)
	}
	d, _ := env.Data.(map[string]any)
	if len(d) != 1 || d["account"] != account {
		t.Fatalf("data %v, want only the account %q", env.Data, account)
	}
}

func TestDeniedRequestsSkipAPIMetrics(t *testing.T) {
	w := newAuthzWorld(t, nil)
	w.do(t, "GET", pathOpsRead, caller{nothing: true}, "")
	w.do(t, "GET", pathOpsRead, caller{user: "alice"}, "")
	rec := httptest.NewRecorder()
	w.h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if strings.Contains(rec.Body.String(), `route="GET `+pathOpsRead+`"`) {
		t.Fatal("requests denied by authorization run before API metrics and are not counted as API traffic (docs/api.md, Rate limiting)")
	}
	w.do(t, "GET", pathOpsRead, caller{user: "adam"}, "")
	rec = httptest.NewRecorder()
	w.h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if !strings.Contains(rec.Body.String(), `changeflow_http_requests_total{code="200",method="GET",route="GET `+pathOpsRead+`"} 1`) {
		t.Fatal("an authorized request is counted")
	}
}

func TestRateLimitingRunsBeforeAuthorization(t *testing.T) {
	w := newAuthzWorld(t, nil)
	mgr, err := config.Load(t.Context(), config.Options{Overlay: map[string]any{"ratelimit.authz-test.limit": 1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mgr.Close() })
	logger := slog.New(slog.DiscardHandler)
	h := newServer(Deps{Logger: logger, Metrics: metrics.New(logger, "test"), Ready: fakeReady{},
		RateLimit: RateLimiting{Config: mgr}},
		route{pattern: "POST /t/limited", handler: echo(nil), login: true, rateLimit: &RateLimitSpec{Bucket: "authz-test"}})
	w.h = h
	rec, env, _ := w.do(t, "POST", "/t/limited", caller{nothing: true}, `{`)
	wantStatus(t, rec, env, 401)
	rec, _, _ = w.do(t, "POST", "/t/limited", caller{nothing: true}, `{`)
	if rec.Code != http.StatusTooManyRequests {
		t.Fatalf("an unauthenticated caller over quota gets 429 first, got %d", rec.Code)
	}
}
