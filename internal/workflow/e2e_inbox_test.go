package workflow_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/approval"
	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/callbacks"
	"changeflow/internal/workflow/flow"
	"changeflow/internal/workflow/reconcile"
)

// TestRecordedDecisionIsNotLost: an approval decision recorded in the
// callback inbox but not acted on (the sink call failed) is applied —
// by the workflow itself when submit_approval writes APPROVAL_SENT after
// it, or by an operator's replay — exactly once. The decisions are
// written straight into the inbox, not made in the approval system, so
// the read-back is off (approval.verifyDecisions false: the callback's
// claim, bound to the recorded approval, is applied); the approval ids
// are the ones the approval system gives (it numbers them from 1).
func TestRecordedDecisionIsNotLost(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st, withConfig(map[string]any{"approval.verifyDecisions": false}))
		ctx := t.Context()

		// Recorded before the request waited for it: applied after SENT.
		_, err := st.ApprovalCallbackInsert(ctx, store.ApprovalCallbackParams{
			DeliveryKey: "inbox-1", OperationID: "op-inbox-1", ApprovalID: "APR-000001", Result: "APPROVED"})
		require.NoError(t, err)
		w.submit("op-inbox-1", "val", tSingle, true)
		w.until("op-inbox-1", "validated", at(domain.StepCalledBack, domain.BindingValidated))

		// Recorded while waiting, sink failed: the operator replays it.
		w.submit("op-inbox-2", "wes", tOther, false)
		o, _ := w.until("op-inbox-2", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		// A legacy request's callback names its MR (ext.mrId), as the
		// HTTP layer records it; one without is refused (the attacks test).
		_, err = st.ApprovalCallbackInsert(ctx, store.ApprovalCallbackParams{
			DeliveryKey: "inbox-2", OperationID: "op-inbox-2", ApprovalID: o.ApprovalID, Result: "REJECTED",
			MRID: strconv.FormatInt(o.MRIID, 10)})
		require.NoError(t, err)
		res, err := w.cbs.ReplayApproval(ctx, "op-inbox-2")
		require.NoError(t, err)
		require.Equal(t, callbacks.Applied, res)
		res, err = w.cbs.ReplayApproval(ctx, "op-inbox-2")
		require.NoError(t, err)
		require.Equal(t, callbacks.Stale, res, "a replay of an applied decision changes nothing")
		w.until("op-inbox-2", "MR closed", at(domain.StepCloseMRClosed, domain.BindingRejected))
		require.Equal(t, "closed", w.mrsOf("op-inbox-2")[0]["state"], "legacy flow read from the database: the MR is closed")
	})
}

// TestReconcilerAppliesADecisionRecordedButNeverApplied: the process that
// recorded an approval decision died before applying it, and the sender's
// redelivery was answered DUPLICATE. The reconciler's inbox replay applies
// it once it is older than reconcile.minAge — once: a second run finds the
// request no longer waiting. No engine runs here, so nothing else (such
// as submit_approval's after-commit look at the inbox) can apply it first;
// the process-level TestServeKill9AtEachStepOfASingleRequest shows the
// request going on to VALIDATED.
func TestReconcilerAppliesADecisionRecordedButNeverApplied(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st, func(s *worldSetup) { s.noEngine = true })
		ctx := t.Context()
		ov := e2eOverlay(w.simTS.URL)
		ov["reconcile.minAge"] = "1h"
		w.load(ov)
		d := e2eDeps(st, w.cfg.Load, http.DefaultTransport, nil)
		r := reconcile.New(d.Env, d.Store)
		woken := 0
		r.Wake = func() { woken++ }

		const op = "op-lost-apply"
		w.submit(op, "lia", tSingle, true) // waits for its approval: APPROVAL_SENDING
		// Its approval was submitted (the answer never recorded) and
		// approved; the callback was recorded, then the process died.
		var a approval.Approval
		w.simJSON(http.MethodPost, "/approval/v1/approvals", map[string]any{"operationId": op, "requester": "lia", "title": "t"}, &a)
		require.NotEmpty(t, a.ApprovalID)
		w.dropNextApprovalCallback()
		require.Equal(t, http.StatusOK, w.simJSON(http.MethodPost, "/approval/_control/approvals/"+a.ApprovalID+"/approve", map[string]any{}, nil))
		_, err := st.ApprovalCallbackInsert(ctx, store.ApprovalCallbackParams{
			DeliveryKey: "lost-apply", OperationID: op, ApprovalID: a.ApprovalID, Result: "APPROVED"})
		require.NoError(t, err)

		n, err := r.ReplayApprovalInbox(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "a decision younger than reconcile.minAge may still be being applied")

		ov["reconcile.minAge"] = "0s"
		w.load(ov)
		// The DB clock passes the decision's received_at. The condition
		// runs on Eventually's goroutine, where require may not stop the
		// test: an error is kept and reported here.
		var replayErr error
		require.Eventually(t, func() bool {
			n, err := r.ReplayApprovalInbox(ctx)
			if err != nil {
				replayErr = err
				return true
			}
			return n == 1
		}, 10*time.Second, 5*time.Millisecond)
		require.NoError(t, replayErr)
		require.Equal(t, 1, woken)
		o, err := st.OperationGet(ctx, op)
		require.NoError(t, err)
		require.Equal(t, domain.StepCreateStarted, domain.StepStatus(o.Step))
		require.Equal(t, flow.ActionCreateMR, o.NextAction, "approve-first, no batching: the MR is created next")
		require.Equal(t, a.ApprovalID, o.ApprovalID, "the approval the approval system holds for the operation was read back and recorded")
		n, err = r.ReplayApprovalInbox(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "applied once")
	})
}

