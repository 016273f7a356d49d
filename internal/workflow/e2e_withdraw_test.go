package workflow_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/approval"
	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/flow"
	"changeflow/internal/workflow/withdraw"
)

// withdrawer is the world's withdrawal entry, as the HTTP layer calls it.
func (w *world) withdrawer() withdraw.Withdrawer {
	return withdraw.Withdrawer{Flow: withdrawFlow(w.deps), Engine: w.eng}
}

func (w *world) withdraw(opID string) withdraw.Answer {
	w.t.Helper()
	ans, err := w.withdrawer().Withdraw(w.t.Context(), opID, "owner")
	require.NoError(w.t, err)
	return ans
}

// withdrawnCount is how often the withdrawal side effect ran for place.
func (w *world) withdrawnCount(place store.WithdrawPlace) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.withdrawn[place]
}

// approvalStatus is the approval system's status of opID's one approval.
func (w *world) approvalStatus(opID string) approval.Status {
	w.t.Helper()
	as := w.approvalsOf(opID)
	require.Len(w.t, as, 1, "one approval for %s", opID)
	return as[0].Status
}

// withdrawnDone: the withdrawal finished — CLOSED, the requester's step,
// nothing left to do.
var withdrawnDone = func(o store.Operation, b store.Binding) bool {
	return domain.StepStatus(o.Step) == domain.StepCloseRequesterWithdrawn && b.Status == domain.BindingClosed &&
		o.NextAction == "" && o.LeaseOwner == ""
}

// TestWithdrawWhileWaitingForApproval: on both flows, a request waiting
// for its approval is withdrawn — CLOSED at once, the approval withdrawn
// in the approval system (which then refuses to decide it), on the legacy
// flow the MR closed too; a late APPROVED callback is recorded as stale
// and reopens nothing; nothing reaches main.
func TestWithdrawWhileWaitingForApproval(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st)
		for _, approveFirst := range []bool{true, false} {
			id := fmt.Sprintf("op-wa-%v", approveFirst)
			w.submit(id, "wa-"+id, tSingle, approveFirst)
			o, _ := w.until(id, "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))

			ans := w.withdraw(id)
			require.Equal(t, store.WithdrawApplied, ans.Result.Outcome)
			require.Equal(t, store.WithdrawFromApproval, ans.Result.Place)
			require.Equal(t, domain.BindingClosed, ans.Binding.Status, "the local state moves first")
			require.False(t, ans.Merged)

			w.until(id, "withdrawn", withdrawnDone)
			require.Equal(t, approval.Withdrawn, w.approvalStatus(id))
			as := w.approvalsOf(id)
			code := w.simJSON(http.MethodPost, "/approval/_control/approvals/"+as[0].ApprovalID+"/approve", map[string]any{}, nil)
			require.Equal(t, http.StatusConflict, code, "a withdrawn approval can no longer be decided")
			if !approveFirst {
				require.NotZero(t, o.MRIID)
				mrs := w.mrsOf(id)
				require.Len(t, mrs, 1)
				require.Equal(t, "closed", mrs[0]["state"], "the legacy flow's MR is closed")
			}

			// A late approval (sent before the withdrawal reached the
			// system, say) is stale: the binding left the waiting set.
			body := map[string]any{"requestId": "late-" + id, "approvalId": as[0].ApprovalID, "operationId": id, "result": "APPROVED", "ext": map[string]any{}}
			if !approveFirst {
				body["ext"] = map[string]any{"mrId": fmt.Sprint(o.MRIID)}
			}
			w.postCallback("/callbacks/approval", body)
			rec, ok, err := st.ApprovalCallbackLatest(t.Context(), id)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, store.InboxStale, rec.Disposition, "the late callback is recorded as stale")
			o, b := w.until(id, "still withdrawn", withdrawnDone)
			require.Equal(t, domain.BindingClosed, b.Status)
			require.Equal(t, domain.HintNone, hint(o, b))

			again := w.withdraw(id)
			require.Equal(t, store.WithdrawAlready, again.Result.Outcome, "idempotent: the second call answers the state")
		}
		require.Equal(t, 2, w.withdrawnCount(store.WithdrawFromApproval), "counted once per withdrawal")
		require.NotContains(t, w.fileOnMain(tSingle), "op-wa-")
		w.filesExact("op-wa-true", "op-wa-false")
	})
}

