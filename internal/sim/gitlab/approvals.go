package gitlab

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// approveRefusal says whether u may approve m now, ignoring the sha: 0 yes,
// 403 no approve permission at all (authorize!), 401 eligible but refused
// by ApprovalService (already approved, MR author or committer, MR not
// open) — lib/api/merge_request_approvals.rb.
func (s *Server) approveRefusal(ctx context.Context, p *project, m *mergeRequest, u *user) int {
	if !u.hasApprovePermission() {
		return http.StatusForbidden
	}
	if m.State != stateOpened || m.approvedBy(u) {
		return http.StatusUnauthorized
	}
	if u.Role < roleMaintainer {
		if m.Author.ID == u.ID || slices.Contains(p.committerEmails(ctx, m), u.email()) {
			return http.StatusUnauthorized
		}
	}
	return 0
}

// handleApprove: POST /projects/:id/merge_requests/:iid/approve [sha,
// check_items] → 201 approvals; 403 no approve permission; 409 sha not the
// head; 422 check items missing or stale (simulator extension, body carries
// the current list); 401 for every other refusal. The compatibility switch
// turns 403 and 409 into 401, as GitLab 13.x answered.
func (s *Server) handleApprove(w http.ResponseWriter, r *http.Request) {
	u := caller(r)
	in, err := readParams(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "400 Bad request - "+err.Error())
		return
	}
	p, m := s.lockMR(w, r)
	if m == nil {
		return
	}
	defer p.mu.Unlock()
	ctx := r.Context()
	set := s.settings()
	refuse := func(status int, msg string) {
		if set.CompatAll401Approvals && status != http.StatusUnprocessableEntity {
			status, msg = http.StatusUnauthorized, "401 Unauthorized"
		}
		writeError(w, status, msg)
	}
	if !u.hasApprovePermission() {
		refuse(http.StatusForbidden, "403 Forbidden")
		return
	}
	if sha, ok := in.str("sha"); ok && sha != "" && sha != m.SHA {
		refuse(http.StatusConflict, "SHA does not match HEAD of source branch: "+m.SHA)
		return
	}
	if len(p.checkItems) > 0 {
		raw, present := in.raw("check_items")
		if present || set.RequireCheckItems {
			if problem := checkItemsProblem(p.checkItems, raw); problem != "" {
				writeJSON(w, http.StatusUnprocessableEntity, map[string]any{
					"message": "Check items are missing or stale: " + problem, "check_items": p.checkItems,
				})
				return
			}
		}
	}
	if st := s.approveRefusal(ctx, p, m, u); st != 0 {
		refuse(http.StatusUnauthorized, "401 Unauthorized")
		return
	}
	m.Approvals = append(m.Approvals, approval{User: u, At: s.now()})
	m.UpdatedAt = s.now()
	action := "approval"
	if len(m.Approvals) == set.ApprovalsRequired {
		action = "approved"
	}
	s.mrHook(ctx, p, m, action, u, "")
	writeJSON(w, http.StatusCreated, s.approvalsJSON(ctx, p, m, u))
}

// checkItemsProblem compares the items an approve call acknowledged with
// the project's current list; "" means they match.
func checkItemsProblem(current []CheckItem, raw json.RawMessage) string {
	var got []CheckItem
	if len(raw) == 0 {
		return "check_items is missing"
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		return "check_items is not a list of {key, version}"
	}
	var problems []string
	for _, want := range current {
		i := slices.IndexFunc(got, func(c CheckItem) bool { return c.Key == want.Key })
		switch {
		case i < 0:
			problems = append(problems, want.Key+" missing")
		case got[i].Version != want.Version:
			problems = append(problems, fmt.Sprintf("%s stale (version %d, current %d)", want.Key, got[i].Version, want.Version))
		}
	}
	for _, g := range got {
		if !slices.ContainsFunc(current, func(c CheckItem) bool { return c.Key == g.Key }) {
			problems = append(problems, g.Key+" unknown")
		}
	}
	return strings.Join(problems, ", ")
}

// handleUnapprove: POST …/unapprove → 201 approvals; 404 when the caller
// has not approved (zaquestion/lab#673).
func (s *Server) handleUnapprove(w http.ResponseWriter, r *http.Request) {
	u := caller(r)
	p, m := s.lockMR(w, r)
	if m == nil {
		return
	}
	defer p.mu.Unlock()
	i := slices.IndexFunc(m.Approvals, func(a approval) bool { return a.User.ID == u.ID })
	if i < 0 {
		writeError(w, http.StatusNotFound, "404 Not found")
		return
	}
	wasApproved := len(m.Approvals) >= s.settings().ApprovalsRequired
	m.Approvals = slices.Delete(m.Approvals, i, i+1)
	m.UpdatedAt = s.now()
	action := "unapproval"
	if wasApproved {
		action = "unapproved"
	}
	s.mrHook(r.Context(), p, m, action, u, "")
	writeJSON(w, http.StatusCreated, s.approvalsJSON(r.Context(), p, m, u))
}

// handleGetApprovals: GET …/approvals, with user_has_approved and
// user_can_approve for the caller's token.
func (s *Server) handleGetApprovals(w http.ResponseWriter, r *http.Request) {
	p, m := s.lockMR(w, r)
	if m == nil {
		return
	}
	defer p.mu.Unlock()
	writeJSON(w, http.StatusOK, s.approvalsJSON(r.Context(), p, m, caller(r)))
}

// handleGetCheckItems: GET /projects/:id/approval_check_items — the
// simulator-only extension, docs/adapters.md (the company's upstream change).
func (s *Server) handleGetCheckItems(w http.ResponseWriter, r *http.Request) {
	p := s.lockProject(w, r)
	if p == nil {
		return
	}
	defer p.mu.Unlock()
	items := p.checkItems
	if items == nil {
		items = []CheckItem{}
	}
	writeJSON(w, http.StatusOK, items)
}
