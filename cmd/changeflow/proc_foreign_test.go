package main

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/workflow/flow"
)

// TestServeKill9BetweenHeadCheckAndApprove: the serve process verified
// the MR's head and sent the first bot's approval at that sha; GitLab
// holds the call before applying it. In that window a person with push
// rights (the simulator's developer) pushes a commit onto the MR's source
// branch, and the process is killed -9 — the held call goes with it.
// Through real serve processes on one MariaDB:
//
//   - the approval the dead process had in flight, sent again at the sha
//     it verified, is refused 409 by GitLab: nothing pushed after the
//     check can be approved under it;
//   - the next instance reads the MR again, checks its head again and
//     finds the person's commit: no bot approves, nothing merges at the
//     foreign head, the MR is closed, one security event foreign_head
//     names the pushed commit, and the request is rebuilt on a fresh
//     branch of changeflow's own and reaches VALIDATED;
//
// and the binding files on main equal the database, without the person's
// file.
func TestServeKill9BetweenHeadCheckAndApprove(t *testing.T) {
	t.Parallel()
	// The held approve must outlive the GitLab call deadline of the
	// process until it is killed.
	w := newCrashWorld(t, "http:\n  timeout:\n    gitlab: 3m\n")
	sim := w.sim
	const op, user = "op-push-window", "alice"
	first := flow.BranchName(op)

	// 1. The first bot's approve is held before GitLab applies it.
	sim.must(t, http.MethodPost, "/gitlab/_control/faults", map[string]any{
		"method": http.MethodPost, "path": "/projects/*/merge_requests/*/approve", "kind": "delay", "delay": "5m", "phase": "before"}, nil)
	a := w.next()
	a.submit(t, user, op, "solo")
	waitFor(t, 30*time.Second, "the approval form", func() bool { return len(sim.approvals(t, op)) == 1 })
	sim.approve(t, op)
	waitFor(t, 60*time.Second, "the first bot's approve held", func() bool { return sim.heldGitLabCalls(t) == 1 })
	w.inFlight(a, flow.ActionApprove)
	mrs := sim.mrs(t)
	if len(mrs) != 1 || mrs[0].SourceBranch != first || mrs[0].State != "opened" {
		t.Fatalf("want the request's one MR open on %s, got %+v", first, mrs)
	}
	iid := mrs[0].IID
	verified := sim.branchHead(t, first)

	// 2. The push in the window, as the developer, onto the branch's head.
	var pushed struct {
		ID string `json:"id"`
	}
	if code := sim.doAs(t, "local-developer-token", http.MethodPost, "/gitlab/api/v4/projects/1/repository/commits", map[string]any{
		"branch": first, "commit_message": "add a file nobody reviews",
		"actions": []map[string]any{{"action": "create", "file_path": "bindings/sneak.yaml",
			"content": "- subject: \"mallory\"\n  expiresAt: \"2099-01-01T00:00:00Z\"\n  operationId: \"forged\"\n"}},
	}, &pushed); code != http.StatusCreated || pushed.ID == "" {
		t.Fatalf("the developer's push onto %s = %d", first, code)
	}

	// 3. Killed with the approve in flight.
	w.kill9(a)
	sim.clearGitLabFaults(t)
	if got := sim.approvedBy(t, iid); len(got) != 0 {
		t.Fatalf("MR !%d approved by %v while the approve was held", iid, got)
	}
	// The call the dead process had in flight, at the sha it verified.
	if code := sim.doAs(t, procApprover1Token, http.MethodPost,
		fmt.Sprintf("/gitlab/api/v4/projects/1/merge_requests/%d/approve", iid), map[string]any{"sha": verified}, nil); code != http.StatusConflict {
		t.Fatalf("approve at the verified head %s after the push = %d, want 409", verified, code)
	}

	// 4. The next instance checks the head again and rebuilds.
	b := w.next()
	w.untilBinding(domain.BindingValidated, op)
	untilMetric(t, b, 1)

	fresh := flow.FreshBranchName(first, 2)
	if got := w.op(op).Branch; got != fresh {
		t.Fatalf("the request is on %s, want the fresh branch %s", got, fresh)
	}
	var old, built []simMR
	for _, mr := range sim.mrs(t) {
		switch mr.SourceBranch {
		case first:
			old = append(old, mr)
		case fresh:
			built = append(built, mr)
		default:
			t.Fatalf("an MR on %s: %+v", mr.SourceBranch, mr)
		}
	}
	if len(old) != 1 || old[0].State != "closed" {
		t.Fatalf("the MR at the foreign head: %+v, want one, closed", old)
	}
	if got := sim.approvedBy(t, iid); len(got) != 0 {
		t.Fatalf("the MR at the foreign head was approved by %v", got)
	}
	if sim.branchHead(t, first) != pushed.ID {
		t.Fatalf("the person's branch moved from their commit %s", pushed.ID)
	}
	if len(built) != 1 || built[0].State != "merged" {
		t.Fatalf("the rebuilt request's MR: %+v, want one, merged", built)
	}
	if got := sim.approvedBy(t, built[0].IID); !sameSet(got, []string{"approver-1", "approver-2"}) {
		t.Fatalf("the rebuilt MR approved by %v, want both bots", got)
	}
	if n := countSQL(t, w.st, "SELECT COUNT(*) FROM audit_log WHERE action = 'security.foreign_head' AND resource = ? AND params LIKE ?",
		op, "%"+pushed.ID+"%"); n != 1 {
		t.Fatalf("%d security events foreign_head naming the pushed commit %s, want 1", n, pushed.ID)
	}
	if n := countSQL(t, w.st, "SELECT COUNT(*) FROM audit_log WHERE action LIKE 'security.%'"); n != 1 {
		t.Fatalf("%d security events, want the one", n)
	}
	if n := w.flips(op); n != 1 {
		t.Fatalf("%d flips to VALIDATED, want 1", n)
	}
	if code := sim.do(t, http.MethodGet, "/gitlab/api/v4/projects/1/repository/files/"+url.PathEscape("bindings/sneak.yaml")+"?ref=main", nil, nil); code != http.StatusNotFound {
		t.Fatalf("bindings/sneak.yaml on main: %d, want 404", code)
	}
	if f := sim.fileOnMain(t, "solo"); strings.Contains(f, "mallory") {
		t.Fatalf("the person's entry reached main:\n%s", f)
	}
	sim.filesExact(t, w.st, []string{"solo", "grouped"}, []string{op})
}
