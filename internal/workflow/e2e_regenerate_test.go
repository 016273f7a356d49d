package workflow_test

import (
	"context"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/bindingfile"
	"changeflow/internal/domain"
	"changeflow/internal/engine/enginetest"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/flow"
	"changeflow/internal/workflow/single"
)

// TestOverlappingRequestsRegenerate: two legacy requests for one
// non-batching target, both MRs open while their approvals are pending;
// each adds its entry to the same (new) binding file, so once the first is
// merged the second conflicts textually. The second's rebase fails, and
// instead of HANDLE_REBASE_CONFLICT its MR is regenerated on main's head
// (one forced commit, same MR), its pipeline polled, the bots approve
// again and it merges: both VALIDATED, one MR each, main's file holds both
// entries, and each merged head carries its operationId trailer.
func TestOverlappingRequestsRegenerate(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st)
		w.submit("op-ov-a", "amy", tSingle, false)
		w.submit("op-ov-b", "ben", tSingle, false)
		w.until("op-ov-a", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		ob, _ := w.until("op-ov-b", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		headBefore := w.mrsOf("op-ov-b")[0]["sha"]

		w.decide("op-ov-a", "approve")
		w.until("op-ov-a", "validated", at(domain.StepCalledBack, domain.BindingValidated))
		w.decide("op-ov-b", "approve")
		w.until("op-ov-b", "validated", at(domain.StepCalledBack, domain.BindingValidated))

		for _, id := range []string{"op-ov-a", "op-ov-b"} {
			mrs := w.mrsOf(id)
			require.Len(t, mrs, 1, "exactly one MR for %s", id)
			require.Equal(t, "merged", mrs[0]["state"])
			w.validatedOnce(id)
			require.Contains(t, w.commitMessage(mrs[0]["sha"].(string)), flow.Trailer(id), "the merged head carries the trailer")
		}
		mrB := w.mrsOf("op-ov-b")[0]
		require.EqualValues(t, ob.MRIID, mrB["iid"], "the same MR, regenerated")
		require.NotEqual(t, headBefore, mrB["sha"], "the MR's head was rewritten")

		f, err := bindingfile.Parse([]byte(w.fileOnMain(tSingle)))
		require.NoError(t, err)
		for subject, id := range map[string]string{"amy": "op-ov-a", "ben": "op-ov-b"} {
			e, ok := f.Entry(subject)
			require.True(t, ok, "%s on main", subject)
			require.Equal(t, id, e.OperationID)
		}

		hist, err := st.OperationStepList(t.Context(), "op-ov-b")
		require.NoError(t, err)
		var regenerated, reapproved int
		var conflict bool
		for _, h := range hist {
			if strings.HasPrefix(h.Note, "regenerated ") {
				regenerated++
			}
			if domain.StepStatus(h.FromStep) == domain.StepHandlePipelineRunning && domain.StepStatus(h.ToStep) == domain.StepHandleStarted {
				reapproved++
			}
			conflict = conflict || domain.StepStatus(h.ToStep) == domain.StepHandleRebaseConflict
		}
		require.Equal(t, 1, regenerated, "one regeneration")
		require.Equal(t, 1, reapproved, "approve ran again after the regenerated pipeline")
		require.False(t, conflict, "never HANDLE_REBASE_CONFLICT")
	})
}

