package workflow_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/flow"
)

// approvalBody is an approval callback for opID.
func approvalBody(requestID, opID, result, mrID string) map[string]any {
	b := map[string]any{"requestId": requestID, "approvalId": "APR-x", "operationId": opID, "result": result, "ext": map[string]any{}}
	if mrID != "" {
		b["ext"] = map[string]any{"mrId": mrID}
	}
	return b
}

// TestApprovalCallbacksCannotCorruptState: duplicate, late, out-of-order
// and stale (old operationId after a re-apply) callbacks change nothing;
// the legacy rejection closes the MR. The decisions are posted by hand
// (no read-back: approval.verifyDecisions off), bound to the approval
// changeflow recorded.
func TestApprovalCallbacksCannotCorruptState(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st, withConfig(map[string]any{"approval.verifyDecisions": false}))

		// Legacy request, rejected: REJECTED and its MR closed.
		w.submit("op-old", "hank", tSingle, false)
		o, _ := w.until("op-old", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		mrID := "1"
		require.EqualValues(t, 1, o.MRIID)
		approvalBody := func(requestID, opID, result, mrID string) map[string]any {
			b := approvalBody(requestID, opID, result, mrID)
			b["approvalId"] = o.ApprovalID
			return b
		}
		require.Equal(t, "OK", w.postCallback("/callbacks/approval", approvalBody("d-1", "op-old", "REJECTED", mrID)))
		require.Equal(t, "DUPLICATE", w.postCallback("/callbacks/approval", approvalBody("d-1", "op-old", "REJECTED", mrID)))
		// Out of order: an APPROVED delivered after the rejection.
		require.Equal(t, "IGNORED_STALE", w.postCallback("/callbacks/approval", approvalBody("d-2", "op-old", "APPROVED", mrID)))
		w.until("op-old", "MR closed", at(domain.StepCloseMRClosed, domain.BindingRejected))
		require.Equal(t, "closed", w.mrsOf("op-old")[0]["state"])

		// Re-apply (REJECTED is re-appliable): a new operation owns the row.
		w.submit("op-new", "hank", tSingle, true)
		oNew, _ := w.until("op-new", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		// A late approval of the old request must not move the new one.
		require.Equal(t, "IGNORED_STALE", w.postCallback("/callbacks/approval", approvalBody("d-3", "op-old", "APPROVED", mrID)))
		require.Equal(t, "IGNORED_STALE", w.postCallback("/callbacks/approval", approvalBody("d-4", "op-unknown", "APPROVED", "")))
		o, b := w.until("op-new", "still waiting", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		require.Equal(t, "op-new", b.OperationID)
		require.Equal(t, flow.ActionPollApproval, o.NextAction, "only the fallback poll of its own approval, which is still pending")

		// The new request's own decision, twice through the approval
		// system (a redelivery carries the same requestId).
		w.decide("op-new", "approve")
		w.until("op-new", "validated", at(domain.StepCalledBack, domain.BindingValidated))
		as := w.approvalsOf("op-new")
		w.simJSON(http.MethodPost, "/approval/_control/approvals/"+as[0].ApprovalID+"/redeliver", map[string]any{}, nil)
		late := approvalBody("d-5", "op-new", "WITHDRAWN", "")
		late["approvalId"] = oNew.ApprovalID
		require.Equal(t, "IGNORED_STALE", w.postCallback("/callbacks/approval", late))
		w.until("op-new", "still validated", at(domain.StepCalledBack, domain.BindingValidated))
		require.Len(t, w.mrsOf("op-new"), 1)
		w.validatedOnce("op-new")

		// The inbox keeps what became of every delivery.
		old, nw := inboxOf(t, st, "op-old"), inboxOf(t, st, "op-new")
		require.Equal(t, store.InboxApplied, old["d-1"].Disposition)
		require.Equal(t, 1, old["d-1"].Duplicates, "its duplicate was counted, not recorded again")
		require.Equal(t, store.InboxStale, old["d-2"].Disposition)
		require.Contains(t, old["d-2"].Reason, "REJECTED")
		require.Equal(t, store.InboxStale, old["d-3"].Disposition)
		require.Contains(t, old["d-3"].Reason, "op-new", "re-applied for the newer request")
		require.Equal(t, store.InboxUnknownOperation, inboxOf(t, st, "op-unknown")["d-4"].Disposition)
		require.Equal(t, store.InboxStale, nw["d-5"].Disposition)
		decided := nw[as[0].CallbackRequestID]
		require.Equal(t, store.InboxApplied, decided.Disposition)
		require.Equal(t, store.InboxSourceCallback, decided.Source)
		require.Equal(t, 1, decided.Duplicates, "the redelivery")
	})
}

// inboxOf returns opID's recorded approval decisions by delivery key.
func inboxOf(t *testing.T, st *store.Store, opID string) map[string]store.ApprovalCallbackRecord {
	t.Helper()
	list, err := st.ApprovalCallbackList(t.Context(), opID, 100)
	require.NoError(t, err)
	out := map[string]store.ApprovalCallbackRecord{}
	for _, r := range list {
		out[r.DeliveryKey] = r
	}
	return out
}

// TestEarlyApprovalCallback: the approval system calls back before it
// answers the submit (approve-first): the binding is still
// APPROVAL_SENDING, which the guard accepts as waiting; the request goes
// on and the submit step's late SENT write is dropped, not applied.
func TestEarlyApprovalCallback(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st)
		w.simJSON(http.MethodPost, "/approval/_control/faults", map[string]any{"callbackBeforeResponse": 1, "earlyResult": "APPROVED"}, nil)
		w.submit("op-early", "ivy", tSingle, true)
		w.until("op-early", "validated", at(domain.StepCalledBack, domain.BindingValidated))
		require.Len(t, w.approvalsOf("op-early"), 1)
		require.Len(t, w.mrsOf("op-early"), 1)
		hist, err := st.OperationStepList(t.Context(), "op-early")
		require.NoError(t, err)
		early := false
		for _, h := range hist {
			require.NotEqual(t, domain.BindingApprovalSent, h.ToBinding, "SENT was never written after the decision")
			early = early || (h.FromBinding == domain.BindingApprovalSending && h.ToBinding == domain.BindingMRCreating && h.Actor == "approval-callback")
		}
		require.True(t, early, "the callback found APPROVAL_SENDING and applied")
	})
}

// TestApproveFirstWithdrawn: a withdrawn approve-first request ends
// REJECTED with no MR and no work left.
func TestApproveFirstWithdrawn(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st)
		w.submit("op-wd", "jack", tSingle, true)
		w.until("op-wd", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		w.decide("op-wd", "withdraw")
		o, b := w.until("op-wd", "rejected", at(domain.StepCloseWithdrawn, domain.BindingRejected))
		require.Empty(t, o.NextAction)
		require.Empty(t, w.mrsOf("op-wd"))
		require.Equal(t, domain.HintNone, hint(o, b))
	})
}

// TestApproveFirstBatchingTargetIsAdmitted: an approved request for a
// batching target is admitted to the batch waiting set (the batch round
// is the next issue) and creates no single-request MR.
func TestApproveFirstBatchingTargetIsAdmitted(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st)
		w.submit("op-batch", "kim", tBatched, true)
		w.until("op-batch", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		w.decide("op-batch", "approve")
		o, _ := w.until("op-batch", "admitted", at(domain.StepCreateAdmitted, domain.BindingMRCreating))
		require.Empty(t, o.NextAction)
		n, err := st.BatchWaitingCount(t.Context(), 1)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Empty(t, w.mrsOf("op-batch"))
	})
}
