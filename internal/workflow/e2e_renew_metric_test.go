package workflow_test

import (
	"context"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/reconcile"
)

// renewalEndedOnce waits for renewal id's end to be reported, after the
// commit that ended it (it may trail the state the test saw), and checks
// it was reported exactly once, with outcome, and with no other.
func (w *revokeWorld) renewalEndedOnce(id string, outcome domain.RenewalOutcome) {
	w.t.Helper()
	require.Eventually(w.t, func() bool {
		w.rmu.Lock()
		defer w.rmu.Unlock()
		return w.renewals[id+" "+string(outcome)] >= 1
	}, 10*time.Second, 5*time.Millisecond, "%s: no %s reported", id, outcome)
	w.rmu.Lock()
	defer w.rmu.Unlock()
	for k, n := range w.renewals {
		if strings.HasPrefix(k, id+" ") {
			require.Equal(w.t, id+" "+string(outcome), k, "%s ended %s, also reported as %s", id, outcome, k)
			require.Equal(w.t, 1, n, "%s reported %d times", k, n)
		}
	}
}

// deliveredTimes waits until the approval system's log shows the
// callback with requestID delivered n times: answered 2xx by the server,
// so its inbox row was written before. The wait is on that state, not on
// a time; the bound only keeps a lost delivery from hanging the test.
func (w *revokeWorld) deliveredTimes(requestID string, n int) {
	w.t.Helper()
	require.Eventually(w.t, func() bool {
		got := 0
		for _, d := range w.approvalDeliveries() {
			if d.State == "delivered" && strings.Contains(d.Body, requestID) {
				got++
			}
		}
		return got >= n
	}, 2*time.Minute, 20*time.Millisecond, "the callback %s delivered %d times", requestID, n)
}

// TestRenewalOutcomesAreCountedOnce: each way a renewal ends is reported
// once, after the commit that ended it, by the call that moved it — in
// effect (the deploy callback; a duplicate callback and a reconciliation
// afterwards move nothing), rejected (the decision redelivered is a
// duplicate), cut off by the expiry (a second scan creates nothing),
// rejected through the approval poll when its callback was lost (the
// poll step runs until it reads the decision; the late callback is a
// duplicate) — and a grant's own flips report no renewal. Each scenario ends with the
// file on main checked against the database.
func TestRenewalOutcomesAreCountedOnce(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newRevokeWorld(t, st)

		// In effect, its deploy callback delivered twice, then a
		// reconciliation that finds it confirmed already.
		w.granted("mg1", "mia", tSingle)
		w.expireIn("mg1", 2*time.Hour)
		w.mustRenew("mr1", "mia", tSingle, "mg1")
		w.until("mr1", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingRenewing))
		w.simJSON(http.MethodPost, "/deploy/_control/faults", map[string]any{"duplicateNext": 1}, nil)
		w.decide("mr1", "approve")
		o, _ := w.until("mr1", "in effect", at(domain.StepCalledBack, domain.BindingValidated))
		require.Equal(t, "IGNORED_STALE", w.postCallback("/callbacks/deploy",
			map[string]any{"requestId": "mr1-again", "project": 1, "mrIid": o.MRIID, "status": "SUCCESS"}))
		res, err := reconcile.New(w.deps.Env, w.deps.Store).RunOnce(t.Context())
		require.NoError(t, err)
		require.Zero(t, res.Validated, "nothing left to confirm: %+v", res)
		w.renewalEndedOnce("mr1", domain.RenewalInEffect)
		w.validatedOnce("mr1")
		w.filesExact("mg1", "mr1")

		// Rejected, and the decision redelivered.
		w.granted("mg2", "max", tSingle)
		w.expireIn("mg2", 2*time.Hour)
		w.mustRenew("mr2", "max", tSingle, "mg2")
		w.until("mr2", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingRenewing))
		w.decide("mr2", "reject")
		w.until("mr2", "rejected", at(domain.StepCloseRejected, ""))
		as := w.approvalsOf("mr2")
		require.Len(t, as, 1)
		// The decision's own callback may arrive after poll_approval found
		// the decision and recorded it under the callback's delivery id
		// (then the callback itself is already a duplicate): count from
		// once it was delivered, so what is proven is the redelivery.
		w.deliveredTimes(as[0].CallbackRequestID, 1)
		before := inboxOf(t, st, "mr2")[as[0].CallbackRequestID].Duplicates
		require.Equal(t, http.StatusOK, w.simJSON(http.MethodPost, "/approval/_control/approvals/"+as[0].ApprovalID+"/redeliver", map[string]any{}, nil))
		w.deliveredTimes(as[0].CallbackRequestID, 2) // the decision and its redelivery
		require.Equal(t, before+1, inboxOf(t, st, "mr2")[as[0].CallbackRequestID].Duplicates, "the redelivery was a duplicate")
		w.renewalEndedOnce("mr2", domain.RenewalRejected)
		w.filesExact("mg1", "mr1", "mg2", "mr2")

		// Cut off by the expiry, and scanned again.
		w.granted("mg3", "mel", tSingle)
		w.expireIn("mg3", time.Hour)
		w.mustRenew("mr3", "mel", tSingle, "mg3")
		w.until("mr3", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingRenewing))
		w.expireRow("mel", tSingle)
		require.Equal(t, 1, w.scan().Revoked)
		require.Zero(t, w.scan().Revoked, "a second scan cuts nothing")
		w.renewalEndedOnce("mr3", domain.RenewalExpired)
		w.until(domain.RevocationID("mg3"), "removed", at(domain.StepRevokeCalledBack, domain.BindingRevoked))
		w.revokedOnce("mg3")
		w.filesExact("mg1", "mr1", "mg2", "mr2", "mg3", "mr3")

		// Rejected with its callback lost: poll_approval, run again and
		// again until the decision is there, applies it once; the callback
		// redelivered afterwards is a duplicate.
		ov := e2eOverlay(w.simTS.URL)
		maps.Copy(ov, map[string]any{
			"polling.approval.shortInterval": "10ms", "polling.approval.shortAttempts": 5,
			"polling.approval.longInterval": "20ms", "polling.approval.timeout": "10s",
		})
		w.load(ov)
		w.granted("mg4", "moe", tSingle)
		w.expireIn("mg4", 2*time.Hour)
		w.mustRenew("mr4", "moe", tSingle, "mg4")
		w.until("mr4", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingRenewing))
		w.dropNextApprovalCallback()
		w.decide("mr4", "reject")
		w.until("mr4", "rejected by the poll", at(domain.StepCloseRejected, ""))
		_, polled := pollApplied(t, st, "mr4")
		require.True(t, polled, "the poll applied the decision")
		a := w.approvalsOf("mr4")[0]
		require.Equal(t, http.StatusOK, w.simJSON(http.MethodPost, "/approval/_control/approvals/"+a.ApprovalID+"/redeliver", map[string]any{}, nil))
		w.deliveredTimes(a.CallbackRequestID, 1) // the first was dropped
		require.Equal(t, 1, inboxOf(t, st, "mr4")[a.CallbackRequestID].Duplicates, "the redelivery was a duplicate")
		w.renewalEndedOnce("mr4", domain.RenewalRejected)
		w.filesExact("mg1", "mr1", "mg2", "mr2", "mg3", "mr3", "mg4", "mr4")

		// The grants' own flips, and the removal's, reported no renewal.
		w.rmu.Lock()
		defer w.rmu.Unlock()
		require.Len(t, w.renewals, 4, "%v", w.renewals)
	})
}

