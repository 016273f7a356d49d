package web

import (
	"regexp"
	"strings"
	"testing"
)

// TestEmbeddedAppIsComplete checks the committed build: the entry page
// exists and every asset it names is in the binary, with the type and
// cache header a browser needs — a stale or half-committed dist/ fails
// here, not in a user's browser.
func TestEmbeddedAppIsComplete(t *testing.T) {
	h := Embedded()
	refs := regexp.MustCompile(`(?:src|href)="(/assets/[^"]+)"`).FindAllStringSubmatch(string(h.index.body), -1)
	if len(refs) == 0 {
		t.Fatalf("index.html names no assets:\n%s", h.index.body)
	}
	sawScript := false
	for _, m := range refs {
		rec := serve(h, "GET", m[1], nil)
		if rec.Code != 200 {
			t.Fatalf("%s: status %d", m[1], rec.Code)
		}
		if rec.Header().Get("Cache-Control") != cacheImmutable {
			t.Fatalf("%s: Cache-Control %q", m[1], rec.Header().Get("Cache-Control"))
		}
		if strings.HasSuffix(m[1], ".js") {
			sawScript = true
			if rec.Header().Get("Content-Type") != "text/javascript; charset=utf-8" {
				t.Fatalf("%s: Content-Type %q", m[1], rec.Header().Get("Content-Type"))
			}
		}
	}
	if !sawScript {
		t.Fatal("index.html loads no script")
	}
	// The release-safety guard must run before any module can fail, so it
	// is inline in the entry page (docs/webapp.md).
	if !strings.Contains(string(h.index.body), "changeflow.lastAutoReload") {
		t.Fatal("index.html lacks the inline release-safety script")
	}
}