// TestWithdrawWhileTheApprovalSystemFails: the approval system fails the
// withdraw call (503) several times, and then the engine crashes between
// the local write and the upstream call (the write is made, the action
// never run here): the withdrawal is retried and converges — the approval
// ends WITHDRAWN upstream, the request CLOSED — and is never lost.
func TestWithdrawWhileTheApprovalSystemFails(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st)
		w.submit("op-wf", "wf", tSingle, true)
		w.until("op-wf", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		code := w.simJSON(http.MethodPost, "/approval/_control/faults", map[string]any{"failWithdrawsNext": map[string]any{"status": 503, "count": 3}}, nil)
		require.Equal(t, http.StatusOK, code)

		ans := w.withdraw("op-wf")
		require.Equal(t, domain.BindingClosed, ans.Binding.Status)
		w.until("op-wf", "withdrawn despite the failures", withdrawnDone)
		require.Equal(t, approval.Withdrawn, w.approvalStatus("op-wf"))
		var faults struct {
			FailWithdrawsNext struct{ Count int } `json:"failWithdrawsNext"`
		}
		w.simJSON(http.MethodGet, "/approval/_control/faults", nil, &faults)
		require.Zero(t, faults.FailWithdrawsNext.Count, "every injected failure was met and retried")
		hist, err := st.OperationStepList(t.Context(), "op-wf")
		require.NoError(t, err)
		require.Equal(t, domain.StepCloseRequesterWithdrawn, domain.StepStatus(hist[len(hist)-1].ToStep))

		// The crash: only the guarded write happened (no engine ran the
		// action); the action is due in the row, and the next engine run
		// finishes it. The crashed instance's engine is stopped first —
		// left running, it could take the due action before the check
		// below (seen under load) — and a new one takes over.
		w.submit("op-wc", "wc", tSingle, true)
		w.until("op-wc", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		w.eng.Stop()
		res, err := st.OperationWithdraw(t.Context(), store.WithdrawParams{OperationID: "op-wc", Action: flow.ActionWithdraw, Actor: "owner"})
		require.NoError(t, err)
		require.Equal(t, store.WithdrawApplied, res.Outcome)
		require.Equal(t, approval.Pending, w.approvalStatus("op-wc"), "not withdrawn upstream yet")
		o, err := st.OperationGet(t.Context(), "op-wc")
		require.NoError(t, err)
		require.Equal(t, flow.ActionWithdraw, o.NextAction, "the action is due in the row")
		w.startEngine(w.deps)
		w.until("op-wc", "withdrawn after the crash", withdrawnDone)
		require.Equal(t, approval.Withdrawn, w.approvalStatus("op-wc"))
		w.filesExact("op-wf", "op-wc")
	})
}

// TestWithdrawWhileTheSingleRequestMRIsOpen: a non-batching target's MR
// is open (its check pipeline never finishes): the withdrawal closes the
// MR and the request ends CLOSED; nothing reaches main.
func TestWithdrawWhileTheSingleRequestMRIsOpen(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st)
		code := w.simJSON(http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"outcome": "never", "count": 1}, nil)
		require.Equal(t, http.StatusOK, code)
		w.submit("op-wm", "wm", tSingle, false)
		o, _ := w.until("op-wm", "pipeline running", at(domain.StepCreatePipelineRunning, domain.BindingMRCreating))
		require.NotZero(t, o.MRIID)

		ans := w.withdraw("op-wm")
		require.Equal(t, store.WithdrawApplied, ans.Result.Outcome)
		require.Equal(t, store.WithdrawFromMR, ans.Result.Place)
		require.False(t, ans.Merged)
		require.False(t, ans.Pending, "the MR was closed before the answer")
		require.Equal(t, domain.BindingClosed, ans.Binding.Status)
		require.Equal(t, domain.StepCloseRequesterWithdrawn, domain.StepStatus(ans.Operation.Step))
		mrs := w.mrsOf("op-wm")
		require.Len(t, mrs, 1)
		require.Equal(t, "closed", mrs[0]["state"])
		require.Equal(t, 1, w.withdrawnCount(store.WithdrawFromMR))
		w.until("op-wm", "withdrawn", withdrawnDone)
		w.filesExact("op-wm")
	})
}