// TestReplayKeepsTheClaimedMR performs the attack a replay used to let
// through: the right approvalId with an ext.mrId naming another MR, on a
// legacy request (the MR first), recorded in the callback inbox and not
// yet checked — the process died between recording and applying it, or a
// replay (the SENT hook, poll_approval, the reconciler's inbox pass) ran
// before the HTTP handler's own check. The replay used the request's own
// MR as the claim, so the forged decision passed the guard and the request
// went on to VALIDATED (seen once in TestApprovalCallbackAttacks under
// load). Now the inbox keeps the claim and the replay checks it: refused,
// recorded as refused, never replayed again; a delivery with no ext.mrId
// on a legacy request is refused the same way; the real rejection still
// closes the MR, and nothing reaches main.
func TestReplayKeepsTheClaimedMR(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st, withConfig(map[string]any{"approval.verifyDecisions": false}))
		ctx := t.Context()
		const op = "op-replay-claim"
		w.submit(op, "rcl", tSingle, false)
		o, _ := w.until(op, "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		require.NotZero(t, o.MRIID, "legacy flow: the MR comes first")
		d := e2eDeps(st, w.cfg.Load, http.DefaultTransport, nil)
		r := reconcile.New(d.Env, d.Store)

		for _, forged := range []struct{ key, mrID, reason string }{
			{"forged-other-mr", strconv.FormatInt(o.MRIID+100, 10), "is not this request's MR"},
			{"forged-no-mr", "", "legacy flow with MR"},
			{"forged-long-mr", strings.Repeat("0", 70) + strconv.FormatInt(o.MRIID, 10), "is not an MR number"},
		} {
			_, err := st.ApprovalCallbackInsert(ctx, store.ApprovalCallbackParams{
				DeliveryKey: forged.key, OperationID: op, ApprovalID: o.ApprovalID, Result: "APPROVED", MRID: forged.mrID})
			require.NoError(t, err)
			res, err := w.cbs.ReplayApproval(ctx, op)
			require.NoError(t, err)
			require.Equal(t, callbacks.Stale, res, forged.key)
			row := inboxOf(t, st, op)[forged.key]
			require.Equal(t, store.InboxRejectedByGuard, row.Disposition, row.Reason)
			require.Contains(t, row.Reason, forged.reason)
			// The reconciler's pass leaves a refused row alone.
			n, err := r.ReplayApprovalInbox(ctx)
			require.NoError(t, err)
			require.Zero(t, n, forged.key)
			_, b := mustState(t, st, op)
			require.Equal(t, domain.BindingApprovalSent, b.Status, "%s moved nothing", forged.key)
		}

		// The real decision still applies.
		w.decide(op, "reject")
		w.until(op, "MR closed", at(domain.StepCloseMRClosed, domain.BindingRejected))
		require.Equal(t, "closed", w.mrsOf(op)[0]["state"])
		require.Zero(t, w.validations(op))
		w.filesExact()
	})
}
