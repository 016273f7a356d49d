package workflow_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/approval"
	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/flow"
	"changeflow/internal/workflow/single"
)

// fastApprovalPoll polls the approval system every few milliseconds.
func fastApprovalPoll(timeout string) worldOpt {
	return withConfig(map[string]any{
		"polling.approval.shortInterval": "10ms", "polling.approval.shortAttempts": 5,
		"polling.approval.longInterval": "20ms", "polling.approval.timeout": timeout,
	})
}

// dropNextApprovalCallback makes the approval system lose the next
// decision's callback (its deliverer drops it: nothing is sent).
func (w *world) dropNextApprovalCallback() {
	w.t.Helper()
	code := w.simJSON(http.MethodPost, "/approval/_control/deliveries/faults", map[string]any{"dropNext": 1}, nil)
	require.Equal(w.t, http.StatusOK, code)
}

// approvalDeliveries is the approval system's callback log.
func (w *world) approvalDeliveries() []struct {
	State string `json:"state"`
	Body  string `json:"body"`
} {
	w.t.Helper()
	var out struct {
		Deliveries []struct {
			State string `json:"state"`
			Body  string `json:"body"`
		} `json:"deliveries"`
	}
	w.simJSON(http.MethodGet, "/approval/_control/deliveries", nil, &out)
	return out.Deliveries
}

// pollApplied says whether the history has the poll's application of the
// decision (actor approval-poll) and returns the steps.
func pollApplied(t *testing.T, st *store.Store, opID string) ([]store.OperationStep, bool) {
	t.Helper()
	hist, err := st.OperationStepList(t.Context(), opID)
	require.NoError(t, err)
	for _, h := range hist {
		if h.Actor == "approval-poll" {
			return hist, true
		}
	}
	return hist, false
}

// noFailure fails the test if the history passed through a failed step.
func noFailure(t *testing.T, hist []store.OperationStep) {
	t.Helper()
	for _, h := range hist {
		require.NotContains(t, []domain.StepKind{domain.KindFailed, domain.KindPending}, domain.StepStatus(h.ToStep).Kind(),
			"no failure on the way: %s (%s)", domain.StepStatus(h.ToStep), h.Note)
	}
}

// TestApprovalPollAppliesALostCallback: the approval system decides but
// its callback is lost (dropped by the deliverer). The request does not
// wait forever: poll_approval reads the decision and applies it through
// the callback's path — inbox row under the callback's own requestId,
// the same guard — and the request goes on to VALIDATED. The real
// callback, redelivered afterwards, is a duplicate: nothing moves again,
// one MR, one success side effect.
func TestApprovalPollAppliesALostCallback(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st, fastApprovalPoll("10s"))
		w.submit("op-lost-cb", "liam", tSingle, true)
		o, _ := w.until("op-lost-cb", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		require.NotEmpty(t, o.ApprovalID)

		w.dropNextApprovalCallback()
		w.decide("op-lost-cb", "approve")
		w.until("op-lost-cb", "validated", at(domain.StepCalledBack, domain.BindingValidated))

		ds := w.approvalDeliveries()
		require.Len(t, ds, 1)
		require.Equal(t, "dropped", ds[0].State, "the callback was never sent")
		hist, polled := pollApplied(t, st, "op-lost-cb")
		require.True(t, polled, "the poll applied the decision")
		noFailure(t, hist)

		// The inbox holds the decision under the callback's own delivery id.
		a := w.approvalsOf("op-lost-cb")[0]
		require.Equal(t, approval.Approved, a.Status)
		require.NotEmpty(t, a.CallbackRequestID)
		rec, ok, err := st.ApprovalCallbackLatest(t.Context(), "op-lost-cb")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, a.CallbackRequestID, rec.DeliveryKey)
		require.Equal(t, "APPROVED", rec.Result)

		// The real callback, late: a duplicate delivery, nothing applied.
		before := len(hist)
		body := approvalBody(a.CallbackRequestID, "op-lost-cb", "APPROVED", "")
		body["approvalId"] = a.ApprovalID
		require.Equal(t, "DUPLICATE", w.postCallback("/callbacks/approval", body))
		// And once more through the approval system itself.
		w.simJSON(http.MethodPost, "/approval/_control/approvals/"+a.ApprovalID+"/redeliver", map[string]any{}, nil)
		w.simJSON(http.MethodPost, "/approval/_control/deliveries/wait?timeoutMs=10000", map[string]any{}, nil)
		require.Equal(t, "delivered", w.approvalDeliveries()[1].State)

		w.until("op-lost-cb", "still validated", at(domain.StepCalledBack, domain.BindingValidated))
		hist, _ = pollApplied(t, st, "op-lost-cb")
		require.Len(t, hist, before, "the late callback wrote nothing")
		require.Len(t, w.mrsOf("op-lost-cb"), 1)
		require.Len(t, w.approvalsOf("op-lost-cb"), 1)
		w.validatedOnce("op-lost-cb")
		row := inboxOf(t, st, "op-lost-cb")[a.CallbackRequestID]
		require.Equal(t, store.InboxSourcePoll, row.Source)
		require.Equal(t, store.InboxApplied, row.Disposition)
		require.Contains(t, row.Reason, "approval-poll")
		require.Equal(t, 2, row.Duplicates, "the late callback and its redelivery")
	})
}

