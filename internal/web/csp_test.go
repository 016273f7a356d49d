package web

import (
	"crypto/sha256"
	"encoding/base64"
	"io/fs"
	"net/http"
	"strings"
	"testing"
	"testing/fstest"
)

func sha256Source(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// directive returns the value of one directive of a policy.
func directive(t *testing.T, policy, name string) string {
	t.Helper()
	for _, d := range strings.Split(policy, ";") {
		d = strings.TrimSpace(d)
		if k, v, _ := strings.Cut(d, " "); k == name {
			return v
		}
	}
	t.Fatalf("policy %q has no %s", policy, name)
	return ""
}

// TestThePolicyAllowsTheBuiltBootScriptOnly checks the policy of the
// embedded build against the attacks it exists for: an injected inline
// script (no 'unsafe-inline', no 'unsafe-eval', no wildcard; the one inline
// script allowed is the release guard, by the hash of the bytes that are
// served), and framing by another site (frame-ancestors 'none').
func TestThePolicyAllowsTheBuiltBootScriptOnly(t *testing.T) {
	h := Embedded()
	policy := h.ContentSecurityPolicy()
	for _, banned := range []string{"unsafe-inline", "unsafe-eval", "unsafe-hashes", "*", "http:", "https:"} {
		if strings.Contains(policy, banned) {
			t.Errorf("policy allows %s: %s", banned, policy)
		}
	}
	if got := directive(t, policy, "frame-ancestors"); got != "'none'" {
		t.Errorf("frame-ancestors %q, want 'none'", got)
	}
	if got := directive(t, policy, "object-src"); got != "'none'" {
		t.Errorf("object-src %q, want 'none'", got)
	}
	// The served page's inline script, cut out independently of csp.go.
	index, err := fs.ReadFile(mustSub(t), "index.html")
	if err != nil {
		t.Fatal(err)
	}
	page := string(index)
	start := strings.Index(page, "<script>")
	end := strings.Index(page, "</script>")
	if start < 0 || end < start {
		t.Fatal("the embedded page has no inline boot script; the release guard is gone")
	}
	boot := page[start+len("<script>") : end]
	want := "'self' " + sha256Source(boot)
	if got := directive(t, policy, "script-src"); got != want {
		t.Fatalf("script-src %q, want %q", got, want)
	}
	rec := serve(h, "GET", "/", nil)
	if rec.Header().Get("Content-Security-Policy") != policy {
		t.Fatalf("the entry page is served without the policy: %v", rec.Header())
	}
	for _, path := range []string{"/console", "/assets/gone-123.js", "/favicon.svg"} {
		if got := serve(h, "GET", path, map[string]string{"Accept": "text/html"}).Header().Get("Content-Security-Policy"); got != policy {
			t.Errorf("%s: policy %q", path, got)
		}
	}
}

func mustSub(t *testing.T) fs.FS {
	t.Helper()
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		t.Fatal(err)
	}
	return sub
}

// TestThePolicyFollowsTheBuild: the hash comes from the page being served,
// computed at start-up, so a changed guard gets its own hash (and a page
// an attacker edited to add a script gets no hash for the old one).
func TestThePolicyFollowsTheBuild(t *testing.T) {
	build := func(index string) string {
		h, err := New(fstest.MapFS{"index.html": {Data: []byte(index)}})
		if err != nil {
			t.Fatal(err)
		}
		return directive(t, h.ContentSecurityPolicy(), "script-src")
	}
	tests := []struct {
		name, index, want string
	}{
		{"no inline script: self only", `<html><script type="module" src="/assets/a.js"></script></html>`, "'self'"},
		{"one guard", `<html><script>var a = 1;</script><script src="/x.js"></script></html>`, "'self' " + sha256Source("var a = 1;")},
		{"another guard, another hash", `<html><script>var a = 2;</script></html>`, "'self' " + sha256Source("var a = 2;")},
		{"line breaks hashed as the browser normalizes them", "<html><script>a;\r\nb;\rc;</script></html>", "'self' " + sha256Source("a;\nb;\nc;")},
		{"attributes on an inline script", `<html><SCRIPT type="text/javascript">x()</SCRIPT></html>`, "'self' " + sha256Source("x()")},
		{"two inline scripts", `<script>1</script><script>2</script>`, "'self' " + sha256Source("1") + " " + sha256Source("2")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := build(tt.index); got != tt.want {
				t.Fatalf("script-src %q, want %q", got, tt.want)
			}
		})
	}
}

func TestNonPageResponsesCarryThePolicy(t *testing.T) {
	h := testApp(t)
	for _, tc := range []struct{ method, path string }{{"GET", "/assets/nope.js"}, {"POST", "/"}} {
		rec := serve(h, tc.method, tc.path, nil)
		if rec.Code == http.StatusOK || rec.Header().Get("Content-Security-Policy") != h.ContentSecurityPolicy() {
			t.Errorf("%s %s: %d, policy %q", tc.method, tc.path, rec.Code, rec.Header().Get("Content-Security-Policy"))
		}
	}
}
