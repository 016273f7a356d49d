package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/identity"
	"changeflow/internal/metrics"
)

const applyMessage = "Too many submissions, please try again later"

// fakeClock is the injected clock of the rate-limit link.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// testConfig is a real configuration manager over a file the test
// rewrites, so limit changes go through the same reload path as in
// production.
type testConfig struct {
	*config.Manager
	path string
}

func newTestConfig(t testing.TB, yaml string) *testConfig {
	t.Helper()
	path := filepath.Join(t.TempDir(), "changeflow.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := config.Load(t.Context(), config.Options{
		File:     path,
		Hostname: func() (string, error) { return "testhost", nil },
		Pid:      func() int { return 1 },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return &testConfig{Manager: m, path: path}
}

// set rewrites the file and reloads it.
func (c *testConfig) set(t *testing.T, yaml string) {
	t.Helper()
	if err := os.WriteFile(c.path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// applyRoute stands in for POST /api/requests until it exists: rate
// limited in the "apply" bucket, counted in API metrics, and decoding its
// body the way a handler does, so a malformed body is a 400 — if the
// request gets that far. calls counts requests that reached it.
func applyRoute(calls *atomic.Int64) route {
	return route{
		pattern:   "POST /test/apply",
		metrics:   true,
		rateLimit: &RateLimitSpec{Bucket: "apply", Message: applyMessage},
		handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			var body map[string]any
			if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
				writeError(w, r, slog.New(slog.DiscardHandler), domain.E(domain.CodeInvalidArgument, "malformed JSON"))
				return
			}
			respond(w, slog.New(slog.DiscardHandler), domain.CodeAccepted, map[string]string{"operationId": "op-1"})
		}),
	}
}

// rlServer is a server with rate-limited test routes, plus what tests
// inspect.
type rlServer struct {
	h       http.Handler
	metrics *metrics.Metrics
	clock   *fakeClock
	calls   *atomic.Int64
}

// headerIdentity stands in for the identity resolver: header X-Test-User,
// when present, is the caller's account ("!" is a failed login).
type headerIdentity struct{}

func (headerIdentity) Resolve(r *http.Request) identity.Resolution {
	switch u := r.Header.Get("X-Test-User"); u {
	case "":
		return identity.Resolution{}
	case "!":
		return identity.Resolution{Err: io.ErrUnexpectedEOF}
	default:
		return identity.Resolution{Identity: identity.Identity{Account: u, Trusted: true}}
	}
}

// newRateLimitedServer builds the server with the apply route and extra,
// resolving identities from X-Test-User.
func newRateLimitedServer(t *testing.T, rl RateLimiting, extra ...route) *rlServer {
	t.Helper()
	logger := slog.New(slog.DiscardHandler)
	m := metrics.New(logger, "test")
	clock := newFakeClock()
	if rl.Now == nil {
		rl.Now = clock.Now
	}
	calls := &atomic.Int64{}
	routes := append([]route{applyRoute(calls)}, extra...)
	h := newServer(Deps{Logger: logger, Metrics: m, Ready: fakeReady{}, Version: "test", RateLimit: rl, Identity: headerIdentity{}}, routes...)
	return &rlServer{h: h, metrics: m, clock: clock, calls: calls}
}

// call is one request's knobs.
type call struct {
	remote, xff, user, body string
}

func (s *rlServer) post(t *testing.T, c call) (*httptest.ResponseRecorder, Envelope) {
	t.Helper()
	body := c.body
	if body == "" {
		body = `{"targetKey":"payments-db-readonly"}`
	}
	req := httptest.NewRequest("POST", "/test/apply", strings.NewReader(body))
	req.RemoteAddr = "198.51.100.1:40000"
	if c.remote != "" {
		req.RemoteAddr = c.remote
	}
	if c.xff != "" {
		req.Header.Set("X-Forwarded-For", c.xff)
	}
	if c.user != "" {
		req.Header.Set("X-Test-User", c.user)
	}
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, req)
	var env Envelope
	if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil {
		t.Fatalf("body is not an envelope: %v: %s", err, rec.Body.String())
	}
	return rec, env
}

// admits sends c n times and fails unless every one is admitted.
func (s *rlServer) admits(t *testing.T, n int, c call) {
	t.Helper()
	for i := range n {
		if rec, env := s.post(t, c); rec.Code != http.StatusAccepted {
			t.Fatalf("request %d of %d (%+v) = %d %s, want 202", i+1, n, c, rec.Code, env.Code)
		}
	}
}