// TestApprovalPollClosesALostRejection: a legacy request whose rejection's
// callback is lost is closed as the callback would close it — REJECTED,
// close_mr scheduled because the approval carries ext.mrId (the flow by
// payload shape), the MR closed.
func TestApprovalPollClosesALostRejection(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st, fastApprovalPoll("10s"))
		w.submit("op-lost-rej", "mia", tOther, false)
		w.until("op-lost-rej", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))

		w.dropNextApprovalCallback()
		w.decide("op-lost-rej", "reject")
		o, b := w.until("op-lost-rej", "MR closed", at(domain.StepCloseMRClosed, domain.BindingRejected))
		require.Empty(t, o.NextAction)
		require.Equal(t, domain.HintNone, hint(o, b))
		require.Equal(t, "closed", w.mrsOf("op-lost-rej")[0]["state"])
		require.Equal(t, "dropped", w.approvalDeliveries()[0].State)
		hist, polled := pollApplied(t, st, "op-lost-rej")
		require.True(t, polled)
		var closeRejected bool
		for _, h := range hist {
			closeRejected = closeRejected || (domain.StepStatus(h.ToStep) == domain.StepCloseRejected && h.Actor == "approval-poll")
		}
		require.True(t, closeRejected, "the poll wrote the rejection")
		require.Zero(t, w.validations("op-lost-rej"))
	})
}

// TestApprovalPollRidesOutApprovalSystemErrors: the approval system
// answers the poll's reads 503 for a while (and the callback is lost):
// each failed read is just another poll later — no retry budget is spent,
// no failure state is written — and the decision is applied once a read
// succeeds.
func TestApprovalPollRidesOutApprovalSystemErrors(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st, fastApprovalPoll("10s"))
		w.submit("op-5xx", "noah", tSingle, true)
		w.until("op-5xx", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))

		// Four failures stay below the breaker's threshold (breaker.failures 5).
		code := w.simJSON(http.MethodPost, "/approval/_control/faults", map[string]any{"failReadsNext": map[string]any{"status": 503, "count": 4}}, nil)
		require.Equal(t, http.StatusOK, code)
		w.dropNextApprovalCallback()
		w.decide("op-5xx", "approve")
		w.until("op-5xx", "validated", at(domain.StepCalledBack, domain.BindingValidated))

		var f struct {
			FailReadsNext struct {
				Count int `json:"count"`
			} `json:"failReadsNext"`
		}
		w.simJSON(http.MethodGet, "/approval/_control/faults", nil, &f)
		require.Zero(t, f.FailReadsNext.Count, "every injected 503 was met by a poll")
		hist, polled := pollApplied(t, st, "op-5xx")
		require.True(t, polled)
		noFailure(t, hist)
		w.validatedOnce("op-5xx")
	})
}