// TestWithdrawAfterTheMRWasMergedByHand: merged wins — someone merged the
// single-request MR in GitLab before the withdrawal reached it: the close
// finds it merged, the request follows its merge to MERGED and then
// VALIDATED (deploy callback), the answer says it already took effect, a
// second withdrawal is refused, and the entry on main matches the database.
func TestWithdrawAfterTheMRWasMergedByHand(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st)
		code := w.simJSON(http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"outcome": "never", "count": 1}, nil)
		require.Equal(t, http.StatusOK, code)
		w.submit("op-wmg", "wmg", tSingle, false)
		o, _ := w.until("op-wmg", "pipeline running", at(domain.StepCreatePipelineRunning, domain.BindingMRCreating))
		code = w.simJSON(http.MethodPost, fmt.Sprintf("/gitlab/_control/projects/1/merge_requests/%d/merge", o.MRIID), map[string]any{}, nil)
		require.Equal(t, http.StatusOK, code, "merged by hand")

		ans := w.withdraw("op-wmg")
		require.Equal(t, store.WithdrawApplied, ans.Result.Outcome)
		require.True(t, ans.Merged, "merged wins: %+v", ans)
		require.Contains(t, []domain.BindingStatus{domain.BindingMerged, domain.BindingValidated}, ans.Binding.Status)
		require.Zero(t, w.withdrawnCount(store.WithdrawFromMR), "not withdrawn")

		w.until("op-wmg", "validated", at(domain.StepCalledBack, domain.BindingValidated))
		w.validatedOnce("op-wmg")
		again := w.withdraw("op-wmg")
		require.Equal(t, store.WithdrawRefused, again.Result.Outcome)
		require.Contains(t, w.fileOnMain(tSingle), `operationId: "op-wmg"`)
		w.filesExact("op-wmg")
	})
}

// TestWithdrawFromTheBatchSet: of two approved requests waiting in the
// batch set, one is withdrawn (out of the set, CLOSED); the next round's
// batch has only the other, which takes effect; withdrawing a member of
// the claimed batch is refused and changes nothing; main holds exactly
// the member's entry.
func TestWithdrawFromTheBatchSet(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newBatchWorld(t, st)
		w.admitted("op-ws1", "op-ws2")

		ans := w.withdraw("op-ws1")
		require.Equal(t, store.WithdrawApplied, ans.Result.Outcome)
		require.Equal(t, store.WithdrawFromBatchSet, ans.Result.Place)
		require.Equal(t, domain.BindingClosed, ans.Binding.Status)
		require.Equal(t, domain.StepCloseRequesterWithdrawn, domain.StepStatus(ans.Operation.Step))
		require.Equal(t, 1, w.withdrawnCount(store.WithdrawFromBatchSet))

		r, err := w.rounds.RunRound(t.Context(), 1)
		require.NoError(t, err)
		require.Equal(t, "CLAIMED", r.Outcome)
		require.Equal(t, 1, r.Members, "only the request still waiting")

		late := w.withdraw("op-ws2")
		require.Equal(t, store.WithdrawClaimed, late.Result.Outcome, "claimed by the round: refused")
		require.Equal(t, r.BatchID, late.Result.BatchID)

		w.until("op-ws2", "validated", at(domain.StepCalledBack, domain.BindingValidated))
		w.validatedOnce("op-ws2")
		_, b := w.until("op-ws1", "withdrawn", withdrawnDone)
		require.Equal(t, domain.BindingClosed, b.Status)
		file := w.fileOnMain(tBatched)
		require.Contains(t, file, `operationId: "op-ws2"`)
		require.NotContains(t, file, "op-ws1")
		w.filesExact("op-ws1", "op-ws2")
	})
}
