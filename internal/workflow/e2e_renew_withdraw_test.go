package workflow_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/approval"
	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/flow"
	"changeflow/internal/workflow/withdraw"
)

// withdrawRenewal withdraws renewal r as its owner does, through the
// world's engine (the HTTP layer's Withdrawer).
func (w *revokeWorld) withdrawRenewal(r string) withdraw.Answer {
	w.t.Helper()
	// The engine's own deps (the world's): they carry the withdrawal counter.
	ans, err := withdraw.Withdrawer{Flow: withdrawFlow(w.world.deps), Engine: w.eng}.Withdraw(w.t.Context(), r, "owner")
	require.NoError(w.t, err)
	return ans
}

// backWithGrant: the renewal ended without effect — its own step says
// how, and subject's row on target is grant's again, VALIDATED with its
// expiry, the entry on main the grant's (accessUnchanged).
func (w *revokeWorld) backWithGrant(r string, step domain.StepStatus, subject, target, grant string, until time.Time) {
	w.t.Helper()
	o, b := w.until(r, "ended without effect", func(o store.Operation, b store.Binding) bool {
		return domain.StepStatus(o.Step) == step && o.NextAction == "" && o.LeaseOwner == "" && b.OperationID == grant
	})
	require.Equal(w.t, domain.BindingValidated, b.Status)
	require.True(w.t, until.Equal(b.ExpiresAt), "the grant's expiry %s, got %s", until, b.ExpiresAt)
	require.Equal(w.t, domain.OperationRenew, o.Kind)
	w.accessUnchanged(subject, target, grant, until)
}

// TestWithdrawARenewalWaitingForItsApproval: the owner withdraws a
// renewal still waiting for its approval. The renewal ends CLOSED
// (CLOSE_REQUESTER_WITHDRAWN) on its own page; the binding goes back to
// the grant unchanged (VALIDATED, the grant's expiry, its entry on main
// byte for byte); the approval is withdrawn in the approval system, once;
// a late approval callback is stale; the withdrawal is counted once; the
// grant can be renewed again.
func TestWithdrawARenewalWaitingForItsApproval(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newRevokeWorld(t, st)
		w.granted("gw1", "amy", tSingle)
		until := w.expireIn("gw1", 2*time.Hour)
		before := w.fileOnMain(tSingle)
		w.mustRenew("rw1", "amy", tSingle, "gw1")
		w.until("rw1", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingRenewing))

		ans := w.withdrawRenewal("rw1")
		require.Equal(t, store.WithdrawApplied, ans.Result.Outcome)
		require.Equal(t, store.WithdrawFromApproval, ans.Result.Place)
		require.Equal(t, domain.BindingApprovalSent, ans.Result.View)
		require.NotNil(t, ans.Result.Flip)
		require.True(t, ans.Result.Flip.EndedWithoutEffect)
		require.False(t, ans.Merged)
		require.Zero(t, ans.Binding, "the row is no longer the renewal's")
		w.backWithGrant("rw1", domain.StepCloseRequesterWithdrawn, "amy", tSingle, "gw1", until)

		as := w.approvalsOf("rw1")
		require.Len(t, as, 1)
		require.Equal(t, approval.Withdrawn, as[0].Status)
		require.Equal(t, 1, w.withdrawCalls(as[0].ApprovalID), "withdrawn upstream once")
		body := map[string]any{"requestId": "late-rw1", "approvalId": as[0].ApprovalID, "operationId": "rw1", "result": "APPROVED", "ext": map[string]any{}}
		w.postCallback("/callbacks/approval", body)
		rec, ok, err := st.ApprovalCallbackLatest(t.Context(), "rw1")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, store.InboxStale, rec.Disposition, "a late approval is stale")
		w.backWithGrant("rw1", domain.StepCloseRequesterWithdrawn, "amy", tSingle, "gw1", until)
		require.Equal(t, 1, w.withdrawnCount(store.WithdrawFromApproval), "counted once")
		w.renewalEndedOnce("rw1", domain.RenewalClosed)
		require.Equal(t, before, w.fileOnMain(tSingle), "the grant's entry is untouched")
		require.Empty(t, w.mrsOf("rw1"))
		again := w.withdrawRenewal("rw1")
		require.Equal(t, store.WithdrawRefused, again.Result.Outcome, "the row is the grant's: nothing more to withdraw")
		w.filesExact("gw1", "rw1")

		// Renewable again.
		w.mustRenew("rw1b", "amy", tSingle, "gw1")
		w.until("rw1b", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingRenewing))
		w.decide("rw1b", "approve")
		w.until("rw1b", "in effect", at(domain.StepCalledBack, domain.BindingValidated))
		w.filesExact("gw1", "rw1", "rw1b")
	})
}

