package workflow_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/gitlab"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// askAgain submits a new approve-first request of subject for the
// batching target and approves it: it waits in the batch set, as a person
// asking again after a withdrawal would.
func (w *batchWorld) askAgain(id, subject string) {
	w.t.Helper()
	w.submit(id, subject, tBatched, true)
	w.until(id, "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
	w.decide(id, "approve")
	w.until(id, "admitted", at(domain.StepCreateAdmitted, domain.BindingMRCreating))
	storetest.UntilAdmittedBeforeNow(w.t, w.st, id)
}

// TestWithdrawTheCulpritOfAFailedBatchAndAskAgain: a request alone in its
// batch whose change breaks the check pipeline stops as the culprit
// (CREATE_PIPELINE_FAILED, its batch FAILED); its owner withdraws it —
// before, the batch id made that a refusal — and it ends CLOSED with the
// batch MR closed; the owner asks again at once and the new request takes
// effect; main matches the database.
func TestWithdrawTheCulpritOfAFailedBatchAndAskAgain(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBatchWorld(t, st, func(g gitlab.GitLab) gitlab.GitLab { return culpritGitLab{GitLab: g, culprit: "op-wc1"} })
		w.admitted("op-wc1")
		rounds := w.roundsUntilIdle()
		require.Len(t, rounds, 1)
		o, _ := w.until("op-wc1", "culprit failed", at(domain.StepCreatePipelineFailed, domain.BindingCreateFailed))
		require.Equal(t, rounds[0].BatchID, o.BatchID)
		b, err := st.BatchGet(t.Context(), rounds[0].BatchID)
		require.NoError(t, err)
		require.Equal(t, domain.BatchFailed, b.Status)

		ans := w.withdraw("op-wc1")
		require.Equal(t, store.WithdrawApplied, ans.Result.Outcome, "%+v", ans.Result)
		require.Equal(t, store.WithdrawFromMR, ans.Result.Place)
		require.False(t, ans.Merged)
		require.False(t, ans.Pending, "the batch MR is closed: nothing left to wait for")
		require.Equal(t, domain.BindingClosed, ans.Binding.Status)
		require.Equal(t, domain.StepCloseRequesterWithdrawn, domain.StepStatus(ans.Operation.Step))
		mrs := w.batchMRs(rounds[0].BatchID)
		require.Len(t, mrs, 1)
		require.Equal(t, "closed", mrs[0]["state"])
		w.until("op-wc1", "withdrawn", withdrawnDone)
		require.Equal(t, 1, w.withdrawnCount(store.WithdrawFromMR))

		w.askAgain("op-wc2", "user-op-wc1-0")
		w.roundsUntilIdle()
		w.until("op-wc2", "validated", at(domain.StepCalledBack, domain.BindingValidated))
		w.validatedOnce("op-wc2")
		file := w.fileOnMain(tBatched)
		require.Contains(t, file, `operationId: "op-wc2"`)
		require.NotContains(t, file, `operationId: "op-wc1"`)
		w.filesExact("op-wc1", "op-wc2")
	})
}

