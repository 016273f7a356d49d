package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/gitlab"
	"changeflow/internal/identity"
	"changeflow/internal/metrics"
	"changeflow/internal/permission"
	simgl "changeflow/internal/sim/gitlab"
	simoidc "changeflow/internal/sim/oidc"
	simperm "changeflow/internal/sim/permission"
	"changeflow/internal/store"

	"go.yaml.in/yaml/v3"
)

// Tokens and targets of the business test world.
const (
	cbToken   = "test-callback-token"
	hookToken = "test-webhook-token"

	tOpen   = "payments-db-readonly" // OPEN, maxDays 30
	tClosed = "legacy-ftp"           // CLOSED
	tWindow = "prod-console"         // TEST_WINDOW outside its window at worldNow
	tRace   = "race-target"          // OPEN, for the concurrency test
	tReplay = "replay-target"        // OPEN, for the replay test
)

// worldNow is the world's fixed clock: 12:00 UTC, outside prod-console's
// 01:00–02:00 window.
var worldNow = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// swapConfig is a ConfigSource whose snapshot a test can replace.
type swapConfig struct {
	p atomic.Pointer[config.Snapshot]
}

func (c *swapConfig) Current() *config.Snapshot { return c.p.Load() }

// lockedBuffer is a log sink safe for concurrent handlers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// bizWorld is the server with every business dependency real: a store on
// a real database, the configuration loader, the identity resolver over
// the local directory (loopback trusted), the permission client against
// the permission simulator and the GitLab adapter against the GitLab
// simulator, each over loopback HTTP.
type bizWorld struct {
	t       testing.TB
	st      *store.Store
	cfg     *swapConfig
	h       http.Handler
	logs    *lockedBuffer
	metrics *metrics.Metrics
	perm    *simperm.Server
	gl      *gitlab.Client
	glURL   string
	overlay map[string]any
	sink    *recordingSink
	// oidc is the OIDC issuer's simulator when withOIDC wired one: bearer
	// tokens it mints log in (w.mint).
	oidc *simoidc.Server
	// people are accounts added to the local directory for this world
	// (withPeople): a login the directory does not know is refused.
	people []string
}

// withPeople adds accounts to the world's identity directory, for tests
// that need callers beyond the local run's four.
func withPeople(accounts ...string) worldOpt {
	return func(w *bizWorld, _ *Deps) { w.people = append(w.people, accounts...) }
}

type worldOpt func(*bizWorld, *Deps)

// withOverlay sets configuration items over the world's defaults.
func withOverlay(kv map[string]any) worldOpt {
	return func(w *bizWorld, _ *Deps) { maps.Copy(w.overlay, kv) }
}

// withOIDC wires an OIDC issuer (the simulator) into the world's
// resolver, so requests can log in with a bearer token as well as with
// the proxy header; tokens use the real clock.
func withOIDC() worldOpt {
	return func(w *bizWorld, _ *Deps) {
		is, err := simoidc.New(simoidc.Options{})
		if err != nil {
			w.t.Fatal(err)
		}
		mux := http.NewServeMux()
		mux.Handle("/oidc/", http.StripPrefix("/oidc", is))
		ts := httptest.NewServer(mux)
		w.t.Cleanup(ts.Close)
		is.SetIssuer(ts.URL + "/oidc")
		w.oidc = is
	}
}

// mint is a bearer token of the world's issuer (withOIDC) for req.
func (w *bizWorld) mint(req simoidc.TokenRequest) string {
	w.t.Helper()
	tok, err := w.oidc.Mint(req)
	if err != nil {
		w.t.Fatal(err)
	}
	return "Bearer " + tok.Token
}

// withSink wires a callback sink.
func withSink(s *recordingSink) worldOpt {
	return func(w *bizWorld, d *Deps) { w.sink = s; d.Business.Sink = s }
}