// refuses sends c once and fails unless it is a 429.
func (s *rlServer) refuses(t *testing.T, c call) *httptest.ResponseRecorder {
	t.Helper()
	rec, env := s.post(t, c)
	if rec.Code != http.StatusTooManyRequests || env.Code != domain.CodeRateLimited {
		t.Fatalf("%+v = %d %s, want 429 RATE_LIMITED", c, rec.Code, env.Code)
	}
	return rec
}

const limit2 = "ratelimit:\n  window: 60s\n  apply:\n    limit: 2\n"

func TestRateLimitAnswers429WithEnvelopeAndRetryAfter(t *testing.T) {
	s := newRateLimitedServer(t, RateLimiting{Config: newTestConfig(t, limit2)})
	s.admits(t, 1, call{})
	s.clock.Advance(10 * time.Second)
	s.admits(t, 1, call{})
	s.clock.Advance(10 * time.Second)

	rec := s.refuses(t, call{})
	want := `{"code":"RATE_LIMITED","message":"` + applyMessage + `","data":null}` + "\n"
	if rec.Body.String() != want {
		t.Fatalf("body = %s, want %s", rec.Body.String(), want)
	}
	// The oldest entry (t=0) leaves the 60 s window at t=60; now is t=20.
	if got := rec.Header().Get("Retry-After"); got != "40" {
		t.Fatalf("Retry-After = %q, want 40", got)
	}
	if got := s.calls.Load(); got != 2 {
		t.Fatalf("handler ran %d times, want 2: a refused request must not reach it", got)
	}

	s.clock.Advance(39*time.Second + 500*time.Millisecond)
	if got := s.refuses(t, call{}).Header().Get("Retry-After"); got != "1" {
		t.Fatalf("Retry-After with 0.5 s left = %q, want 1 (rounded up, never 0)", got)
	}
	s.clock.Advance(500 * time.Millisecond)
	s.admits(t, 1, call{})
}

func TestRetryAfterSeconds(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int
	}{
		{0, 1}, {time.Millisecond, 1}, {time.Second, 1}, {time.Second + time.Millisecond, 2}, {59*time.Second + 999*time.Millisecond, 60},
	} {
		if got := retryAfterSeconds(c.d); got != c.want {
			t.Errorf("retryAfterSeconds(%v) = %d, want %d", c.d, got, c.want)
		}
	}
}

func TestRateLimitFollowsConfigurationPerRequest(t *testing.T) {
	cfg := newTestConfig(t, "ratelimit:\n  apply:\n    limit: 1\n")
	s := newRateLimitedServer(t, RateLimiting{Config: cfg})
	s.admits(t, 1, call{})
	s.refuses(t, call{})

	t.Run("a raised limit applies to the next request", func(t *testing.T) {
		cfg.set(t, "ratelimit:\n  apply:\n    limit: 3\n")
		s.admits(t, 2, call{})
		s.refuses(t, call{})
	})
	t.Run("a lowered limit applies to the next request", func(t *testing.T) {
		cfg.set(t, "ratelimit:\n  apply:\n    limit: 1\n")
		s.refuses(t, call{remote: "198.51.100.1:1"})
		s.admits(t, 1, call{remote: "198.51.100.2:1"})
		s.refuses(t, call{remote: "198.51.100.2:1"})
	})
	for _, c := range []struct{ name, value string }{
		{"zero means no limiting", "0"},
		{"negative means no limiting", "-1"},
		{"junk means no limiting", "lots"},
		{"empty means no limiting", `""`},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg.set(t, "ratelimit:\n  apply:\n    limit: "+c.value+"\n")
			s.admits(t, 50, call{})
		})
	}
	t.Run("a missing apply limit is the built-in 10", func(t *testing.T) {
		cfg.set(t, "{}\n")
		s.clock.Advance(2 * time.Minute)
		s.admits(t, 10, call{})
		s.refuses(t, call{})
	})
}

func TestUnconfiguredBucketIsNotLimited(t *testing.T) {
	var calls atomic.Int64
	preview := applyRoute(&calls)
	preview.pattern = "POST /test/preview"
	preview.rateLimit = &RateLimitSpec{Bucket: "unconfigured"}
	s := newRateLimitedServer(t, RateLimiting{Config: newTestConfig(t, "{}\n")}, preview)
	for range 50 {
		rec := httptest.NewRecorder()
		s.h.ServeHTTP(rec, httptest.NewRequest("POST", "/test/preview", strings.NewReader("{}")))
		if rec.Code != http.StatusAccepted {
			t.Fatalf("preview = %d, want 202: no ratelimit.unconfigured.limit means no limiting", rec.Code)
		}
	}
}

