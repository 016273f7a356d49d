package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
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