// TestWithdrawARenewalWhoseMRIsOpen: the renewal was approved and its
// single-request MR is open (its check pipeline never finishes): the
// withdrawal closes the MR and only then hands the row back to the grant,
// unchanged; the grant's entry on main is untouched. A second renewal
// whose MR was merged by hand meanwhile follows its merge ("merged wins"):
// it is in effect with its own expiry, and the answer says so.
func TestWithdrawARenewalWhoseMRIsOpen(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newRevokeWorld(t, st)
		w.granted("gw2", "ben", tSingle)
		until := w.expireIn("gw2", 2*time.Hour)
		before := w.fileOnMain(tSingle)
		require.Equal(t, http.StatusOK, w.simJSON(http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"outcome": "never", "count": 1}, nil))
		w.mustRenew("rw2", "ben", tSingle, "gw2")
		w.until("rw2", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingRenewing))
		w.decide("rw2", "approve")
		o, _ := w.until("rw2", "MR open", at(domain.StepCreatePipelineRunning, domain.BindingRenewing))
		require.NotZero(t, o.MRIID)

		ans := w.withdrawRenewal("rw2")
		require.Equal(t, store.WithdrawApplied, ans.Result.Outcome)
		require.Equal(t, store.WithdrawFromMR, ans.Result.Place)
		require.False(t, ans.Merged)
		require.False(t, ans.Pending, "the MR was closed before the answer")
		w.backWithGrant("rw2", domain.StepCloseRequesterWithdrawn, "ben", tSingle, "gw2", until)
		mrs := w.mrsOf("rw2")
		require.Len(t, mrs, 1)
		require.Equal(t, "closed", mrs[0]["state"])
		require.Equal(t, 1, w.withdrawnCount(store.WithdrawFromMR))
		w.renewalEndedOnce("rw2", domain.RenewalClosed)
		require.Equal(t, before, w.fileOnMain(tSingle))
		w.filesExact("gw2", "rw2")

		// Merged wins.
		require.Equal(t, http.StatusOK, w.simJSON(http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"outcome": "never", "count": 1}, nil))
		w.mustRenew("rw3", "ben", tSingle, "gw2")
		w.until("rw3", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingRenewing))
		w.decide("rw3", "approve")
		o, _ = w.until("rw3", "MR open", at(domain.StepCreatePipelineRunning, domain.BindingRenewing))
		code := w.simJSON(http.MethodPost, fmt.Sprintf("/gitlab/_control/projects/1/merge_requests/%d/merge", o.MRIID), map[string]any{}, nil)
		require.Equal(t, http.StatusOK, code, "merged by hand")
		ans = w.withdrawRenewal("rw3")
		require.True(t, ans.Merged, "merged wins: %+v", ans)
		_, b := w.until("rw3", "in effect", at(domain.StepCalledBack, domain.BindingValidated))
		require.Equal(t, "rw3", b.OperationID)
		require.True(t, renewExpiry.Equal(b.ExpiresAt), "the renewal's expiry, got %s", b.ExpiresAt)
		w.validatedOnce("rw3")
		require.Equal(t, 1, w.withdrawnCount(store.WithdrawFromMR), "the merged one is not counted")
		w.renewalEndedOnce("rw3", domain.RenewalInEffect)
		w.filesExact("gw2", "rw2", "rw3")
	})
}

// TestWithdrawARenewalFromTheBatchSet: on a batching target an approved
// renewal waits in the batch set; withdrawn, it leaves the set (the next
// round has nothing to claim) and the row goes back to the grant
// unchanged. A renewal a round has claimed is refused, with the batch.
func TestWithdrawARenewalFromTheBatchSet(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newRevokeWorld(t, st)
		w.admitted("gb1", "gb2")
		require.Len(t, w.roundsUntilIdle(), 1)
		subjects, untils := w.renewalsAdmitted("rb", "gb1", "gb2")
		before := w.fileOnMain(tBatched)

		ans := w.withdrawRenewal("rb1")
		require.Equal(t, store.WithdrawApplied, ans.Result.Outcome)
		require.Equal(t, store.WithdrawFromBatchSet, ans.Result.Place)
		w.backWithGrant("rb1", domain.StepCloseRequesterWithdrawn, subjects[0], tBatched, "gb1", untils[0])
		require.Equal(t, 1, w.withdrawnCount(store.WithdrawFromBatchSet))
		w.renewalEndedOnce("rb1", domain.RenewalClosed)

		storetest.UntilAdmittedBeforeNow(t, st, "rb2")
		r, err := w.rounds.RunRound(t.Context(), 1)
		require.NoError(t, err)
		require.Equal(t, "CLAIMED", r.Outcome)
		require.Equal(t, 1, r.Members, "only the renewal still waiting")
		late := w.withdrawRenewal("rb2")
		require.Equal(t, store.WithdrawClaimed, late.Result.Outcome, "claimed by the round: refused")
		require.Equal(t, r.BatchID, late.Result.BatchID)

		_, b := w.until("rb2", "in effect", at(domain.StepCalledBack, domain.BindingValidated))
		require.True(t, renewExpiry.Equal(b.ExpiresAt))
		w.renewalEndedOnce("rb2", domain.RenewalInEffect)
		w.accessUnchanged(subjects[0], tBatched, "gb1", untils[0])
		require.NotEqual(t, before, w.fileOnMain(tBatched), "rb2's entry replaced gb2's")
		w.filesExact("gb1", "gb2", "rb1", "rb2")
	})
}