// TestRegenerateUnparsableTargetFile: the target's binding file was broken
// by hand (a subject twice) in a way that conflicts with the MR;
// regeneration cannot help (it would rewrite a file a person broke), so
// the request stops in HANDLE_REBASE_CONFLICT with CONTACT_MAINTAINERS,
// its one MR still open. Once the file is repaired, a retrigger re-runs
// regenerate, which reads the target again and finishes the request.
func TestRegenerateUnparsableTargetFile(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st)
		w.submit("op-bad", "cleo", tSingle, false)
		w.until("op-bad", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		w.commitOnMain("create", tSingle, "- subject: a\n  expiresAt: \"2030-01-01T00:00:00Z\"\n- subject: a\n  expiresAt: \"2030-01-01T00:00:00Z\"\n")
		w.decide("op-bad", "approve")
		o, b := w.until("op-bad", "rebase conflict", at(domain.StepHandleRebaseConflict, domain.BindingHandleFailed))
		require.Equal(t, domain.HintContactMaintainers, hint(o, b))
		require.Equal(t, flow.ActionRegenerate, o.NextAction, "stopped in regenerate")
		require.Contains(t, o.LastError, "appears twice")
		mrs := w.mrsOf("op-bad")
		require.Len(t, mrs, 1)
		require.Equal(t, "opened", mrs[0]["state"])

		w.commitOnMain("update", tSingle, "[]\n")
		action, err := single.Retrigger(t.Context(), st, "op-bad", "ops")
		require.NoError(t, err)
		require.Equal(t, flow.ActionRegenerate, action)
		w.until("op-bad", "validated", at(domain.StepCalledBack, domain.BindingValidated))
		require.Len(t, w.mrsOf("op-bad"), 1)
		require.Contains(t, w.fileOnMain(tSingle), `subject: "cleo"`)
	})
}

// TestRegenerationBoundExhausted: with workflow.maxRegenerations 1, a
// request whose regenerated MR conflicts again (main rewritten once more
// under it) stops in HANDLE_REBASE_CONFLICT after one regeneration.
func TestRegenerationBoundExhausted(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st, withConfig(map[string]any{"workflow.maxRegenerations": 1}))
		w.submit("op-bound", "dora", tSingle, false)
		o, _ := w.until("op-bound", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		iid := mrPath(o.MRIID)
		conflict := func() {
			require.Equal(t, http.StatusOK, w.simJSON(http.MethodPost, "/gitlab/_control/projects/1/merge_requests/"+iid+"/conflict", map[string]any{}, nil))
		}
		// The next pipeline (the regenerated head's) holds until released,
		// so main can be rewritten under the regenerated MR first.
		require.Equal(t, http.StatusOK, w.simJSON(http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"outcome": "never", "count": 1}, nil))
		conflict()
		w.decide("op-bound", "approve")
		w.until("op-bound", "regenerated, polling its pipeline", at(domain.StepHandlePipelineRunning, domain.BindingMerging))
		conflict()
		require.Equal(t, http.StatusOK, w.simJSON(http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"mr_iid": o.MRIID, "outcome": "pass"}, nil))
		o, b := w.until("op-bound", "rebase conflict", at(domain.StepHandleRebaseConflict, domain.BindingHandleFailed))
		require.Equal(t, domain.HintContactMaintainers, hint(o, b))
		require.Contains(t, o.LastError, "regenerated 1 times already")
		require.Equal(t, flow.ActionPollRebase, o.NextAction)
	})
}

func mrPath(iid int64) string { return strconv.FormatInt(iid, 10) }

// commitOnMain writes target's binding file on main as the maintainer.
func (w *world) commitOnMain(action, target, content string) {
	w.t.Helper()
	code := w.simJSON(http.MethodPost, "/gitlab/api/v4/projects/1/repository/commits", map[string]any{
		"branch": "main", "commit_message": "hand edit",
		"actions": []map[string]any{{"action": action, "file_path": "bindings/" + target + ".yaml", "content": content}},
	}, nil)
	require.Equal(w.t, http.StatusCreated, code)
}

// commitMessage reads a commit's message from GitLab.
func (w *world) commitMessage(sha string) string {
	w.t.Helper()
	var c struct {
		Message string `json:"message"`
	}
	require.Equal(w.t, http.StatusOK, w.simJSON(http.MethodGet, "/gitlab/api/v4/projects/1/repository/commits/"+sha, nil, &c))
	return c.Message
}