func newBizWorld(t testing.TB, st *store.Store, opts ...worldOpt) *bizWorld {
	t.Helper()
	psim, err := simperm.New(simperm.Options{Grants: simperm.LocalGrants()})
	if err != nil {
		t.Fatal(err)
	}
	permTS := httptest.NewServer(psim)
	t.Cleanup(func() { permTS.Close(); _ = psim.Close() })

	gsim, err := simgl.New(simgl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/gitlab/", http.StripPrefix("/gitlab", gsim))
	glTS := httptest.NewServer(mux)
	t.Cleanup(func() { glTS.Close(); _ = gsim.Close() })

	w := &bizWorld{t: t, st: st, cfg: &swapConfig{}, logs: &lockedBuffer{}, perm: psim, glURL: glTS.URL + "/gitlab/"}
	w.overlay = map[string]any{
		"permission.baseURL":        permTS.URL + "/",
		"gitlab.baseURL":            w.glURL,
		"gitlab.projects":           []any{"1"},
		"gitlab.tokens.committer":   "local-committer-token",
		"callbacks.tokens.approval": cbToken,
		"callbacks.tokens.deploy":   cbToken,
		"callbacks.tokens.gitlab":   hookToken,
		"workflow.approveFirst":     true,
		"idempotency.ttl":           "1h",
		"ratelimit.apply.limit":     1000,
		"access.timezone":           "UTC",
		"targets": map[string]any{
			tOpen:               map[string]any{"title": "Payments DB", "accessMode": "OPEN", "maxDays": 30, "file": "bindings/" + tOpen + ".yaml"},
			tClosed:             map[string]any{"title": "Legacy FTP", "accessMode": "CLOSED", "maxDays": 7},
			tRace:               map[string]any{"accessMode": "OPEN", "maxDays": 2},
			tReplay:             map[string]any{"accessMode": "OPEN", "maxDays": 2},
			"billing-dashboard": map[string]any{"accessMode": "OPEN", "maxDays": 5},
			tWindow: map[string]any{"title": "Prod console", "accessMode": "TEST_WINDOW", "maxDays": 1,
				"window": map[string]any{"start": "01:00", "end": "02:00"}},
		},
	}
	logger := slog.New(slog.NewJSONHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	w.metrics = metrics.New(logger, "test")
	d := Deps{Logger: logger, Metrics: w.metrics, Ready: fakeReady{}, Version: "test"}
	d.Business = Business{Config: w.cfg, Requests: st, Ops: st, Callbacks: st, Now: func() time.Time { return worldNow }}
	for _, o := range opts {
		o(w, &d)
	}
	w.load(nil)

	var entries []identity.Entry
	raw, err := os.ReadFile(filepath.Join("..", "..", "cmd", "changeflow", "local", "directory.yaml"))
	if err == nil {
		err = yaml.Unmarshal(raw, &entries)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range w.people {
		entries = append(entries, identity.Entry{Account: p})
	}
	dir, problems := identity.NewDirectory(entries)
	if len(problems) > 0 {
		t.Fatalf("test directory: %v", problems)
	}
	idOpts := identity.Options{Directory: dir, TrustedProxies: identity.LoopbackPrefixes}
	if w.oidc != nil {
		idOpts.OIDC = identity.NewOIDC(identity.OIDCOptions{Issuer: w.oidc.Issuer(),
			Policy:   func() identity.OIDCPolicy { return identity.PolicyFromConfig(w.cfg.Current()) },
			Settings: func() identity.DependencySettings { return identity.SettingsFromConfig(w.cfg.Current(), "oidc") }})
	}
	resolver := identity.NewResolver(idOpts)
	perms := permission.New(permission.Options{Settings: func() permission.Settings { return permission.SettingsFromConfig(w.cfg.Current()) }})
	w.gl = gitlab.New(gitlab.Options{Settings: func() gitlab.Settings { return gitlab.SettingsFromConfig(w.cfg.Current()) }})

	d.Identity = resolver
	d.RateLimit = RateLimiting{Config: w.cfg, Now: func() time.Time { return worldNow }}
	d.Authz = Authorization{Config: w.cfg, Permissions: perms, Auditor: storeAuditor{st}}
	if d.Business.Files == nil {
		d.Business.Files = w.gl
	}
	w.h = NewServer(d)
	return w
}

// load (re)builds the configuration from the world's overlay plus kv.
func (w *bizWorld) load(kv map[string]any) {
	w.t.Helper()
	ov := maps.Clone(w.overlay)
	targets := map[string]any{}
	for k, v := range w.overlay["targets"].(map[string]any) {
		targets[k] = maps.Clone(v.(map[string]any))
	}
	ov["targets"] = targets
	for k, v := range kv {
		// The loader reads nested and dotted keys, but a dotted key does
		// not reach into a nested map of the same layer: merge by hand.
		if rest, ok := strings.CutPrefix(k, "targets."); ok {
			name, field, _ := strings.Cut(rest, ".")
			tm, _ := targets[name].(map[string]any)
			if tm == nil {
				tm = map[string]any{}
				targets[name] = tm
			}
			tm[field] = v
			continue
		}
		ov[k] = v
	}
	mgr, err := config.Load(w.t.Context(), config.Options{Overlay: ov})
	if err != nil {
		w.t.Fatal(err)
	}
	w.cfg.p.Store(mgr.Current())
	_ = mgr.Close()
}

// storeAuditor adapts the store to Auditor, as the composition root does.
type storeAuditor struct{ st *store.Store }

func (a storeAuditor) Audit(ctx context.Context, e AuditEntry) error {
	_, err := a.st.AuditInsert(ctx, store.AuditInsertParams{
		Key: e.Key, Actor: e.Actor, Action: e.Action, Resource: e.Resource, Params: e.Params, Outcome: e.Outcome,
	})
	return err
}

// req is one request of a test case.
type req struct {
	method, path string
	user         string // X-Auth-Request-User; "" = anonymous
	body         string
	header       map[string]string
	// stream: the answer is a stream that never ends by itself (the
	// event stream); the request's context ends at the handler's first
	// write, so do returns with what was written up to then.
	stream bool
}

// cancelOnWrite ends the request's context at the first write.
type cancelOnWrite struct {
	*httptest.ResponseRecorder
	cancel func()
}

func (c cancelOnWrite) Write(b []byte) (int, error) {
	n, err := c.ResponseRecorder.Write(b)
	c.cancel()
	return n, err
}

// resp is an answer, with the envelope decoded when it is one.
type resp struct {
	status int
	header http.Header
	raw    string
	env    Envelope
	data   map[string]any
}

func (w *bizWorld) do(r req) resp {
	w.t.Helper()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	hr := httptest.NewRequest(r.method, r.path, body)
	hr.RemoteAddr = "127.0.0.1:40000"
	if r.user != "" {
		hr.Header.Set(identity.HeaderUser, r.user)
	}
	for k, v := range r.header {
		hr.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	if r.stream {
		ctx, cancel := context.WithCancel(hr.Context())
		defer cancel()
		w.h.ServeHTTP(cancelOnWrite{ResponseRecorder: rec, cancel: cancel}, hr.WithContext(ctx))
	} else {
		w.h.ServeHTTP(rec, hr)
	}
	// Every answer a handler test sees is also held to the API
	// description (openapi_conform_test.go).
	conformRecorded(w.t, hr, []byte(r.body), rec.Code, rec.Header(), rec.Body.Bytes())
	out := resp{status: rec.Code, header: rec.Header(), raw: rec.Body.String()}
	var probe map[string]any
	if json.Unmarshal(rec.Body.Bytes(), &probe) == nil {
		if _, ok := probe["code"]; ok {
			_ = json.Unmarshal(rec.Body.Bytes(), &out.env)
			out.data, _ = out.env.Data.(map[string]any)
		}
	}
	return out
}

// want checks status and envelope code.
func (r resp) want(t testing.TB, status int, code string) {
	t.Helper()
	if r.status != status || string(r.env.Code) != code {
		t.Fatalf("got %d %s, want %d %s: %s", r.status, r.env.Code, status, code, r.raw)
	}
}

// wantRefused is want for a refusal that names its reason in data.reason.
func (r resp) wantRefused(t testing.TB, status int, code string, reason domain.Reason) {
	t.Helper()
	r.want(t, status, code)
	if got, _ := r.data["reason"].(string); got != string(reason) {
		t.Fatalf("data.reason %q, want %q: %s", got, reason, r.raw)
	}
}

// The production implementations of the handlers' interfaces.
var (
	_ RequestStore       = (*store.Store)(nil)
	_ OpsStore           = (*store.Store)(nil)
	_ CallbackStore      = (*store.Store)(nil)
	_ IdempotencyExpirer = (*store.Store)(nil)
	_ FileReader         = (*gitlab.Client)(nil)
	_ ConfigSource       = (*config.Manager)(nil)
	_ WorkSubmitter      = (*engine.Engine)(nil)
)
