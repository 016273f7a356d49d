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
	"changeflow/internal/workflow/batch"
	"changeflow/internal/workflow/flow"
	"changeflow/internal/workflow/single"
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
			w.validatedOnce(id)
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
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
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

		_, err = single.Retrigger(t.Context(), st, ids[1], "olivia")
		require.ErrorIs(t, err, domain.ErrIllegalTransition, "no MR to drive: settle it")
		require.Contains(t, err.Error(), "settle")

		w.writeOnMain(path, "", gitlab.FileAction{Action: gitlab.ActionUpdate})
		res, err := batchFlow(w.deps).SettleBatch(t.Context(), r.BatchID, "SETTLED_BY_OPERATOR", "file fixed", "olivia")
		require.NoError(t, err)
		require.Equal(t, "FAILED", res.Status)
		require.Equal(t, 2, res.Readmitted)
		w.rounds.ResumeAfter = time.Minute
		w.reload(nil)
		w.roundsUntilIdle()
		for _, id := range append(ids, "op-pf3") {
			w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
			w.validatedOnce(id)
		}
		file := w.fileOnMain(tBatched)
		for _, id := range append(ids, "op-pf3") {
			require.Contains(t, file, id)
		}
	})
}

// untilBatch drives the engine until the batch is in status.
func (w *batchWorld) untilBatch(id int64, status domain.BatchStatus) store.Batch {
	w.t.Helper()
	var b store.Batch
	require.Eventually(w.t, func() bool {
		_, _ = w.eng.RunDue(w.t.Context())
		var err error
		b, err = w.st.BatchGet(w.t.Context(), id)
		return err == nil && b.Status == status
	}, 20*time.Second, 5*time.Millisecond, "batch %d never became %s", id, status)
	return b
}

// blockedThenSettled checks what every blocked batch shows — BLOCKED with
// BATCH_NEEDS_A_PERSON and the reason, its slot held against a new
// request — then lets fix repair the cause, settles it as an operator and
// checks that every request, the new one too, is validated once.
func (w *batchWorld) blockedThenSettled(batchID int64, reason string, ids []string, fix func()) {
	w.t.Helper()
	b := w.untilBatch(batchID, domain.BatchBlocked)
	require.Equal(w.t, "BATCH_NEEDS_A_PERSON", b.FailureCode)
	require.Contains(w.t, b.FailureMessage, reason)
	w.admitted("op-late")
	again, err := w.rounds.RunRound(w.t.Context(), 1)
	require.NoError(w.t, err)
	require.Equal(w.t, "SLOT_OCCUPIED", again.Outcome, "a blocked batch keeps the slot")

	fix()
	res, err := batchFlow(w.deps).SettleBatch(w.t.Context(), batchID, "SETTLED_BY_OPERATOR", "cause fixed", "olivia")
	require.NoError(w.t, err)
	require.Equal(w.t, "FAILED", res.Status)
	require.Equal(w.t, len(ids), res.Readmitted)
	require.Equal(w.t, "closed", w.batchMRs(batchID)[0]["state"])
	w.roundsUntilIdle()
	for _, id := range append(ids, "op-late") {
		w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
		w.validatedOnce(id)
	}
}

// rebasedPipelineFails reports the pipeline of every MR that was rebased
// as failed while broken is set: the batch's change passed its checks, and
// fails once rebased onto what landed on main meanwhile.
type rebasedPipelineFails struct {
	gitlab.GitLab
	rebased, broken *atomic.Bool
}

func (r rebasedPipelineFails) Rebase(ctx context.Context, project string, iid int64) error {
	r.rebased.Store(true)
	return r.GitLab.Rebase(ctx, project, iid)
}

func (r rebasedPipelineFails) GetMR(ctx context.Context, project string, iid int64) (gitlab.MR, error) {
	mr, err := r.GitLab.GetMR(ctx, project, iid)
	if err == nil && r.broken.Load() && r.rebased.Load() && !mr.RebaseInProgress && mr.HeadPipeline != nil {
		p := *mr.HeadPipeline
		p.Status = "failed"
		mr.HeadPipeline = &p
	}
	return mr, err
}

