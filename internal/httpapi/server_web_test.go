package httpapi

import (
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"

	"changeflow/internal/domain"
	"changeflow/internal/metrics"
	"changeflow/internal/web"
)

const webTestIndex = `<!doctype html><title>app</title><script type="module" src="/assets/app-abc123.js"></script>`

// webTestDeps are a server's dependencies with a web app of its own build.
func webTestDeps(t *testing.T) Deps {
	t.Helper()
	app, err := web.New(fstest.MapFS{
		"index.html":           {Data: []byte(webTestIndex)},
		"assets/app-abc123.js": {Data: []byte("console.log(1)")},
	})
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	return Deps{Logger: logger, Metrics: metrics.New(logger, "test"), Ready: fakeReady{}, Version: "test", Web: app}
}

// TestTheAppSharesTheServerWithTheAPI checks where the web app ends and
// the API begins: the app gets the root, its assets and any other page
// path, while unknown paths under the API's prefixes keep the envelope.
func TestTheAppSharesTheServerWithTheAPI(t *testing.T) {
	h := newServer(webTestDeps(t))
	html := "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8"
	for _, tc := range []struct {
		name, method, target, accept string
		status                       int
		cache                        string
		page                         bool        // the entry page is the body
		code                         domain.Code // else the envelope's code ("" = not an envelope)
	}{
		{name: "the root is the app", method: "GET", target: "/", accept: html, status: 200, cache: "no-store", page: true},
		{name: "a client route is the app", method: "GET", target: "/requests/op-1", accept: html, status: 200, cache: "no-store", page: true},
		{name: "the console's routes are the app", method: "GET", target: "/console/batches", accept: html, status: 200, cache: "no-store", page: true},
		{name: "HEAD of a client route is the app", method: "HEAD", target: "/requests", accept: html, status: 200, cache: "no-store"},
		{name: "a hashed asset is immutable", method: "GET", target: "/assets/app-abc123.js", status: 200, cache: "public, max-age=31536000, immutable"},
		{name: "a missing asset is a 404 envelope", method: "GET", target: "/assets/app-old999.js", accept: "*/*", status: 404, cache: "no-store", code: domain.CodeNotFound},
		{name: "an unknown API path stays a 404 envelope, even for a browser", method: "GET", target: "/api/nope", accept: html, status: 404, code: domain.CodeNotFound},
		{name: "an unknown ops path stays a 404 envelope", method: "GET", target: "/ops/nope/deeper", accept: html, status: 404, code: domain.CodeNotFound},
		{name: "an unknown callback path stays a 404 envelope", method: "GET", target: "/callbacks/nope", accept: html, status: 404, code: domain.CodeNotFound},
		{name: "the bare API prefix is the API's", method: "GET", target: "/api", accept: html, status: 404, code: domain.CodeNotFound},
		{name: "dot segments do not smuggle an API path into the app", method: "GET", target: "/x/../api/nope", accept: html, status: 404, code: domain.CodeNotFound},
		{name: "POST to a page path is a 404 envelope", method: "POST", target: "/requests", accept: html, status: 404, code: domain.CodeNotFound},
		{name: "POST to the root is a 405 envelope", method: "POST", target: "/", status: 405, code: domain.CodeMethodNotAllowed},
		{name: "a wrong method on an API route stays a 405 envelope", method: "POST", target: "/healthz", status: 405, code: domain.CodeMethodNotAllowed},
		{name: "API routes are untouched", method: "GET", target: "/healthz", accept: html, status: 200, code: domain.CodeOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, tc.target, nil)
			if tc.accept != "" {
				req.Header.Set("Accept", tc.accept)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.status {
				t.Fatalf("status = %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			if tc.cache != "" && rec.Header().Get("Cache-Control") != tc.cache {
				t.Fatalf("Cache-Control = %q, want %q", rec.Header().Get("Cache-Control"), tc.cache)
			}
			if tc.page && rec.Body.String() != webTestIndex {
				t.Fatalf("body = %q, want the entry page", rec.Body)
			}
			if tc.code != "" {
				if !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") ||
					!strings.Contains(rec.Body.String(), `"code":"`+string(tc.code)+`"`) {
					t.Fatalf("want envelope %s, got %s %s", tc.code, rec.Header().Get("Content-Type"), rec.Body)
				}
			}
		})
	}
}

func TestTheEmbeddedAppIsServedByDefault(t *testing.T) {
	h, _ := newTestServer(t, fakeReady{})
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("Accept", "text/html")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `<div id="app">`) {
		t.Fatalf("status %d body %.200s", rec.Code, rec.Body)
	}
}
