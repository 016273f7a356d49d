package gitlab

import (
	"net/http"
	"strings"
	"testing"
)

// TestMRPage: the MR's web_url is a page a person can read — title, state,
// the description escaped, the binding file's diff, pipelines and
// approvals — before and after the merge, and a missing MR is a 404.
func TestMRPage(t *testing.T) {
	e := newEnv(t)
	iid := e.readyMR("req-page", map[string]string{"bindings/payments.yaml": binding("alice")})
	e.must(200, "PUT", tokBot, e.mrPath(iid), map[string]any{
		"description": "Requested by alice <script>alert('x')</script> & reviewed",
	})
	webURL := e.mr(iid)["web_url"].(string)
	const suffix = "/config/bindings/-/merge_requests/"
	i := strings.Index(webURL, suffix)
	if i < 0 {
		t.Fatalf("web_url %q is not an MR page URL", webURL)
	}
	page := func(path string) resp {
		t.Helper()
		req, _ := http.NewRequest("GET", e.base+path, nil)
		return do(t, req)
	}
	check := func(r resp, wants ...string) {
		t.Helper()
		if r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
			t.Fatalf("page = %d %s", r.Status, r.Header.Get("Content-Type"))
		}
		body := string(r.Raw)
		for _, w := range wants {
			if !strings.Contains(body, w) {
				t.Errorf("page lacks %q:\n%s", w, body)
			}
		}
		if strings.Contains(body, "<script>alert") {
			t.Fatalf("the description's markup reached the page unescaped:\n%s", body)
		}
	}
	path := webURL[i:]

	e.waitStatus(iid, "mergeable")
	check(page(path), "Add req-page", `class="state opened"`, "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; reviewed",
		"bindings/payments.yaml", `<span class="add">&#43;- subject: alice</span>`,
		"Approvals (2 of 2)", "@approver-1", "@approver-2", "success (head)",
		"<code>req-page</code> → <code>main</code>")

	e.must(200, "PUT", tokBot, e.mrPath(iid)+"/merge", nil)
	// After the merge the page shows what the merge put on main (the merge
	// base has moved to the head, so a naive base..head diff is empty).
	check(page(path), `class="state merged"`, "Merged", `<span class="add">&#43;- subject: alice</span>`)
	if r := page(path); strings.Contains(string(r.Raw), "No changes.") {
		t.Fatalf("merged MR page shows no changes:\n%s", r.Raw)
	}

	for _, missing := range []string{suffix + "99", "/no/such-project/-/merge_requests/1", suffix + "x"} {
		if r := page(missing); r.Status != 404 {
			t.Errorf("GET %s = %d, want 404", missing, r.Status)
		}
	}
}