// TestWithdrawAMemberOfABlockedBatchAndAskAgain: a bot may not approve, so
// a batch of three is BLOCKED, holding the project's slot. Before, each
// member's withdrawal was refused until an operator settled the batch. Now
// one member's owner withdraws it: the batch is settled without it (its
// MR closed, FAILED BATCH_MEMBER_WITHDRAWN, the other two back in the
// waiting set and not moved twice), the member ends CLOSED, and its
// owner asks again at once. Once the bot is fixed, the next rounds
// build a new MR with the other two and the new request, and all three
// take effect; the withdrawn request is nowhere on main.
func TestWithdrawAMemberOfABlockedBatchAndAskAgain(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBatchWorld(t, st)
		ids := []string{"op-wb1", "op-wb2", "op-wb3"}
		w.admitted(ids...)
		w.reload(map[string]any{"gitlab.tokens.approver1": "local-observer-token"})
		r, err := w.rounds.RunRound(t.Context(), 1)
		require.NoError(t, err)
		require.Equal(t, "CLAIMED", r.Outcome)
		require.Equal(t, 3, r.Members)
		require.Eventually(t, func() bool {
			_, _ = w.eng.RunDue(t.Context())
			b, err := st.BatchGet(t.Context(), r.BatchID)
			return err == nil && b.Status == domain.BatchBlocked
		}, 20*time.Second, 5*time.Millisecond)

		// op-wb2 is a follower (op-wb1 drives the batch): it is not stopped
		// itself, only its batch is.
		ans := w.withdraw("op-wb2")
		require.Equal(t, store.WithdrawApplied, ans.Result.Outcome, "%+v", ans.Result)
		require.Equal(t, store.WithdrawFromMR, ans.Result.Place)
		require.Equal(t, r.BatchID, ans.Result.BatchID)
		require.False(t, ans.Merged)
		require.False(t, ans.Pending, "settled and closed before the answer")
		require.Equal(t, domain.BindingClosed, ans.Binding.Status)
		require.Equal(t, domain.StepCloseRequesterWithdrawn, domain.StepStatus(ans.Operation.Step))

		b, err := st.BatchGet(t.Context(), r.BatchID)
		require.NoError(t, err)
		require.Equal(t, domain.BatchFailed, b.Status)
		require.Equal(t, "BATCH_MEMBER_WITHDRAWN", b.FailureCode)
		mrs := w.batchMRs(r.BatchID)
		require.Len(t, mrs, 1)
		require.Equal(t, "closed", mrs[0]["state"])
		for _, id := range []string{"op-wb1", "op-wb3"} {
			w.until(id, "back in the waiting set", at(domain.StepCreateAdmitted, domain.BindingMRCreating))
		}
		n, err := st.BatchWaitingCount(t.Context(), 1)
		require.NoError(t, err)
		require.Equal(t, 2, n, "the other two wait again, the withdrawn one does not")
		w.until("op-wb2", "withdrawn", withdrawnDone)
		require.Equal(t, 1, w.withdrawnCount(store.WithdrawFromMR))
		again := w.withdraw("op-wb2")
		require.Equal(t, store.WithdrawAlready, again.Result.Outcome)

		w.askAgain("op-wb4", fmt.Sprintf("user-%s-%d", "op-wb2", 1))
		w.reload(nil)
		w.roundsUntilIdle()
		for _, id := range []string{"op-wb1", "op-wb3", "op-wb4"} {
			w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
			w.validatedOnce(id)
		}
		file := w.fileOnMain(tBatched)
		require.Contains(t, file, `operationId: "op-wb4"`)
		require.NotContains(t, file, `operationId: "op-wb2"`)
		w.filesExact("op-wb1", "op-wb2", "op-wb3", "op-wb4")
	})
}

// TestWithdrawAMergingMemberOfABlockedBatchAndAskAgain: the batch's head,
// rebased onto main, fails its pipeline, so the batch is BLOCKED with its
// follower already in handling (HANDLE_STARTED, MERGING). Before, no
// move led from there to a withdrawal. Its owner withdraws it: the batch
// is settled without it (MR closed, FAILED BATCH_MEMBER_WITHDRAWN, the
// driver back in the waiting set), the member ends CLOSED; once main is
// fixed the driver and the owner's new request take effect; main matches
// the database.
func TestWithdrawAMergingMemberOfABlockedBatchAndAskAgain(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		ids := []string{"op-wm1", "op-wm2"}
		w, broken, r := blockedByRebasedPipeline(t, st, ids)
		o, b := w.state("op-wm2")
		require.Equal(t, domain.StepHandleStarted, domain.StepStatus(o.Step), "the follower is in handling")
		require.Equal(t, domain.BindingMerging, b.Status)

		ans := w.withdraw("op-wm2")
		require.Equal(t, store.WithdrawApplied, ans.Result.Outcome, "%+v", ans.Result)
		require.Equal(t, store.WithdrawFromMR, ans.Result.Place)
		require.False(t, ans.Merged)
		require.False(t, ans.Pending)
		require.Equal(t, domain.BindingClosed, ans.Binding.Status)
		require.Equal(t, domain.StepCloseRequesterWithdrawn, domain.StepStatus(ans.Operation.Step))
		bt, err := st.BatchGet(t.Context(), r.BatchID)
		require.NoError(t, err)
		require.Equal(t, domain.BatchFailed, bt.Status)
		require.Equal(t, "BATCH_MEMBER_WITHDRAWN", bt.FailureCode)
		mrs := w.batchMRs(r.BatchID)
		require.Len(t, mrs, 1)
		require.Equal(t, "closed", mrs[0]["state"])
		w.until("op-wm1", "back in the waiting set", at(domain.StepCreateAdmitted, domain.BindingMRCreating))
		w.until("op-wm2", "withdrawn", withdrawnDone)

		broken.Store(false)
		w.askAgain("op-wm3", fmt.Sprintf("user-%s-%d", "op-wm2", 1))
		w.roundsUntilIdle()
		for _, id := range []string{"op-wm1", "op-wm3"} {
			w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
			w.validatedOnce(id)
		}
		file := w.fileOnMain(tBatched)
		require.Contains(t, file, `operationId: "op-wm3"`)
		require.NotContains(t, file, `operationId: "op-wm2"`)
		w.filesExact("op-wm1", "op-wm2", "op-wm3")
	})
}