// TestApprovalPollStopsAtItsTimeoutAndTheCallbackStillApplies: an
// approval nobody decides within polling.approval.timeout: polling stops
// (poll_approval kept for a retrigger, nothing due), the request keeps
// waiting in APPROVAL_SENT with no failure — and the decision's callback,
// when it comes, still moves it on; or, when that callback is lost too,
// an operator's retrigger polls again and applies the decision.
func TestApprovalPollStopsAtItsTimeoutAndTheCallbackStillApplies(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st, fastApprovalPoll("100ms"))
		w.submit("op-slow", "olga", tSingle, true)
		o, b := w.until("op-slow", "polling stopped", func(o store.Operation, b store.Binding) bool {
			return at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent)(o, b) && o.DueAt.IsZero()
		})
		require.Equal(t, flow.ActionPollApproval, o.NextAction, "kept for a retrigger")
		require.Contains(t, o.LastError, "polling.approval.timeout")
		require.Equal(t, domain.HintNone, hint(o, b), "still processing, not failed")
		hist, _ := pollApplied(t, st, "op-slow")
		noFailure(t, hist)

		w.decide("op-slow", "approve")
		w.until("op-slow", "validated", at(domain.StepCalledBack, domain.BindingValidated))
		_, polled := pollApplied(t, st, "op-slow")
		require.False(t, polled, "the callback applied it, not a poll")
		w.validatedOnce("op-slow")

		// Stopped polling, then decided with the callback lost: an
		// operator's retrigger polls again and applies the decision.
		w.submit("op-slow-2", "otto", tOther, true)
		w.until("op-slow-2", "polling stopped", func(o store.Operation, b store.Binding) bool {
			return at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent)(o, b) && o.DueAt.IsZero()
		})
		w.dropNextApprovalCallback()
		w.decide("op-slow-2", "approve")
		w.simJSON(http.MethodPost, "/approval/_control/deliveries/wait?timeoutMs=10000", map[string]any{}, nil)
		ds := w.approvalDeliveries()
		require.Equal(t, "dropped", ds[len(ds)-1].State)
		action, err := single.Retrigger(t.Context(), st, "op-slow-2", "ops")
		require.NoError(t, err)
		require.Equal(t, flow.ActionPollApproval, action)
		w.until("op-slow-2", "validated", at(domain.StepCalledBack, domain.BindingValidated))
		hist, polled = pollApplied(t, st, "op-slow-2")
		require.True(t, polled, "the retriggered poll applied it")
		noFailure(t, hist)
		w.validatedOnce("op-slow-2")
	})
}

// TestRetriggerPollsARequestWaitingForItsApprovalWithNoAction: a request
// waiting in CREATE_APPROVAL_SUBMITTED / APPROVAL_SENT with no action at
// all — written before poll_approval existed, when submit_approval
// scheduled nothing — whose decision's callback is lost: nothing would
// ever move it. An operator's retrigger schedules poll_approval (state
// unchanged, checked against the table), which finds the decision and
// applies it through the callback's guard: VALIDATED, one success side
// effect. Before the decision the retriggered poll keeps polling; a
// finished request is still refused.
func TestRetriggerPollsARequestWaitingForItsApprovalWithNoAction(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st, fastApprovalPoll("100ms"))
		w.submit("op-old", "oskar", tSingle, true)
		w.until("op-old", "polling stopped", func(o store.Operation, b store.Binding) bool {
			return at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent)(o, b) && o.DueAt.IsZero()
		})
		// The row as an older release left it: no action kept.
		_, err := st.DB().ExecContext(t.Context(),
			"UPDATE operation SET next_action = NULL, due_at = NULL WHERE operation_id = ? AND lease_owner IS NULL", "op-old")
		require.NoError(t, err)
		o, err := st.OperationGet(t.Context(), "op-old")
		require.NoError(t, err)
		require.Empty(t, o.NextAction)
		require.True(t, o.DueAt.IsZero())

		w.dropNextApprovalCallback()
		w.decide("op-old", "approve")
		w.simJSON(http.MethodPost, "/approval/_control/deliveries/wait?timeoutMs=10000", map[string]any{}, nil)
		ds := w.approvalDeliveries()
		require.Equal(t, "dropped", ds[len(ds)-1].State)
		o, err = st.OperationGet(t.Context(), "op-old")
		require.NoError(t, err)
		b, err := st.BindingGet(t.Context(), o.Subject, o.TargetKey)
		require.NoError(t, err)
		require.Equal(t, domain.StepCreateApprovalSubmitted, domain.StepStatus(o.Step), "the lost callback moved nothing")
		require.Equal(t, domain.BindingApprovalSent, b.Status)

		action, err := single.Retrigger(t.Context(), st, "op-old", "olivia")
		require.NoError(t, err)
		require.Equal(t, flow.ActionPollApproval, action)
		w.until("op-old", "validated", at(domain.StepCalledBack, domain.BindingValidated))
		hist, polled := pollApplied(t, st, "op-old")
		require.True(t, polled, "the retriggered poll applied the decision")
		noFailure(t, hist)
		w.validatedOnce("op-old")
		var retriggers int
		for _, h := range hist {
			if h.Actor == "olivia" {
				retriggers++
				require.Equal(t, domain.StepCreateApprovalSubmitted, domain.StepStatus(h.FromStep), "the retrigger keeps the state")
				require.Equal(t, domain.StepCreateApprovalSubmitted, domain.StepStatus(h.ToStep), "the retrigger keeps the state")
			}
		}
		require.Equal(t, 1, retriggers, "%+v", hist)

		_, err = single.Retrigger(t.Context(), st, "op-old", "olivia")
		require.ErrorIs(t, err, single.ErrNotStopped, "a finished request")
	})
}