func TestNoConfigurationSourceMeansNoLimiting(t *testing.T) {
	s := newRateLimitedServer(t, RateLimiting{})
	s.admits(t, 50, call{})
}

func TestRateLimitSubject(t *testing.T) {
	cfg := newTestConfig(t, "ratelimit:\n  apply:\n    limit: 1\n  trustedProxies: [10.0.0.0/8]\n")
	s := newRateLimitedServer(t, RateLimiting{Config: cfg})

	t.Run("one person is one quota across addresses", func(t *testing.T) {
		s.admits(t, 1, call{user: "alice", remote: "198.51.100.7:1"})
		s.refuses(t, call{user: "alice", remote: "203.0.113.9:1"})
	})
	t.Run("people behind one address have their own quotas", func(t *testing.T) {
		s.admits(t, 1, call{user: "bob", remote: "198.51.100.7:1"})
	})
	t.Run("anonymous callers are keyed by address, apart from accounts", func(t *testing.T) {
		s.admits(t, 1, call{remote: "198.51.100.7:1"})
		s.refuses(t, call{remote: "198.51.100.7:2"})
		s.admits(t, 1, call{remote: "198.51.100.8:1"})
	})
	t.Run("a failed login counts as anonymous", func(t *testing.T) {
		s.admits(t, 1, call{user: "!", remote: "198.51.100.20:1"})
		s.refuses(t, call{remote: "198.51.100.20:1"})
	})
	t.Run("a client-supplied left-most hop is ignored", func(t *testing.T) {
		s.admits(t, 1, call{remote: "10.0.0.1:1", xff: "1.1.1.1, 198.51.100.30"})
		for _, spoof := range []string{"1.1.1.2", "2.2.2.2, 3.3.3.3", "garbage", "10.9.9.9"} {
			s.refuses(t, call{remote: "10.0.0.1:1", xff: spoof + ", 198.51.100.30"})
		}
	})
	t.Run("trusted proxy chains are walked from the right", func(t *testing.T) {
		s.admits(t, 1, call{remote: "10.0.0.1:1", xff: "198.51.100.40, 10.0.0.7, 10.0.0.8"})
		s.refuses(t, call{remote: "10.0.0.2:1", xff: "198.51.100.40"})
		s.admits(t, 1, call{remote: "10.0.0.1:1", xff: "198.51.100.40, 198.51.100.41, 10.0.0.8"})
	})
	t.Run("an untrusted peer's X-Forwarded-For is ignored", func(t *testing.T) {
		s.admits(t, 1, call{remote: "198.51.100.50:1", xff: "192.0.2.1"})
		s.refuses(t, call{remote: "198.51.100.50:1", xff: "192.0.2.2"})
	})
}

func TestRateLimitedCallerWithMalformedBodyGets429(t *testing.T) {
	s := newRateLimitedServer(t, RateLimiting{Config: newTestConfig(t, limit2)})
	rec, env := s.post(t, call{body: "{not json"})
	if rec.Code != http.StatusBadRequest || env.Code != domain.CodeInvalidArgument {
		t.Fatalf("malformed body under quota = %d %s, want 400", rec.Code, env.Code)
	}
	s.admits(t, 1, call{})
	s.refuses(t, call{body: "{not json"})
}

func TestRateLimitedRequestsCountOnlyInTheirOwnMetric(t *testing.T) {
	s := newRateLimitedServer(t, RateLimiting{Config: newTestConfig(t, limit2)})
	s.admits(t, 2, call{})
	for range 5 {
		s.refuses(t, call{})
	}
	mfs, err := s.metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	route := map[string]string{"route": "POST /test/apply"}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"changeflow_rate_limited_total", map[string]string{"bucket": "apply"}, 5},
		{"changeflow_http_requests_received_total", route, 2},
		{"changeflow_http_requests_succeeded_total", route, 2},
		{"changeflow_http_requests_total", map[string]string{"route": "POST /test/apply", "code": "202"}, 2},
		{"changeflow_http_requests_total", map[string]string{"route": "POST /test/apply", "code": "429"}, 0},
	} {
		if got := counterValue(mfs, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	for _, mf := range mfs {
		if mf.GetName() != "changeflow_rate_limited_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != 1 {
				t.Errorf("rate_limited_total has labels %v, want bucket only", m.GetLabel())
			}
		}
	}
}

