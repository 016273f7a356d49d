package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/workflow/flow"
)

// TestServeKill9InsideRegenerateOfARemoval: the removal MR of an expired
// grant (a target without batching) waits on its check pipeline while
// main moves under it — another grant's entry is committed right next to
// the one it removes, so its rebase conflicts in Git. At the merge the
// removal is regenerated on main's head as a removal, and the serve
// process is killed -9 right after GitLab applied the forced commit (its
// answer held): the commit exists, the step never recorded it. The next
// instance, once the lease expired, reads the branch first, finds its head
// already is this removal on main's head and commits nothing: the MR
// merges at exactly the dead instance's commit, with one regeneration in
// the history, one MR, one removal commit on main; the revocation ends
// REVOKED, created, flipped and counted once; the other grant's entry
// stays and the files are exact.
func TestServeKill9InsideRegenerateOfARemoval(t *testing.T) {
	t.Parallel()
	w := newCrashWorld(t, "expiry:\n  interval: 1h\n")
	sim := w.sim
	const grant = "g-regen"
	rev := domain.RevocationID(grant)
	seedGrants(t, w.st, sim, []seededGrant{{op: grant, user: "alice", target: "solo"}})
	expireGrants(t, w.st, []seededGrant{{op: grant, user: "alice", target: "solo"}})
	w.holdPipelines()

	branch := flow.BranchName(rev)
	var mainHead, regenerated string
	w.killInside(killPoint{
		start: func(a *serveProc) {
			if n, err := a.expiryScan(); err != nil || n != 1 {
				t.Fatalf("the scan created %d revocations (%v), want 1", n, err)
			}
			w.untilStep(rev, domain.StepCreatePipelineRunning)
			// bob's entry lands right after alice's (the file is sorted):
			// Git cannot merge the removal of the one with the addition
			// of the other.
			seedGrants(t, w.st, sim, []seededGrant{{op: "g-other", user: "bob", target: "solo"}})
			mainHead = sim.branchHead(t, "main")
			sim.holdGitLab(t, http.MethodPost, "/projects/*/repository/commits")
			w.passPipeline(w.op(rev).MRIID)
		},
		what: "the forced commit of the removal on main's head",
		applied: func() bool {
			head := sim.branchHead(t, branch)
			if head == "" {
				return false
			}
			if p := sim.parents(t, head); len(p) == 1 && p[0] == mainHead {
				regenerated = head
				return true
			}
			return false
		},
		action: flow.ActionRegenerate,
	})

	b := w.next()
	untilRevoked(t, w.st, 60*time.Second, []string{grant})
	untilLag(t, b, 1)
	if n := b.metricSum(t, "changeflow_revocations_total"); n != 0 {
		t.Fatalf("%s counts %d revocations; the dead instance created the only one", b.id, n)
	}
	w.removalOnce(grant)
	mrs := sim.mrs(t)
	if len(mrs) != 1 || mrs[0].State != "merged" {
		t.Fatalf("MRs %+v, want one, merged", mrs)
	}
	var mr struct {
		SHA string `json:"sha"`
	}
	sim.must(t, http.MethodGet, fmt.Sprintf("/gitlab/api/v4/projects/1/merge_requests/%d", mrs[0].IID), nil, &mr)
	if mr.SHA != regenerated {
		t.Fatalf("merged at %s, want the dead instance's regenerated commit %s", mr.SHA, regenerated)
	}
	steps, err := w.st.OperationStepList(t.Context(), rev)
	if err != nil {
		t.Fatal(err)
	}
	regenerations := 0
	for _, s := range steps {
		if strings.HasPrefix(s.Note, "regenerated ") {
			regenerations++
		}
	}
	if regenerations != 1 {
		t.Fatalf("%d regenerations in the history, want 1", regenerations)
	}
	file := sim.fileOnMain(t, "solo")
	if strings.Contains(file, grant) || !strings.Contains(file, "g-other") {
		t.Fatalf("the file on main:\n%s", file)
	}
	sim.filesExact(t, w.st, []string{"solo", "grouped"}, []string{grant, "g-other"})
}
