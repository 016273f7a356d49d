package workflow_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/gitlab"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// crashAfterClose closes the MR in GitLab and then fails like a process
// that died right after the remote close: the settlement's transaction
// never runs. Armed by arm; once.
type crashAfterClose struct {
	gitlab.GitLab
	armed, fired *atomic.Bool
}

func (c crashAfterClose) CloseMR(ctx context.Context, project string, iid int64) (gitlab.MR, error) {
	mr, err := c.GitLab.CloseMR(ctx, project, iid)
	if err == nil && c.armed.Load() && c.fired.CompareAndSwap(false, true) {
		return gitlab.MR{}, &gitlab.Error{Op: "CloseMR", Message: "the process died after the close", Unknown: true}
	}
	return mr, err
}

// TestBatchSweepCrashAfterTheCloseLeavesMembersReadmittable: the sweep of a
// timed-out batch closes its MR and then "crashes" before its transaction.
// Nothing is stranded: the batch is still RUNNING (its slot visibly held,
// its members where they were), so the next sweep finds it again, reads
// the MR closed and settles it — batch FAILED and every member back in the
// waiting set in one transaction — and the next round validates them.
func TestBatchSweepCrashAfterTheCloseLeavesMembersReadmittable(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		armed, fired := &atomic.Bool{}, &atomic.Bool{}
		w := newBatchWorld(t, st, func(g gitlab.GitLab) gitlab.GitLab {
			return crashAfterClose{GitLab: g, armed: armed, fired: fired}
		})
		w.reload(map[string]any{"batch.timeout": "1s"})
		ids := []string{"op-cs1", "op-cs2"}
		w.admitted(ids...)
		w.simJSON(http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"outcome": "never", "count": 1}, nil)
		r, err := w.rounds.RunRound(t.Context(), 1)
		require.NoError(t, err)
		require.Equal(t, "CLAIMED", r.Outcome)
		require.Equal(t, 2, r.Members)

		armed.Store(true)
		require.Eventually(t, func() bool {
			_, err := w.rounds.Sweep(t.Context())
			return err != nil && fired.Load()
		}, 10*time.Second, 50*time.Millisecond, "the sweep reaches the close and dies after it")
		require.Equal(t, "closed", w.batchMRs(r.BatchID)[0]["state"])
		b, err := st.BatchGet(t.Context(), r.BatchID)
		require.NoError(t, err)
		require.Equal(t, domain.BatchRunning, b.Status, "nothing committed: the batch is found again")
		for _, id := range ids {
			o, bd := w.state(id)
			require.Equal(t, domain.BindingMRCreating, bd.Status, "%s", id)
			require.NotEqual(t, domain.StepCreateAdmitted.String(), domain.StepStatus(o.Step).String())
		}

		n, err := w.rounds.Sweep(t.Context())
		require.NoError(t, err)
		require.Equal(t, 1, n)
		b, err = st.BatchGet(t.Context(), r.BatchID)
		require.NoError(t, err)
		require.Equal(t, domain.BatchFailed, b.Status)
		require.Equal(t, store.BatchFailureTimeout, b.FailureCode)
		for _, id := range ids {
			w.until(id, "re-admitted", at(domain.StepCreateAdmitted, domain.BindingMRCreating))
		}
		waiting, err := st.BatchWaitingCount(t.Context(), 1)
		require.NoError(t, err)
		require.Equal(t, 2, waiting)
		n, err = w.rounds.Sweep(t.Context())
		require.NoError(t, err)
		require.Zero(t, n, "a settled batch is not swept again")

		w.roundsUntilIdle()
		for _, id := range ids {
			w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
			require.Equal(t, 1, w.validations(id))
		}
	})
}

// state reads a request's operation row and its binding.
func (w *batchWorld) state(id string) (store.Operation, store.Binding) {
	w.t.Helper()
	o, err := w.st.OperationGet(w.t.Context(), id)
	require.NoError(w.t, err)
	b, err := w.st.BindingGet(w.t.Context(), o.Subject, o.TargetKey)
	require.NoError(w.t, err)
	return o, b
}

