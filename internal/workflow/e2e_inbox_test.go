package workflow_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow"
)

// TestRecordedDecisionIsNotLost: an approval decision recorded in the
// callback inbox but not acted on (the sink call failed) is applied —
// by the workflow itself when submit_approval writes APPROVAL_SENT after
// it, or by an operator's replay — exactly once.
func TestRecordedDecisionIsNotLost(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st)
		ctx := t.Context()

		// Recorded before the request waited for it: applied after SENT.
		_, err := st.ApprovalCallbackInsert(ctx, store.ApprovalCallbackParams{
			DeliveryKey: "inbox-1", OperationID: "op-inbox-1", ApprovalID: "APR-x", Result: "APPROVED"})
		require.NoError(t, err)
		w.submit("op-inbox-1", "val", tSingle, true)
		w.until("op-inbox-1", "validated", at(domain.StepCalledBack, domain.BindingValidated))

		// Recorded while waiting, sink failed: the operator replays it.
		w.submit("op-inbox-2", "wes", tOther, false)
		w.until("op-inbox-2", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		_, err = st.ApprovalCallbackInsert(ctx, store.ApprovalCallbackParams{
			DeliveryKey: "inbox-2", OperationID: "op-inbox-2", ApprovalID: "APR-y", Result: "REJECTED"})
		require.NoError(t, err)
		res, err := w.cbs.ReplayApproval(ctx, "op-inbox-2")
		require.NoError(t, err)
		require.Equal(t, workflow.CallbackApplied, res)
		res, err = w.cbs.ReplayApproval(ctx, "op-inbox-2")
		require.NoError(t, err)
		require.Equal(t, workflow.CallbackStale, res, "a replay of an applied decision changes nothing")
		w.until("op-inbox-2", "MR closed", at(domain.StepCloseMRClosed, domain.BindingRejected))
		require.Equal(t, "closed", w.mrsOf("op-inbox-2")[0]["state"], "legacy flow read from the database: the MR is closed")
	})
}