// TestKill9InsideRegenerate: a worker process is kill -9ed inside
// regenerate right after GitLab applied the forced commit (the answer is
// held by a "delay after" fault), so the commit exists but the step never
// recorded it. The next worker, once the lease expired, reads the branch
// first, finds its head is already this request's edit on main's head and
// commits nothing: the MR merges at exactly the commit the dead worker
// made, with one regeneration in the history and one success side effect.
// MariaDB, worker processes as TestKill9AtEachBusinessStep.
func TestKill9InsideRegenerate(t *testing.T) {
	t.Parallel()
	dsn := storetest.NewMigratedDatabase(t, store.DriverMySQL)
	st := storetest.OpenDSN(t, store.DriverMySQL, dsn)
	_, err := st.Migrate(t.Context())
	require.NoError(t, err)
	dir := t.TempDir()
	tally := filepath.Join(dir, "validated")
	w := newWorld(t, st, func(s *worldSetup) {
		s.noEngine = true
		s.onValidated = func(_ context.Context, f store.Flip) { enginetest.AppendLine(tally, f.OperationID) }
	})
	const op = "op-crash-regen"
	worker := startStepWorker(t, dsn, w.simTS.URL, dir)
	w.submit(op, "uma", tSingle, false)
	o, _ := w.until(op, "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
	iid := mrPath(o.MRIID)
	require.Equal(t, http.StatusOK, w.simJSON(http.MethodPost, "/gitlab/_control/projects/1/merge_requests/"+iid+"/conflict", map[string]any{}, nil))
	mainHead := w.branchHead("main")
	require.Less(t, w.simJSON(http.MethodPost, "/gitlab/_control/faults",
		map[string]any{"method": "POST", "path": "/projects/*/repository/commits", "kind": "delay", "delay": "60s", "phase": "after"}, nil), 300)
	w.decide(op, "approve")
	branch := flow.BranchName(op)
	var regenerated string
	require.Eventually(t, func() bool {
		head := w.branchHead(branch)
		if head == "" {
			return false
		}
		var c struct {
			ParentIDs []string `json:"parent_ids"`
		}
		w.simJSON(http.MethodGet, "/gitlab/api/v4/projects/1/repository/commits/"+head, nil, &c)
		if len(c.ParentIDs) == 1 && c.ParentIDs[0] == mainHead {
			regenerated = head
			return true
		}
		return false
	}, 20*time.Second, 10*time.Millisecond, "the forced commit lands")
	killWorker(t, worker)

	w.simJSON(http.MethodDelete, "/gitlab/_control/faults", nil, nil)
	worker = startStepWorker(t, dsn, w.simTS.URL, dir)
	w.until(op, "validated", at(domain.StepCalledBack, domain.BindingValidated))
	// The success side effect runs after the flip's commit (I9): await it
	// before killing the worker that may be the one running it.
	enginetest.UntilLines(t, tally, 1, "the success side effect ran")
	killWorker(t, worker)

	mrs := w.mrsOf(op)
	require.Len(t, mrs, 1, "one MR")
	require.Equal(t, "merged", mrs[0]["state"])
	require.Equal(t, regenerated, mrs[0]["sha"], "merged at the dead worker's commit: no second commit")
	hist, err := st.OperationStepList(t.Context(), op)
	require.NoError(t, err)
	n := 0
	for _, h := range hist {
		if strings.HasPrefix(h.Note, "regenerated ") {
			n++
		}
	}
	require.Equal(t, 1, n, "one regeneration recorded")
	require.Equal(t, 1, enginetest.CountLines(t, tally), "one success side effect")
}

// branchHead is a branch's head sha in GitLab ("" when missing).
func (w *world) branchHead(branch string) string {
	w.t.Helper()
	var b struct {
		Commit struct {
			ID string `json:"id"`
		} `json:"commit"`
	}
	if w.simJSON(http.MethodGet, "/gitlab/api/v4/projects/1/repository/branches/"+urlQuery(branch), nil, &b) != http.StatusOK {
		return ""
	}
	return b.Commit.ID
}