// writeOnMain commits content as path on main, as a person editing the
// config repo would.
func (w *batchWorld) writeOnMain(path, content string, action gitlab.FileAction) {
	w.t.Helper()
	action.Path, action.Content = path, content
	_, err := w.deps.GitLab.CreateCommit(w.t.Context(), "1", gitlab.CommitRequest{
		Branch: "main", Message: "edit " + path + " by hand", Actions: []gitlab.FileAction{action},
	})
	require.NoError(w.t, err)
}

// TestBatchBrokenBindingFileOnMainBlocksUntilFixed: the batching target's
// binding file on main does not parse. The round does not fail every tick
// (and the sweep does not re-admit the members forever): the batch becomes
// BLOCKED with the reason, keeps the slot, and later rounds neither resume
// nor re-build it. Once the file is fixed, an operator's settlement
// re-admits the members and the next rounds validate them.
func TestBatchBrokenBindingFileOnMainBlocksUntilFixed(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBatchWorld(t, st)
		const path = "bindings/" + tBatched + ".yaml"
		w.writeOnMain(path, "- subject: [this is not\n", gitlab.FileAction{Action: gitlab.ActionCreate})
		ids := []string{"op-pf1", "op-pf2"}
		w.admitted(ids...)

		r, err := w.rounds.RunRound(t.Context(), 1)
		require.NoError(t, err, "a blocked batch is an answer, not a failing round")
		require.Equal(t, "CLAIMED", r.Outcome)
		require.True(t, r.Blocked)
		b, err := st.BatchGet(t.Context(), r.BatchID)
		require.NoError(t, err)
		require.Equal(t, domain.BatchBlocked, b.Status)
		require.Equal(t, "BATCH_NEEDS_A_PERSON", b.FailureCode)
		require.Contains(t, b.FailureMessage, "invalid binding file")
		require.Zero(t, b.MRIID)
		require.Empty(t, w.batchMRs(r.BatchID), "no MR was opened")

		// No loop: the slot stays held, nobody resumes or re-builds the
		// batch, and the sweep leaves a blocked batch alone.
		w.rounds.ResumeAfter = time.Nanosecond
		w.reload(map[string]any{"batch.timeout": "1s"})
		again, err := w.rounds.RunRound(t.Context(), 1)
		require.NoError(t, err)
		require.Equal(t, "NOTHING_WAITING", again.Outcome)
		require.False(t, again.Resumed)
		w.admitted("op-pf3")
		again, err = w.rounds.RunRound(t.Context(), 1)
		require.NoError(t, err)
		require.Equal(t, "SLOT_OCCUPIED", again.Outcome)
		require.False(t, again.Resumed)
		active, err := st.BatchTimedOut(t.Context(), time.Nanosecond, 0)
		require.NoError(t, err)
		require.Empty(t, active, "a blocked batch is not the sweep's")
		for _, id := range ids {
			o, bd := w.state(id)
			require.Equal(t, domain.StepCreateAdmitted.String(), domain.StepStatus(o.Step).String())
			require.Equal(t, domain.BindingMRCreating, bd.Status)
		}

		w.writeOnMain(path, "", gitlab.FileAction{Action: gitlab.ActionUpdate})
		res, err := w.deps.SettleBatch(t.Context(), r.BatchID, "SETTLED_BY_OPERATOR", "file fixed", "olivia")
		require.NoError(t, err)
		require.Equal(t, "FAILED", res.Status)
		require.Equal(t, 2, res.Readmitted)
		w.rounds.ResumeAfter = time.Minute
		w.reload(nil)
		w.roundsUntilIdle()
		for _, id := range append(ids, "op-pf3") {
			w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
			require.Equal(t, 1, w.validations(id))
		}
		file := w.fileOnMain(tBatched)
		for _, id := range append(ids, "op-pf3") {
			require.Contains(t, file, id)
		}
	})
}