// TestBatchRebasedPipelineFailureBlocks: the batch's pipeline of its
// rebased head fails (HANDLE_PIPELINE_FAILED) — main, or how the batch
// meets it, needs a person; re-admitting would walk every member into the
// same failure. The batch is BLOCKED; after the fix an operator's
// settlement re-admits the members and they are validated.
func TestBatchRebasedPipelineFailureBlocks(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		ids := []string{"op-rp1", "op-rp2"}
		w, broken, r := blockedByRebasedPipeline(t, st, ids)
		o, bd := w.state(ids[0])
		require.Equal(t, domain.StepHandlePipelineFailed.String(), domain.StepStatus(o.Step).String(), "the driver shows the failure")
		require.Equal(t, domain.HintContactMaintainers, hint(o, bd))
		w.blockedThenSettled(r.BatchID, "rebased onto the target branch failed", ids, func() { broken.Store(false) })
	})
}

// blockedByRebasedPipeline admits ids, makes the batch's first merge need
// a rebase whose head's pipeline fails while broken is set, runs the
// round and waits until the batch is BLOCKED. It returns the world, the
// switch (clear it to fix main) and the round.
func blockedByRebasedPipeline(t *testing.T, st *store.Store, ids []string) (*batchWorld, *atomic.Bool, batch.RoundResult) {
	t.Helper()
	rebased, broken := &atomic.Bool{}, &atomic.Bool{}
	broken.Store(true)
	w := newBatchWorld(t, st, func(g gitlab.GitLab) gitlab.GitLab {
		return rebasedPipelineFails{GitLab: g, rebased: rebased, broken: broken}
	})
	w.admitted(ids...)
	w.simJSON(http.MethodPost, "/gitlab/_control/merge_failures", map[string]any{"count": 1, "message": "needs a rebase"}, nil)
	r, err := w.rounds.RunRound(t.Context(), 1)
	require.NoError(t, err)
	require.Equal(t, "CLAIMED", r.Outcome)
	w.untilBatch(r.BatchID, domain.BatchBlocked)
	return w, broken, r
}

// switchableCulprit is culpritGitLab that can be switched off (the
// breaking change fixed).
type switchableCulprit struct {
	culpritGitLab
	on *atomic.Bool
}

func (c switchableCulprit) GetMR(ctx context.Context, project string, iid int64) (gitlab.MR, error) {
	if !c.on.Load() {
		return c.GitLab.GetMR(ctx, project, iid)
	}
	return c.culpritGitLab.GetMR(ctx, project, iid)
}

// TestBatchSplitDepthExhaustedBlocks: with batch.maxSplitDepth 1, a batch
// of 4 whose checks fail is halved once; the half of 2 still fails at the
// bound, so the failure is not narrowed to one change — the batch is
// BLOCKED instead of going on one request at a time.
func TestBatchSplitDepthExhaustedBlocks(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		on := &atomic.Bool{}
		on.Store(true)
		w := newBatchWorld(t, st, func(g gitlab.GitLab) gitlab.GitLab {
			return switchableCulprit{culpritGitLab: culpritGitLab{GitLab: g, culprit: "op-sd0"}, on: on}
		})
		w.reload(map[string]any{"batch.maxSplitDepth": 1})
		ids := []string{"op-sd0", "op-sd1", "op-sd2", "op-sd3"}
		w.admitted(ids...)
		first, err := w.rounds.RunRound(t.Context(), 1)
		require.NoError(t, err)
		require.Equal(t, 4, first.Members)
		b := w.untilBatch(first.BatchID, domain.BatchFailed)
		require.Equal(t, "BATCH_PIPELINE_FAILED", b.FailureCode, "within the bound: halve")
		var half batch.RoundResult
		require.Eventually(t, func() bool { // re-admitted rows are claimable once the DB clock passed them
			half, err = w.rounds.RunRound(t.Context(), 1)
			require.NoError(t, err)
			return half.Outcome == "CLAIMED"
		}, 10*time.Second, 2*time.Millisecond)
		require.Equal(t, 2, half.Members)
		require.Equal(t, 1, half.SplitDepth)
		w.blockedThenSettled(half.BatchID, "still fails after 1 halving(s)", ids[:2], func() {
			w.reload(nil)
			on.Store(false)
		})
	})
}

// refusingClose refuses to close any MR (403) while refuse is set: the
// bot lost its rights on the config repo.
type refusingClose struct {
	gitlab.GitLab
	refuse *atomic.Bool
}

