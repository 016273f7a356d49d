package approval_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"changeflow/internal/sim/approval"
)

// TestControlPageDecidesAndSwitchesPolicy drives the control page as a
// browser would, mounted under /approval/ like the local run: the page
// lists a pending form with its buttons; posting Approve calls the
// service back, answers 303 to the page under the mount prefix, and the
// page then shows the decision without buttons; the policy form switches
// between manual and automatic decisions.
func TestControlPageDecidesAndSwitchesPolicy(t *testing.T) {
	w := newWorld(t, approval.Policy{Mode: approval.Manual})
	mux := http.NewServeMux()
	mux.Handle("/approval/", http.StripPrefix("/approval", w.sim))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	var redirects []string
	client := &http.Client{CheckRedirect: func(r *http.Request, via []*http.Request) error {
		redirects = append(redirects, r.URL.Path)
		return nil
	}}
	page := func() string {
		t.Helper()
		resp, err := client.Get(srv.URL + "/approval/_control/ui")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			t.Fatalf("page = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		return string(b)
	}
	post := func(action string, form url.Values) {
		t.Helper()
		// The form's action is relative to the page, as a browser resolves it.
		u, _ := url.Parse(srv.URL + "/approval/_control/ui")
		resp, err := client.PostForm(u.ResolveReference(&url.URL{Path: action}).String(), form)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("POST %s ended at %d", action, resp.StatusCode)
		}
		if last := redirects[len(redirects)-1]; last != "/approval/_control/ui" {
			t.Fatalf("POST %s redirected to %s, want the page under the mount prefix", action, last)
		}
	}

	if p := page(); !strings.Contains(p, "No approval forms yet") || !strings.Contains(p, "your decision") {
		t.Fatalf("empty manual page:\n%s", p)
	}
	_, a := w.submit("op-page-1", "")
	p := page()
	for _, want := range []string{"op-page-1", "PENDING", `action="ui/approvals/` + a.ApprovalID + `/approve"`, `action="ui/approvals/` + a.ApprovalID + `/reject"`} {
		if !strings.Contains(p, want) {
			t.Fatalf("page lacks %q:\n%s", want, p)
		}
	}

	post("ui/approvals/"+a.ApprovalID+"/approve", nil)
	if c := w.next(); c.OperationID != "op-page-1" || c.Result != "APPROVED" {
		t.Fatalf("callback = %+v, want APPROVED for op-page-1", c)
	}
	if p := page(); !strings.Contains(p, ">APPROVED") || strings.Contains(p, "/approve\"") {
		t.Fatalf("decided form still offers buttons or lacks its decision:\n%s", p)
	}
	// A second click on a stale page is harmless: the decision stands.
	post("ui/approvals/"+a.ApprovalID+"/reject", nil)
	if got, _ := w.sim.Get(a.ApprovalID); got.Status != approval.Approved {
		t.Fatalf("status after a stale reject = %s", got.Status)
	}
	w.quiet()

	post("ui/policy", url.Values{"mode": {"auto"}})
	if got := w.sim.Policy(); got.Mode != approval.Auto || got.DelayMs != 2000 {
		t.Fatalf("policy = %+v, want auto after 2 s", got)
	}
	if p := page(); !strings.Contains(p, "approved automatically") {
		t.Fatalf("auto page:\n%s", p)
	}
	post("ui/policy", url.Values{"mode": {"manual"}})
	if got := w.sim.Policy(); got.Mode != approval.Manual {
		t.Fatalf("policy = %+v, want manual", got)
	}

	// An unknown form is a plain 404, not a redirect.
	resp, err := http.PostForm(srv.URL+"/approval/_control/ui/approvals/APR-none/approve", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown form = %d, want 404", resp.StatusCode)
	}
}

// TestControlPageShowsReasonAndDaysApartFromThePolicy: each form's row
// shows its reason (escaped: a hostile reason renders as text) and days;
// the automatic-approval switch sits under its own heading, before and
// apart from the forms' Approve buttons.
func TestControlPageShowsReasonAndDaysApartFromThePolicy(t *testing.T) {
	w := newWorld(t, approval.Policy{Mode: approval.Manual})
	srv := httptest.NewServer(w.sim)
	t.Cleanup(srv.Close)
	w.submit("op-rd", "")
	status, _ := w.do("POST", "/v1/approvals", `{"operationId":"op-rd2","requester":"bob","title":"t","fields":{"reason":"<script>alert(1)</script> @all","days":5}}`)
	if status != 201 && status != 200 {
		t.Fatalf("submit: %d", status)
	}
	resp, err := http.Get(srv.URL + "/_control/ui")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	p := string(b)
	for _, want := range []string{`<td data-testid="reason">&lt;script&gt;alert(1)&lt;/script&gt; @all</td>`, `<td data-testid="days">5</td>`, `<td data-testid="days">7</td>`} {
		if !strings.Contains(p, want) {
			t.Fatalf("page lacks %q:\n%s", want, p)
		}
	}
	if strings.Contains(p, "<script>alert") {
		t.Fatalf("the reason is not escaped:\n%s", p)
	}
	policy, forms := strings.Index(p, "<h2>Decision policy</h2>"), strings.Index(p, "<h2>Forms</h2>")
	if policy < 0 || forms < policy || strings.Index(p, "Approve automatically") > forms || strings.Index(p, `type="submit">Approve</button>`) < forms {
		t.Fatalf("the policy switch is not apart from, and before, the forms:\n%s", p)
	}
}
