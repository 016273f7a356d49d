package main

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"changeflow/internal/domain"
)

// heldGitLabCalls is how many calls the GitLab simulator's delay faults
// hold right now.
func (s *simProc) heldGitLabCalls(t *testing.T) int {
	t.Helper()
	var out struct {
		Held int `json:"held"`
	}
	s.must(t, http.MethodGet, "/gitlab/_control/faults/held", nil, &out)
	return out.Held
}

// TestServeKill9InsideALateBatchMRCreation: a round's MR creation lands
// after its batch moved on, and the process is killed -9 before the round
// can close that MR. Through real serve processes on one MariaDB:
//
//  1. inst-2's round claims the batch and commits; its CreateMR is held
//     by GitLab before it applies (the round stalled on a loaded machine);
//  2. inst-3 resumes the batch once batch.resumeAfter passed, opens and
//     records MR !1, and the batch merges: every member VALIDATED;
//  3. the held creation goes through — a second MR on the merged batch's
//     branch, which GitLab allows beside a merged one — and inst-2, on its
//     way to close it (its read of the MR held), is killed -9;
//  4. nothing but the stray sweep looks at that branch again: inst-4,
//     started with no person involved, closes the late MR at its first
//     batch Tick.
//
// The late MR ends closed, the batch's own MR merged, each member flipped
// once in the one SUCCEEDED batch, and the files on main exact. Before the
// sweep the late MR stayed open until closed by hand.
func TestServeKill9InsideALateBatchMRCreation(t *testing.T) {
	t.Parallel()
	// The held creation must outlive the GitLab call deadline of the
	// stalled round (a client that gives up takes the held call with it).
	w := newCrashWorld(t, "batch:\n  interval: 200ms\n  maxRequests: 10\n  resumeAfter: 1s\nhttp:\n  timeout:\n    gitlab: 3m\n")
	sim := w.sim
	ops := []string{"op-late-1", "op-late-2"}
	users := []string{"alice", "bob"}
	w.gatherAdmitted("grouped", ops, users)

	// 1. The stalled round: its CreateMR held before GitLab applies it.
	// inst-2 and inst-3 ran their stray sweep at their first Tick, before
	// any late MR exists, and not again (an hour).
	sim.must(t, http.MethodPost, "/gitlab/_control/faults", map[string]any{
		"method": http.MethodPost, "path": "/projects/*/merge_requests", "kind": "delay", "delay": "5m", "phase": "before"}, nil)
	stalled := w.next("CHANGEFLOW_BATCH_STRAYINTERVAL=1h")
	waitFor(t, 60*time.Second, "the round's CreateMR held", func() bool { return sim.heldGitLabCalls(t) == 1 })
	if n := countSQL(t, w.st, "SELECT COUNT(*) FROM merge_batch WHERE status = 1 AND mr_iid IS NULL"); n != 1 {
		t.Fatalf("want the claimed batch without its MR recorded, found %d", n)
	}

	// 2. Another instance resumes the batch and merges it.
	w.n++
	resumer := startServeProc(t, w.dir, w.file, fmt.Sprintf("inst-%d", w.n), freePort(t), "CHANGEFLOW_BATCH_STRAYINTERVAL=1h")
	w.untilBinding(domain.BindingValidated, ops...)
	waitFor(t, 60*time.Second, "the batch SUCCEEDED with its MR", func() bool {
		return countSQL(t, w.st, "SELECT COUNT(*) FROM merge_batch WHERE status = 2 AND mr_iid IS NOT NULL") == 1
	})
	mrs := sim.mrs(t)
	if len(mrs) != 1 || mrs[0].State != "merged" {
		t.Fatalf("want the batch's one MR merged, got %+v", mrs)
	}
	batchMR := mrs[0].IID
	late := batchMR + 1

	// 3. The held creation lands; the stalled round's read of the late MR,
	// on its way to close it, is held; it is killed there.
	sim.holdGitLab(t, http.MethodGet, fmt.Sprintf("/projects/*/merge_requests/%d", late))
	sim.must(t, http.MethodPost, "/gitlab/_control/faults/release", nil, nil)
	waitFor(t, 60*time.Second, "the late MR opened and the round's read of it held", func() bool {
		if sim.gitLabFaultsArmed(t) != 0 {
			return false
		}
		for _, mr := range sim.mrs(t) {
			if mr.IID == late {
				return mr.State == "opened"
			}
		}
		return false
	})
	w.kill9(stalled)
	resumer.stop()
	sim.clearGitLabFaults(t)
	var lateMR simMR
	for _, mr := range sim.mrs(t) {
		if mr.IID == late {
			lateMR = mr
		}
	}
	if lateMR.State != "opened" || lateMR.SourceBranch != "changeflow/batch-1" {
		t.Fatalf("the late MR: %+v, want open on the merged batch's branch", lateMR)
	}

	// 4. The next instance's stray sweep closes it.
	w.next("CHANGEFLOW_BATCH_STRAYINTERVAL=1s")
	waitFor(t, 60*time.Second, "the late MR closed", func() bool {
		for _, mr := range sim.mrs(t) {
			if mr.IID == late {
				return mr.State == "closed"
			}
		}
		return false
	})
	for _, mr := range sim.mrs(t) {
		want := "merged"
		if mr.IID == late {
			want = "closed"
		}
		if mr.State != want {
			t.Fatalf("MR !%d is %s, want %s", mr.IID, mr.State, want)
		}
	}
	if n := countSQL(t, w.st, "SELECT COUNT(*) FROM merge_batch"); n != 1 {
		t.Fatalf("%d batches, want the one", n)
	}
	if n := countSQL(t, w.st, "SELECT COUNT(*) FROM merge_batch WHERE status = 2 AND mr_iid = ?", batchMR); n != 1 {
		t.Fatalf("the batch of MR !%d did not succeed", batchMR)
	}
	for _, op := range ops {
		if n := w.flips(op); n != 1 {
			t.Fatalf("%s: %d flips to VALIDATED, want 1", op, n)
		}
	}
	sim.filesExact(t, w.st, []string{"solo", "grouped"}, ops)
}