// counterValue sums the counters named name whose labels include labels.
func counterValue(mfs []*dto.MetricFamily, name string, labels map[string]string) float64 {
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for k, v := range labels {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == k && lp.GetValue() == v {
						found = true
					}
				}
				if !found {
					continue next
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

func TestRateLimitedCounterFailureStillAnswers429(t *testing.T) {
	var logs bytes.Buffer
	rl := &rateLimiter{logger: slog.New(slog.NewTextHandler(&logs, nil))} // nil counter: panics inside
	rl.countLimited("apply")
	if !strings.Contains(logs.String(), "metric failed") {
		t.Fatalf("a panicking counter must be logged; log: %s", logs.String())
	}
}

func TestTwoServersShareOneRegistry(t *testing.T) {
	// cmd and tests may build a server twice on one registry; the second
	// reuses the counter instead of failing or losing it.
	logger := slog.New(slog.DiscardHandler)
	m := metrics.New(logger, "test")
	a := newRateLimiter(Deps{Logger: logger, Metrics: m})
	b := newRateLimiter(Deps{Logger: logger, Metrics: m})
	if a.limited != b.limited {
		t.Fatal("second server registered its own rate_limited counter")
	}
}

// thirds is a fake global quota of three live instances.
type thirds struct{}

func (thirds) PerInstance(limit int) int { return (limit + 2) / 3 }

func TestGlobalQuotaDividesTheLimitWhenEnabled(t *testing.T) {
	cfg := newTestConfig(t, "ratelimit:\n  apply:\n    limit: 6\n")
	s := newRateLimitedServer(t, RateLimiting{Config: cfg, Quota: thirds{}})
	s.admits(t, 6, call{remote: "198.51.100.1:1"})
	s.refuses(t, call{remote: "198.51.100.1:1"})

	cfg.set(t, "ratelimit:\n  apply:\n    limit: 6\n  global:\n    enabled: true\n")
	s.admits(t, 2, call{remote: "198.51.100.2:1"})
	s.refuses(t, call{remote: "198.51.100.2:1"})
}

func TestRateLimitRunsBeforeAuthorization(t *testing.T) {
	var calls atomic.Int64
	login := applyRoute(&calls)
	login.pattern = "POST /test/login-only"
	login.login = true
	s := newRateLimitedServer(t, RateLimiting{Config: newTestConfig(t, limit2)}, login)
	post := func(user string) int {
		req := httptest.NewRequest("POST", "/test/login-only", strings.NewReader("{not json"))
		if user != "" {
			req.Header.Set("X-Test-User", user)
		}
		rec := httptest.NewRecorder()
		s.h.ServeHTTP(rec, req)
		return rec.Code
	}
	// An anonymous caller spends its quota on 401s, then gets 429 — the
	// refusal that needs no work comes first (docs/api.md "Rate limiting").
	for _, want := range []int{401, 401, 429} {
		if got := post(""); got != want {
			t.Fatalf("anonymous caller got %d, want %d", got, want)
		}
	}
	// A logged-in caller has its own quota: past authorization its
	// malformed body is the handler's 400.
	if got := post("alice"); got != http.StatusBadRequest {
		t.Fatalf("alice got %d, want 400", got)
	}
	if calls.Load() != 1 {
		t.Fatalf("handler ran %d times, want 1", calls.Load())
	}
}

func TestConcurrentRequestsOfOneCallerGetExactlyTheLimit(t *testing.T) {
	s := newRateLimitedServer(t, RateLimiting{Config: newTestConfig(t, "ratelimit:\n  apply:\n    limit: 7\n")})
	var accepted, limited atomic.Int64
	var wg sync.WaitGroup
	for range 48 {
		wg.Go(func() {
			req := httptest.NewRequest("POST", "/test/apply", strings.NewReader("{}"))
			req.Header.Set("X-Test-User", "alice")
			rec := httptest.NewRecorder()
			s.h.ServeHTTP(rec, req)
			switch rec.Code {
			case http.StatusAccepted:
				accepted.Add(1)
			case http.StatusTooManyRequests:
				limited.Add(1)
			}
		})
	}
	wg.Wait()
	if accepted.Load() != 7 || limited.Load() != 41 {
		t.Fatalf("accepted %d, limited %d; want exactly 7 and 41", accepted.Load(), limited.Load())
	}
}