func (r refusingClose) CloseMR(ctx context.Context, project string, iid int64) (gitlab.MR, error) {
	if r.refuse.Load() {
		return gitlab.MR{}, &gitlab.Error{Op: "CloseMR", Status: http.StatusForbidden, Message: "403 Forbidden"}
	}
	return r.GitLab.CloseMR(ctx, project, iid)
}

// TestBatchCloseThatKeepsFailingBlocks: the batch's checks fail, and
// settling it cannot close its MR (403): it must not be settled while the
// MR could still merge, and no retry fixes the rights — the batch is
// BLOCKED. The sweep does the same for a timed-out batch.
func TestBatchCloseThatKeepsFailingBlocks(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		refuse := &atomic.Bool{}
		refuse.Store(true)
		w := newBatchWorld(t, st, func(g gitlab.GitLab) gitlab.GitLab { return refusingClose{GitLab: g, refuse: refuse} })
		ids := []string{"op-cf1", "op-cf2"}
		w.admitted(ids...)
		w.simJSON(http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"outcome": "fail", "count": 1}, nil)
		r, err := w.rounds.RunRound(t.Context(), 1)
		require.NoError(t, err)
		w.untilBatch(r.BatchID, domain.BatchBlocked)
		require.Equal(t, "opened", w.batchMRs(r.BatchID)[0]["state"])
		w.blockedThenSettled(r.BatchID, "does not close", ids, func() { refuse.Store(false) })
	})
}

// TestBatchSweepBlocksABatchWhoseMRWillNotClose: a timed-out batch whose
// MR refuses to close is blocked by the sweep, not swept every tick.
func TestBatchSweepBlocksABatchWhoseMRWillNotClose(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		refuse := &atomic.Bool{}
		refuse.Store(true)
		w := newBatchWorld(t, st, func(g gitlab.GitLab) gitlab.GitLab { return refusingClose{GitLab: g, refuse: refuse} })
		w.reload(map[string]any{"batch.timeout": "1s"})
		ids := []string{"op-sb1", "op-sb2"}
		w.admitted(ids...)
		w.simJSON(http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"outcome": "never", "count": 1}, nil)
		r, err := w.rounds.RunRound(t.Context(), 1)
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			n, err := w.rounds.Sweep(t.Context())
			require.NoError(t, err)
			return n == 1
		}, 10*time.Second, 50*time.Millisecond)
		b, err := st.BatchGet(t.Context(), r.BatchID)
		require.NoError(t, err)
		require.Equal(t, domain.BatchBlocked, b.Status)
		require.Contains(t, b.FailureMessage, "timed out")
		n, err := w.rounds.Sweep(t.Context())
		require.NoError(t, err)
		require.Zero(t, n, "a blocked batch is left to a person")
		w.blockedThenSettled(r.BatchID, "does not close", ids, func() { refuse.Store(false) })
	})
}

// TestBatchRetriggerResumesABlockedBatch: a forbidden bot blocks the batch
// (its driver stopped at HANDLE_APPROVE_FORBIDDEN). Once the bot is fixed,
// the operator retriggers a member that is not the driver: the batch runs
// again (RUNNING, block reason cleared) from the driver's approval, with
// the same MR — no settlement, no second MR — and every member is
// validated once. A retrigger while it runs is refused (not stopped).
func TestBatchRetriggerResumesABlockedBatch(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBatchWorld(t, st)
		ids := []string{"op-rt1", "op-rt2", "op-rt3"}
		w.admitted(ids...)
		w.reload(map[string]any{"gitlab.tokens.approver1": "local-observer-token"})
		r, err := w.rounds.RunRound(t.Context(), 1)
		require.NoError(t, err)
		w.untilBatch(r.BatchID, domain.BatchBlocked)
		// The driver's batch_settle blocked the batch; its run ends right after.
		w.until(ids[0], "driver stopped", at(domain.StepHandleApproveForbidden, domain.BindingHandleFailed))

		w.reload(nil)
		action, err := single.Retrigger(t.Context(), st, ids[2], "olivia")
		require.NoError(t, err)
		require.Equal(t, flow.ActionBatchApprove, action)
		b, err := st.BatchGet(t.Context(), r.BatchID)
		require.NoError(t, err)
		require.Equal(t, domain.BatchRunning, b.Status)
		require.Empty(t, b.FailureCode)
		_, err = single.Retrigger(t.Context(), st, ids[1], "olivia")
		require.ErrorIs(t, err, single.ErrNotStopped, "the driver's approval is due")

		for _, id := range ids {
			w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
			w.validatedOnce(id)
		}
		b = w.untilBatch(r.BatchID, domain.BatchSucceeded)
		mrs := w.batchMRs(r.BatchID)
		require.Len(t, mrs, 1)
		require.Equal(t, "merged", mrs[0]["state"])
		n, err := st.BatchWaitingCount(t.Context(), 1)
		require.NoError(t, err)
		require.Zero(t, n, "nobody was re-admitted")
	})
}