// A step's own move that hands a renewal's row back (a withdrawal of its
// open MR, once renewals can be withdrawn: CLOSE_REQUESTER_WITHDRAWN with
// CLOSED) is counted once, CLOSED, by the engine's commit hook that
// RegisterSteps adds — and only that move: the step run again moves
// nothing and counts nothing. The step here is the test's own, so the
// hook is proven on the engine path whatever step ends a renewal there.
func TestRenewalClosedByAStepIsCountedOnce(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newRevokeWorld(t, st)
		const endRenewal = "test_end_renewal"
		runs := make(chan struct{}, 4)
		w.eng.Register(endRenewal, engine.StepFunc{Decl: engine.Declaration{OnError: engine.Failure{Step: domain.StepCloseFailed}}, Fn: func(_ context.Context, _ engine.Work) (engine.Outcome, error) {
			runs <- struct{}{}
			return engine.Done("", engine.Transition{Step: domain.StepCloseRequesterWithdrawn, Binding: domain.BindingClosed}), nil
		}})
		w.granted("mg5", "mae", tSingle)
		until := w.expireIn("mg5", 2*time.Hour)
		w.mustRenew("mr5", "mae", tSingle, "mg5")
		w.until("mr5", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingRenewing))
		due := func() {
			now, arg := st.Dialect().NowAdd(0)
			_, err := st.DB().ExecContext(t.Context(), "UPDATE operation SET next_action = ?, due_at = "+now+", lease_owner = NULL, lease_expires_at = NULL WHERE operation_id = ?",
				endRenewal, arg, "mr5")
			require.NoError(t, err)
			w.eng.Wake()
			select {
			case <-runs:
			case <-time.After(10 * time.Second):
				t.Fatal("the engine never ran the step")
			}
		}
		due()
		_, b := w.until("mr5", "closed", at(domain.StepCloseRequesterWithdrawn, ""))
		require.Equal(t, "mg5", b.OperationID, "the row is the grant's again")
		w.accessUnchanged("mae", tSingle, "mg5", until)
		w.renewalEndedOnce("mr5", domain.RenewalClosed)
		w.filesExact("mg5", "mr5")
	})
}