// TestStoppedRenewalPastTheGrantsExpiry: the grant's expiry wins over a
// renewal that stopped on a failure. A renewal whose check pipeline
// failed (CREATE_PIPELINE_FAILED, waiting for an operator, its MR open)
// outlives the grant's expiry: the expiry scan withdraws it (RENEW_EXPIRED,
// its MR closed), the row goes back to the grant — VALIDATED and expired —
// and the next scan revokes the grant: its entry is removed and deployed.
// A second stopped renewal whose MR was merged by hand meanwhile is in
// effect instead ("merged wins"), with its own expiry, and no scan
// revokes it. Before this, the access stayed RENEWING, and granted, past
// its expiry until someone looked.
func TestStoppedRenewalPastTheGrantsExpiry(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newRevokeWorld(t, st)
		w.granted("gl1", "dan", tSingle)
		w.granted("gl2", "eve", tOther)
		for _, c := range []struct{ g, r, subject, target string }{{"gl1", "rl1", "dan", tSingle}, {"gl2", "rl2", "eve", tOther}} {
			w.expireIn(c.g, 2*time.Hour)
			require.Equal(t, http.StatusOK, w.simJSON(http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"outcome": "fail", "count": 1}, nil))
			w.mustRenew(c.r, c.subject, c.target, c.g)
			w.until(c.r, "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingRenewing))
			w.decide(c.r, "approve")
			o, _ := w.until(c.r, "stopped", at(domain.StepCreatePipelineFailed, domain.BindingRenewing))
			require.NotZero(t, o.MRIID)
		}
		o2, _ := w.until("rl2", "stopped", at(domain.StepCreatePipelineFailed, domain.BindingRenewing))
		code := w.simJSON(http.MethodPost, fmt.Sprintf("/gitlab/_control/projects/1/merge_requests/%d/merge", o2.MRIID), map[string]any{}, nil)
		require.Equal(t, http.StatusOK, code, "rl2 merged by hand")
		w.expireRow("dan", tSingle)
		// eve's entry on main is rl2's now (merged): only the row's expiry
		// (the grant's, while RENEWING) passes.
		past, arg := st.Dialect().NowAdd(-time.Hour)
		_, err := st.DB().ExecContext(t.Context(), "UPDATE binding SET expires_at = "+past+" WHERE subject_id = ? AND target_key = ?", arg, "eve", tOther)
		require.NoError(t, err)

		res := w.scan()
		require.Equal(t, 2, res.Lapsed, "both stopped renewals are withdrawn")
		require.Zero(t, res.Revoked, "nothing revoked while a renewal's MR may still land")
		for _, r := range []string{"rl1", "rl2"} {
			o, err := st.OperationGet(t.Context(), r)
			require.NoError(t, err)
			require.Equal(t, domain.StepRenewExpired, domain.StepStatus(o.Step))
			require.Equal(t, flow.ActionWithdraw, o.NextAction)
		}
		_, b := w.until("rl1", "withdrawn", func(o store.Operation, b store.Binding) bool {
			return domain.StepStatus(o.Step) == domain.StepRenewExpired && o.NextAction == "" && o.LeaseOwner == "" && b.OperationID == "gl1"
		})
		require.Equal(t, domain.BindingValidated, b.Status, "the grant's again, expired")
		mrs := w.mrsOf("rl1")
		require.Len(t, mrs, 1)
		require.Equal(t, "closed", mrs[0]["state"])
		_, b = w.until("rl2", "merged wins", at(domain.StepCalledBack, domain.BindingValidated))
		require.True(t, renewExpiry.Equal(b.ExpiresAt), "rl2 is in effect with its own expiry")
		w.validatedOnce("rl2")
		w.renewalEndedOnce("rl1", domain.RenewalExpired)
		w.renewalEndedOnce("rl2", domain.RenewalInEffect)

		res = w.scan()
		require.Equal(t, 1, res.Revoked, "the expired grant is revoked; the merged renewal is not")
		w.until(domain.RevocationID("gl1"), "removed", at(domain.StepRevokeCalledBack, domain.BindingRevoked))
		w.revokedOnce("gl1")
		_, ok := w.entryOf(tSingle, "dan")
		require.False(t, ok)
		e, ok := w.entryOf(tOther, "eve")
		require.True(t, ok)
		require.Equal(t, "rl2", e.OperationID)
		require.Zero(t, w.scan().Revoked+w.scan().Lapsed, "nothing left")
		require.Zero(t, w.withdrawnCount(store.WithdrawFromMR), "not a requester's withdrawal")
		w.filesExact("gl1", "gl2", "rl1", "rl2")
	})
}
