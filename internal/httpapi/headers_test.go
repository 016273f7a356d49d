package httpapi

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"changeflow/internal/config"
	"changeflow/internal/metrics"
)

// TestEveryResponseRefusesFramingAndInlineScript performs the browser
// attacks of issue 13 finding 13 at the header level: another site
// framing a page (clickjacking) and a script injected into a response.
// Every kind of response — the app's pages and assets, API JSON, an
// unmatched path, a 405, a panic's 500 — carries a policy without
// 'unsafe-inline' that forbids framing, plus the anti-framing header of
// older browsers, a Referrer-Policy and a Permissions-Policy.
func TestEveryResponseRefusesFramingAndInlineScript(t *testing.T) {
	d := webTestDeps(t)
	h := newServer(d, route{
		pattern: "GET /boom",
		handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }),
	})
	html := "text/html"
	for _, tc := range []struct {
		name, method, target, accept string
		status                       int
		app                          bool // the app's handler answered: its own policy
	}{
		{"the entry page", "GET", "/", html, 200, true},
		{"a client route", "GET", "/console", html, 200, true},
		{"a hashed asset", "GET", "/assets/app-abc123.js", "*/*", 200, true},
		{"a missing asset", "GET", "/assets/gone.js", "*/*", 404, true},
		{"an API route", "GET", "/healthz", "", 200, false},
		{"the metrics scrape", "GET", "/metrics", "", 200, false},
		{"an unknown API path", "GET", "/api/nope", html, 404, false},
		{"a wrong method", "DELETE", "/healthz", "", 405, false},
		{"a panic", "GET", "/boom", "", 500, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, tc.target, nil)
			if tc.accept != "" {
				req.Header.Set("Accept", tc.accept)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			conformRecorded(t, req, nil, rec.Code, rec.Header(), rec.Body.Bytes())
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d", rec.Code, tc.status)
			}
			hdr := rec.Header()
			csp := hdr.Get("Content-Security-Policy")
			if strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "frame-ancestors 'none'") {
				t.Errorf("Content-Security-Policy %q", csp)
			}
			app := d.Web.(interface{ ContentSecurityPolicy() string }).ContentSecurityPolicy()
			if tc.app && csp != app || !tc.app && csp != apiPolicy {
				t.Errorf("policy %q; the app's is %q, the API's %q", csp, app, apiPolicy)
			}
			for name, want := range map[string]string{
				"X-Frame-Options":    "DENY",
				"Referrer-Policy":    "no-referrer",
				"Permissions-Policy": permissionsPolicy,
			} {
				if got := hdr.Get(name); got != want {
					t.Errorf("%s = %q, want %q", name, got, want)
				}
			}
			if !strings.Contains(hdr.Get("Permissions-Policy"), "camera=()") {
				t.Error("Permissions-Policy does not turn the camera off")
			}
		})
	}
}

// TestTheAppMayCallTheConfiguredIssuerOnly: sign-in with PKCE fetches the
// issuer's discovery document and token endpoint from the browser, so the
// app's connect-src names the issuer's origin — read per response, so a
// reload applies — and nothing else.
func TestTheAppMayCallTheConfiguredIssuerOnly(t *testing.T) {
	cfg := &swapConfig{}
	load := func(issuer string) {
		mgr, err := config.Load(t.Context(), config.Options{Overlay: map[string]any{"oidc.issuer": issuer}})
		if err != nil {
			t.Fatal(err)
		}
		cfg.p.Store(mgr.Current())
		_ = mgr.Close()
	}
	logger := slog.New(slog.DiscardHandler)
	h := newServer(Deps{Logger: logger, Metrics: metrics.New(logger, "test"), Ready: fakeReady{}, Business: Business{Config: cfg}})
	connect := func() string {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		for _, d := range strings.Split(rec.Header().Get("Content-Security-Policy"), ";") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(d), "connect-src "); ok {
				return v
			}
		}
		t.Fatal("no connect-src")
		return ""
	}
	load("")
	if got := connect(); got != "'self'" {
		t.Fatalf("no issuer: connect-src %q", got)
	}
	load("https://idp.example:8443/realms/corp/")
	if got := connect(); got != "'self' https://idp.example:8443" {
		t.Fatalf("issuer: connect-src %q", got)
	}
	load("javascript:alert(1)")
	if got := connect(); got != "'self'" {
		t.Fatalf("a non-http issuer: connect-src %q", got)
	}
}

// The header values every response shares (headers.go) are never changed
// by what one response does with its headers: a handler that adds to,
// sets and deletes each of them leaves the next response's headers as
// they were.
func TestSharedHeaderValuesStayUnchanged(t *testing.T) {
	d := webTestDeps(t)
	shared := []string{"Content-Security-Policy", "X-Frame-Options", "Referrer-Policy", "Permissions-Policy",
		"Content-Type", "X-Content-Type-Options"}
	h := newServer(d, route{
		pattern: "GET /meddle",
		handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			hd := w.Header()
			hd["Content-Type"] = jsonContentTypeValue
			hd["X-Content-Type-Options"] = nosniffValue
			for i, k := range shared {
				hd.Add(k, "added")
				switch i % 3 {
				case 0:
					hd.Set(k, "set")
				case 1:
					hd.Del(k)
				}
				hd.Add(k, "again")
			}
			respond(w, d.Logger, "OK", nil)
		}),
	})
	get := func(target string) http.Header {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
		return rec.Header()
	}
	before := get("/healthz")
	for range 3 {
		get("/meddle")
		after := get("/healthz")
		for _, k := range shared {
			if strings.Join(after.Values(k), "|") != strings.Join(before.Values(k), "|") {
				t.Fatalf("%s: %q before a response meddled with it, %q after", k, before.Values(k), after.Values(k))
			}
		}
	}
	for _, k := range shared {
		if len(before.Values(k)) != 1 {
			t.Fatalf("%s: %q, want one value", k, before.Values(k))
		}
	}
}