// TestOperatorClosesTheStoppedDriverOfABlockedBatch: a bot may not
// approve, so a batch of two is BLOCKED with its driver stopped at
// HANDLE_APPROVE_FORBIDDEN. An operator closes the driver with a reason:
// the batch is settled without it (MR closed, FAILED
// BATCH_MEMBER_WITHDRAWN, the other member waiting again), the driver
// ends CLOSED with CLOSE_CANCELLED and the reason in its history, not
// counted as a withdrawal; once the bot is fixed the other member takes
// effect; main matches the database.
func TestOperatorClosesTheStoppedDriverOfABlockedBatch(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBatchWorld(t, st)
		ids := []string{"op-cd1", "op-cd2"}
		r := w.blockedOnAForbiddenBot(ids...)
		o, _ := w.state("op-cd1")
		require.Equal(t, domain.StepHandleApproveForbidden, domain.StepStatus(o.Step), "the driver shows the failure")

		ans, err := w.withdrawer().Close(t.Context(), "op-cd1", "olivia", "the bot's rights are being reviewed")
		require.NoError(t, err)
		require.Equal(t, store.WithdrawApplied, ans.Result.Outcome, "%+v", ans.Result)
		require.False(t, ans.Merged)
		require.Equal(t, domain.BindingClosed, ans.Binding.Status)
		require.Equal(t, domain.StepCloseCancelled, domain.StepStatus(ans.Operation.Step))
		b, err := st.BatchGet(t.Context(), r.BatchID)
		require.NoError(t, err)
		require.Equal(t, domain.BatchFailed, b.Status)
		require.Equal(t, "BATCH_MEMBER_WITHDRAWN", b.FailureCode)
		require.Contains(t, b.FailureMessage, "closed by an operator")
		require.Equal(t, "closed", w.batchMRs(r.BatchID)[0]["state"])
		w.until("op-cd2", "back in the waiting set", at(domain.StepCreateAdmitted, domain.BindingMRCreating))
		require.Zero(t, w.withdrawnCount(store.WithdrawFromMR), "an operator's close is no withdrawal")
		hist, err := st.OperationStepList(t.Context(), "op-cd1")
		require.NoError(t, err)
		found := false
		for _, h := range hist {
			found = found || domain.StepStatus(h.ToStep) == domain.StepCloseCancelled && h.Actor == "olivia" &&
				strings.Contains(h.Note, "the bot's rights are being reviewed")
		}
		require.True(t, found, "history: %+v", hist)

		w.reload(nil)
		w.roundsUntilIdle()
		w.until("op-cd2", "validated", at(domain.StepCalledBack, domain.BindingValidated))
		w.validatedOnce("op-cd2")
		require.NotContains(t, w.fileOnMain(tBatched), `operationId: "op-cd1"`)
		w.filesExact("op-cd1", "op-cd2")
	})
}
