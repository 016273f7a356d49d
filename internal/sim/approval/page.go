package approval

import (
	"errors"
	"html/template"
	"net/http"
	"slices"
	"strings"
)

// The control page: the approval system's inbox for a person in the local
// run — the decision policy, under a heading of its own and apart from
// the forms, then every form, newest first, with its reason and days and
// Approve and Reject buttons. It is plain HTML forms posting to /_control/ui/…, which
// decide through the same Decide and SetPolicy as the JSON control API and
// answer 303 back to the page, so it works without JavaScript and leaves
// that API unchanged.
//
// The simulator is mounted under a prefix it does not know (/approval/ in
// the local run, stripped before it sees the request), so every link and
// redirect is relative to /_control/ui.

var pageTmpl = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Approval simulator</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:15px/1.45 system-ui,sans-serif;margin:24px;color:#1d2733;max-width:1100px}
table{border-collapse:collapse;width:100%;margin-top:12px}th,td{text-align:left;padding:6px 8px;border-bottom:1px solid #d9dee5;vertical-align:top}
th{font-weight:600;color:#5b6673}.mono{font-family:ui-monospace,monospace;font-size:13px}
button{font:inherit;padding:4px 12px;border-radius:4px;border:1px solid #2b5d9b;background:#2b5d9b;color:#fff;cursor:pointer}
button.reject{background:#a8321f;border-color:#a8321f}button.plain{background:#fff;color:#2b5d9b}
form{display:inline}.muted{color:#5b6673}.PENDING{color:#8a5a00;font-weight:600}.APPROVED{color:#1f7a3a}.REJECTED,.WITHDRAWN{color:#a8321f}
.policy{background:#eef3f9;border:1px solid #d9dee5;border-radius:6px;padding:10px 14px;margin-bottom:24px}h2{font-size:17px;margin:18px 0 6px}
</style></head><body>
<h1>Approval simulator</h1>
<p class="muted">The company's approval system, simulated for the local run (docs/simulators.md). A decision is called back to changeflow at once.</p>
<h2>Decision policy</h2>
<div class="policy" data-testid="policy">
{{if eq .Policy.Mode "auto"}}Every form is <strong>approved automatically</strong> about {{.Policy.DelayMs}} ms after it arrives{{if .Policy.RejectRequesters}}, except from {{range $i, $r := .Policy.RejectRequesters}}{{if $i}}, {{end}}{{$r}}{{end}} (rejected){{end}}.
<form method="post" action="ui/policy"><input type="hidden" name="mode" value="manual"><button class="plain" type="submit">Decide by hand instead</button></form>
{{else}}Forms wait for <strong>your decision</strong> below.
<form method="post" action="ui/policy"><input type="hidden" name="mode" value="auto"><button class="plain" type="submit">Approve automatically after 2 s</button></form>
{{end}}
</div>
<h2>Forms</h2>
<p><a href="ui">Refresh</a></p>
{{if not .Items}}<p class="muted">No approval forms yet. Submit a request in changeflow; its form appears here.</p>{{else}}
<table data-testid="approvals"><thead><tr><th>Form</th><th>Request (operationId)</th><th>Requester</th><th>Title</th><th>Reason</th><th>Days</th><th>Status</th><th>Decide</th></tr></thead><tbody>
{{range .Items}}<tr data-operation-id="{{.OperationID}}">
<td class="mono">{{.ApprovalID}}</td><td class="mono">{{.OperationID}}</td><td>{{.Requester}}</td><td>{{.Title}}</td>
<td data-testid="reason">{{with index .Fields "reason"}}{{.}}{{end}}</td><td data-testid="days">{{with index .Fields "days"}}{{.}}{{end}}</td>
<td class="{{.Status}}">{{.Status}}{{if .Comment}} <span class="muted">({{.Comment}})</span>{{end}}</td>
<td>{{if eq .Status "PENDING"}}<form method="post" action="ui/approvals/{{.ApprovalID}}/approve"><button type="submit">Approve</button></form>
<form method="post" action="ui/approvals/{{.ApprovalID}}/reject"><button class="reject" type="submit">Reject</button></form>{{end}}</td>
</tr>{{end}}
</tbody></table>{{end}}
</body></html>
`))

// handlePage is GET /_control/ui.
func (s *Server) handlePage(w http.ResponseWriter, r *http.Request) {
	items := s.List()
	slices.Reverse(items) // newest first
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := pageTmpl.Execute(w, struct {
		Policy Policy
		Items  []Approval
	}{s.Policy(), items}); err != nil {
		s.logger.Warn("approval control page", "err", err)
	}
}

// backToPage answers a form post with 303 to the page. The Location is
// relative to the request's own URL, which the browser resolves with the
// mount prefix this handler never sees (http.Redirect would resolve it
// against the stripped path).
func backToPage(w http.ResponseWriter, depth int) {
	w.Header().Set("Location", strings.Repeat("../", depth)+"ui")
	w.WriteHeader(http.StatusSeeOther)
}

// handlePageDecide is POST /_control/ui/approvals/{id}/{approve|reject}.
func (s *Server) handlePageDecide(w http.ResponseWriter, r *http.Request) {
	result := map[string]Result{"approve": Approved, "reject": Rejected}[r.PathValue("action")]
	if result == "" {
		http.Error(w, "action must be approve or reject", http.StatusNotFound)
		return
	}
	// Deciding twice (a double click, a stale page) is not an error here:
	// the page shows the decision that stands.
	if _, err := s.DecideAs(r.PathValue("id"), result, "", PageDecider); err != nil && !errors.Is(err, ErrNotPending) {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	backToPage(w, 3)
}

// handlePagePolicy is POST /_control/ui/policy with mode=manual|auto;
// auto is the local world's policy (approve after 2 s).
func (s *Server) handlePagePolicy(w http.ResponseWriter, r *http.Request) {
	p := Policy{Mode: Manual}
	if r.PostFormValue("mode") == string(Auto) {
		p = LocalPolicy()
	}
	if err := s.SetPolicy(p); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	backToPage(w, 1)
}