// TestBatchRetriggerRebasedPipelineFailure: the rebased head's pipeline
// failed and blocked the batch; after main is fixed, a retrigger of the
// driver merges again (a fresh rebase, a green pipeline) with the same MR.
func TestBatchRetriggerRebasedPipelineFailure(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		ids := []string{"op-rr1", "op-rr2"}
		w, broken, r := blockedByRebasedPipeline(t, st, ids)
		w.until(ids[0], "driver stopped", at(domain.StepHandlePipelineFailed, domain.BindingHandleFailed))

		broken.Store(false)
		action, err := single.Retrigger(t.Context(), st, ids[0], "olivia")
		require.NoError(t, err)
		require.Equal(t, flow.ActionBatchMerge, action)
		for _, id := range ids {
			w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
		}
		w.untilBatch(r.BatchID, domain.BatchSucceeded)
		require.Len(t, w.batchMRs(r.BatchID), 1)
	})
}

// TestBatchSweepRecoversMembersStrandedByASplitSettlement: a settlement
// split in two — the batch FAILED and its waiting rows released (a
// BatchApply with no member moves, the storage half alone), then nothing, as when the
// process died before moving the members — leaves members at their last
// milestone with no waiting row and no action, and the MR open. The next
// sweep finds them (store.BatchStranded), closes the MR and re-admits them
// in one transaction; a second sweep finds nothing; the next round
// validates them.
func TestBatchSweepRecoversMembersStrandedByASplitSettlement(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBatchWorld(t, st)
		ids := []string{"op-st1", "op-st2", "op-st3"}
		w.admitted(ids...)
		w.simJSON(http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"outcome": "never", "count": 1}, nil)
		r, err := w.rounds.RunRound(t.Context(), 1)
		require.NoError(t, err)
		require.Equal(t, 3, r.Members)

		// The first half only: FAILED, waiting rows released; the members
		// are not moved and the MR is not closed.
		b, err := st.BatchGet(t.Context(), r.BatchID)
		require.NoError(t, err)
		_, err = st.BatchApply(t.Context(), store.BatchApplyParams{BatchID: b.ID, SettleTo: domain.BatchFailed,
			From: b.Status, Version: b.Version, FailureCode: store.BatchFailureTimeout, ProjectID: b.ProjectID})
		require.NoError(t, err)
		// The driver's pending poll finds the batch settled and stops.
		w.until(ids[0], "driver stopped", func(o store.Operation, _ store.Binding) bool {
			return o.NextAction == "" && o.LeaseOwner == ""
		})
		stranded, err := st.BatchStranded(t.Context(), time.Hour, 0)
		require.NoError(t, err)
		require.Len(t, stranded, 3, "%+v", stranded)
		require.Equal(t, "opened", w.batchMRs(r.BatchID)[0]["state"])

		_, err = w.rounds.Sweep(t.Context())
		require.NoError(t, err)
		for _, id := range ids {
			o, bd := w.state(id)
			require.Equal(t, domain.StepCreateAdmitted.String(), domain.StepStatus(o.Step).String(), id)
			require.Equal(t, domain.BindingMRCreating, bd.Status, id)
		}
		require.Equal(t, "closed", w.batchMRs(r.BatchID)[0]["state"])
		n, err := st.BatchWaitingCount(t.Context(), 1)
		require.NoError(t, err)
		require.Equal(t, 3, n)
		stranded, err = st.BatchStranded(t.Context(), time.Hour, 0)
		require.NoError(t, err)
		require.Empty(t, stranded, "recovered members are not found again")
		_, err = w.rounds.Sweep(t.Context())
		require.NoError(t, err)

		w.roundsUntilIdle()
		for _, id := range ids {
			w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
			w.validatedOnce(id)
		}
	})
}
