package web

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
)

const (
	testIndex  = `<!doctype html><html><head><script type="module" src="/assets/index-abc123.js"></script></head><body><div id="app"></div></body></html>`
	testScript = `console.log("release A");`
)

// testApp is a build with one hashed script, a stylesheet long enough to
// be worth compressing, an icon at the root and an image.
func testApp(t *testing.T) *Handler {
	t.Helper()
	h, err := New(fstest.MapFS{
		"index.html":              {Data: []byte(testIndex)},
		"assets/index-abc123.js":  {Data: []byte(testScript)},
		"assets/index-def456.css": {Data: []byte(strings.Repeat("body { color: #123456; }\n", 40))},
		"assets/logo-0a1b2c.png":  {Data: []byte("\x89PNG\r\n\x1a\n" + strings.Repeat("x", 400))},
		"favicon.svg":             {Data: []byte(`<svg xmlns="http://www.w3.org/2000/svg"></svg>`)},
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return h
}

func serve(h http.Handler, method, target string, header map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// navigate is what a browser sends when a person opens a page.
var navigate = map[string]string{"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}

func TestCacheAndFallbackRules(t *testing.T) {
	h := testApp(t)
	for _, tc := range []struct {
		name        string
		target      string
		header      map[string]string
		status      int
		cache       string
		contentType string
		body        string // exact body, or "" for the envelope check below
		envelope    bool   // 404 JSON envelope NOT_FOUND
	}{
		{name: "the root is the entry page, never stored", target: "/", header: navigate,
			status: 200, cache: "no-store", contentType: "text/html; charset=utf-8", body: testIndex},
		{name: "index.html by name is the entry page too", target: "/index.html",
			status: 200, cache: "no-store", contentType: "text/html; charset=utf-8", body: testIndex},
		{name: "a client route is the entry page", target: "/requests/op-1", header: navigate,
			status: 200, cache: "no-store", contentType: "text/html; charset=utf-8", body: testIndex},
		{name: "a nested console route is the entry page", target: "/console/batches", header: navigate,
			status: 200, cache: "no-store", contentType: "text/html; charset=utf-8", body: testIndex},
		{name: "a hashed script is immutable", target: "/assets/index-abc123.js",
			status: 200, cache: "public, max-age=31536000, immutable", contentType: "text/javascript; charset=utf-8", body: testScript},
		{name: "a hashed stylesheet is immutable with its type", target: "/assets/index-def456.css",
			status: 200, cache: "public, max-age=31536000, immutable", contentType: "text/css; charset=utf-8"},
		{name: "a hashed image is immutable with its type", target: "/assets/logo-0a1b2c.png",
			status: 200, cache: "public, max-age=31536000, immutable", contentType: "image/png"},
		{name: "an unhashed root file is revalidated", target: "/favicon.svg",
			status: 200, cache: "no-cache", contentType: "image/svg+xml"},
		{name: "a removed hashed script is a 404 envelope, not a page", target: "/assets/index-old999.js",
			header: map[string]string{"Accept": "*/*"}, status: 404, cache: "no-store", envelope: true},
		{name: "a removed script asked for as html still has an extension, so 404", target: "/assets/index-old999.js",
			header: navigate, status: 404, cache: "no-store", envelope: true},
		{name: "a removed stylesheet is a 404 envelope", target: "/assets/index-old999.css",
			header: map[string]string{"Accept": "text/css,*/*;q=0.1"}, status: 404, cache: "no-store", envelope: true},
		{name: "a navigation into the assets directory gets the fallback page", target: "/assets/gone",
			header: navigate, status: 200, cache: "no-store", contentType: "text/html; charset=utf-8", body: testIndex},
		{name: "a client route fetched by a script is a 404 envelope", target: "/requests/op-1",
			header: map[string]string{"Accept": "application/json"}, status: 404, cache: "no-store", envelope: true},
		{name: "no Accept header is not a navigation", target: "/somewhere",
			status: 404, cache: "no-store", envelope: true},
		{name: "a missing icon is a 404 envelope", target: "/favicon.ico", header: navigate,
			status: 404, cache: "no-store", envelope: true},
		{name: "dot segments cannot escape the build", target: "/assets/../../etc/passwd",
			header: map[string]string{"Accept": "*/*"}, status: 404, cache: "no-store", envelope: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := serve(h, "GET", tc.target, tc.header)
			if rec.Code != tc.status {
				t.Fatalf("status = %d, want %d; body %s", rec.Code, tc.status, rec.Body)
			}
			if got := rec.Header().Get("Cache-Control"); got != tc.cache {
				t.Fatalf("Cache-Control = %q, want %q", got, tc.cache)
			}
			if got := rec.Header().Get("X-Content-Type-Options"); got != "nosniff" {
				t.Fatalf("X-Content-Type-Options = %q", got)
			}
			if tc.envelope {
				if got := rec.Header().Get("Content-Type"); got != "application/json; charset=utf-8" {
					t.Fatalf("Content-Type = %q", got)
				}
				var env struct {
					Code    string          `json:"code"`
					Message string          `json:"message"`
					Data    json.RawMessage `json:"data"`
				}
				if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil || env.Code != "NOT_FOUND" || env.Message == "" || string(env.Data) != "null" {
					t.Fatalf("body = %s (%v)", rec.Body, err)
				}
				return
			}
			if got := rec.Header().Get("Content-Type"); got != tc.contentType {
				t.Fatalf("Content-Type = %q, want %q", got, tc.contentType)
			}
			if tc.body != "" && rec.Body.String() != tc.body {
				t.Fatalf("body = %q", rec.Body)
			}
		})
	}
}

func TestCompression(t *testing.T) {
	h := testApp(t)
	css := "/assets/index-def456.css"
	for _, tc := range []struct {
		name           string
		target         string
		acceptEncoding string
		gzipped        bool
	}{
		{name: "a text asset is gzipped when the client accepts it", target: css, acceptEncoding: "gzip, deflate, br", gzipped: true},
		{name: "a file too short to gain is sent plain", target: "/", acceptEncoding: "gzip", gzipped: false},
		{name: "q=0 refuses gzip", target: css, acceptEncoding: "gzip;q=0, br", gzipped: false},
		{name: "a wildcard accepts gzip", target: css, acceptEncoding: "*", gzipped: true},
		{name: "a wildcard does not override an explicit refusal", target: css, acceptEncoding: "gzip;q=0, *", gzipped: false},
		{name: "no Accept-Encoding gets the plain file", target: css, acceptEncoding: "", gzipped: false},
		{name: "an image is never recompressed", target: "/assets/logo-0a1b2c.png", acceptEncoding: "gzip", gzipped: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := serve(h, "GET", tc.target, map[string]string{"Accept-Encoding": tc.acceptEncoding})
			if rec.Code != 200 {
				t.Fatalf("status %d", rec.Code)
			}
			enc := rec.Header().Get("Content-Encoding")
			if tc.gzipped != (enc == "gzip") {
				t.Fatalf("Content-Encoding = %q, want gzipped=%v", enc, tc.gzipped)
			}
			if rec.Header().Get("Content-Length") == "" {
				t.Fatal("no Content-Length")
			}
			if !tc.gzipped {
				return
			}
			if !strings.Contains(rec.Header().Get("Vary"), "Accept-Encoding") {
				t.Fatalf("Vary = %q", rec.Header().Get("Vary"))
			}
			zr, err := gzip.NewReader(bytes.NewReader(rec.Body.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			plain, _ := io.ReadAll(zr)
			if !bytes.Equal(plain, h.files["assets/index-def456.css"].body) {
				t.Fatal("gzip body does not decompress to the file")
			}
		})
	}
}

func TestValidatorsAndMethods(t *testing.T) {
	h := testApp(t)
	t.Run("an asset answers 304 to its own ETag", func(t *testing.T) {
		first := serve(h, "GET", "/assets/index-abc123.js", nil)
		etag := first.Header().Get("ETag")
		if etag == "" {
			t.Fatal("no ETag")
		}
		again := serve(h, "GET", "/assets/index-abc123.js", map[string]string{"If-None-Match": etag})
		if again.Code != 304 || again.Body.Len() != 0 {
			t.Fatalf("status %d body %q", again.Code, again.Body)
		}
	})
	t.Run("the gzip variant has its own ETag", func(t *testing.T) {
		plain := serve(h, "GET", "/assets/index-def456.css", nil).Header().Get("ETag")
		gz := serve(h, "GET", "/assets/index-def456.css", map[string]string{"Accept-Encoding": "gzip"}).Header().Get("ETag")
		if plain == gz {
			t.Fatalf("both %s", plain)
		}
	})
	t.Run("the entry page carries no validator and ignores If-None-Match", func(t *testing.T) {
		rec := serve(h, "GET", "/", map[string]string{"If-None-Match": "*"})
		if rec.Code != 200 || rec.Header().Get("ETag") != "" {
			t.Fatalf("status %d ETag %q", rec.Code, rec.Header().Get("ETag"))
		}
	})
	t.Run("HEAD has the headers without the body", func(t *testing.T) {
		rec := serve(h, "HEAD", "/assets/index-abc123.js", nil)
		if rec.Code != 200 || rec.Body.Len() != 0 || rec.Header().Get("Content-Length") != strconv.Itoa(len(testScript)) {
			t.Fatalf("status %d body %q length %q", rec.Code, rec.Body, rec.Header().Get("Content-Length"))
		}
	})
	t.Run("POST is a 405 envelope", func(t *testing.T) {
		rec := serve(h, "POST", "/", nil)
		if rec.Code != 405 || !strings.Contains(rec.Body.String(), `"METHOD_NOT_ALLOWED"`) || rec.Header().Get("Allow") != "GET, HEAD" {
			t.Fatalf("status %d body %s", rec.Code, rec.Body)
		}
	})
}

func TestNewNeedsAnEntryPage(t *testing.T) {
	if _, err := New(fstest.MapFS{"assets/a.js": {Data: []byte("x")}}); err == nil {
		t.Fatal("a build without index.html was accepted")
	}
}
