package workflow_test

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/approval"
	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/flow"
	"changeflow/internal/workflow/lifecycle"
)

// Expiry wins in every flow and every place of a renewal that is not in
// effect yet (docs/flows/lifecycle.md, "Renewal"): each test below lets a grant
// expire while its renewal is somewhere on its way, runs the expiry scan
// and follows the renewal's cut and the grant's removal to the end, which
// the binding-file check closes.

// renewOn submits id as a re-application of subject for target on the
// given flow (approveFirst false: the legacy flow, the request's own MR
// first and its approval asked while the MR waits).
func (w *revokeWorld) renewOn(id, subject, target, grant string, approveFirst bool) {
	w.t.Helper()
	entry := flow.Entry(approveFirst)
	res, err := w.st.OperationSubmit(w.t.Context(), store.OperationSubmitParams{
		Operation: store.OperationCreateParams{
			OperationID: id, Subject: subject, TargetKey: target, ProjectID: 1, Flow: entry.Flow,
			Step: int(entry.Step), Reason: "renew", Days: 7, ExpiresAt: renewExpiry, Actor: subject, NextAction: entry.Action,
		},
		BindingStatus: entry.Binding,
		Renew:         &domain.RenewWindow{Percent: 25, Min: 24 * time.Hour},
	})
	require.NoError(w.t, err)
	require.Equal(w.t, grant, res.Application.Renews)
	require.Equal(w.t, domain.BindingRenewing, res.Application.Binding.Status)
	if w.eng != nil {
		w.eng.Wake()
	}
}

// grantedLegacy drives a legacy-flow request for a target without
// batching to VALIDATED: its MR and check pipeline first, then the
// approval, then the bots' approvals and the merge.
func (w *revokeWorld) grantedLegacy(id, subject, target string) {
	w.t.Helper()
	w.submit(id, subject, target, false)
	o, _ := w.until(id, "approval sent, MR open", at(domain.StepCreateApprovalSubmitted, ""))
	require.NotZero(w.t, o.MRIID, "the legacy flow opens the MR before asking")
	w.decide(id, "approve")
	w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
}

// cutBackToGrant waits for renewal r's withdrawal by the expiry scan to
// be done: RENEW_EXPIRED, nothing due, the row the grant's again —
// VALIDATED and expired — and the renewal's one MR closed.
func (w *revokeWorld) cutBackToGrant(r, grant string) {
	w.t.Helper()
	_, b := w.until(r, "withdrawn, the row back with the grant", func(o store.Operation, b store.Binding) bool {
		return domain.StepStatus(o.Step) == domain.StepRenewExpired && o.NextAction == "" && o.LeaseOwner == "" && b.OperationID == grant
	})
	require.Equal(w.t, domain.BindingValidated, b.Status, "the grant's again, expired")
	mrs := w.mrsOf(r)
	require.Len(w.t, mrs, 1, "%s: one MR", r)
	require.Equal(w.t, "closed", mrs[0]["state"], "%s: its MR closed", r)
}

// revokedAndRemoved: the scan after the cut revokes grant; its removal
// is merged and deployed, the entry is gone from main, each counted once.
func (w *revokeWorld) revokedAndRemoved(grant, subject, target string) {
	w.t.Helper()
	res := w.scan()
	require.Equal(w.t, 1, res.Revoked, "the expired grant is revoked: %+v", res)
	w.until(domain.RevocationID(grant), "removed", at(domain.StepRevokeCalledBack, domain.BindingRevoked))
	w.revokedOnce(grant)
	_, ok := w.entryOf(target, subject)
	require.False(w.t, ok, "%s's entry is gone from main", subject)
	res = w.scan()
	require.Zero(w.t, res.Revoked+res.Lapsed, "nothing left: %+v", res)
}

// approvalAskedOnce: r's approval is in the approval system with status
// want, and changeflow withdrew it through the adapter exactly once.
func (w *revokeWorld) approvalAskedOnce(r string, want approval.Status) {
	w.t.Helper()
	as := w.approvalsOf(r)
	require.Len(w.t, as, 1)
	require.Equal(w.t, want, as[0].Status, "%s's approval in the approval system", r)
	require.Equal(w.t, 1, w.withdrawCalls(as[0].ApprovalID), "%s's approval withdrawn once", r)
}

// TestExpiryCutsALegacyRenewalWaitingForItsApproval is the reproduction:
// on the legacy flow a grant is in effect, its renewal's MR is open and
// the renewal waits for its approval, and the grant's expiry passes. The
// scan withdraws the renewal (RENEW_EXPIRED): its approval is withdrawn
// in the approval system, once, and its MR closed; the row goes back to
// the grant and the next scan revokes it — the entry is removed from
// main, deployed, and the renewal counted EXPIRED once. Before, the scan
// answered {"scanned":0,"revoked":0} and the entry stayed on main.
func TestExpiryCutsALegacyRenewalWaitingForItsApproval(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newRevokeWorld(t, st)
		w.grantedLegacy("gx1", "amy", tSingle)
		w.expireIn("gx1", time.Hour)
		w.renewOn("rx1", "amy", tSingle, "gx1", false)
		o, _ := w.until("rx1", "approval sent, MR open", at(domain.StepCreateApprovalSubmitted, domain.BindingRenewing))
		require.NotZero(t, o.MRIID)
		w.expireRow("amy", tSingle)

		res := w.scan()
		require.Equal(t, 1, res.Lapsed, "the renewal is withdrawn: %+v", res)
		require.Zero(t, res.Revoked, "nothing revoked while the renewal's MR may still land")
		o, err := st.OperationGet(t.Context(), "rx1")
		require.NoError(t, err)
		require.Equal(t, domain.StepRenewExpired, domain.StepStatus(o.Step))
		require.Equal(t, flow.ActionWithdraw, o.NextAction)
		w.cutBackToGrant("rx1", "gx1")
		w.approvalAskedOnce("rx1", approval.Withdrawn)
		code := w.simJSON(http.MethodPost, "/approval/_control/approvals/"+w.approvalsOf("rx1")[0].ApprovalID+"/approve", map[string]any{}, nil)
		require.Equal(t, http.StatusConflict, code, "a withdrawn approval can no longer be decided")
		w.revokedAndRemoved("gx1", "amy", tSingle)
		w.renewalEndedOnce("rx1", domain.RenewalExpired)
		require.Zero(t, w.validations("rx1"))
		require.Zero(t, w.withdrawnCount(store.WithdrawFromMR), "not a requester's withdrawal")
		w.filesExact("gx1", "rx1")
	})
}

// TestExpiryCutsARenewalWhoseOwnMRIsBeingChecked: the renewal's own MR is
// open and its check pipeline still runs — on the legacy flow before its
// approval was asked for (nothing to withdraw upstream, and nothing is
// waited for), on the approve-first flow after it was approved (the
// approval system answers that it is decided). Either way the scan
// pre-empts the running poll, the MR is closed, the row goes back and the
// grant is revoked and removed.
func TestExpiryCutsARenewalWhoseOwnMRIsBeingChecked(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newRevokeWorld(t, st)
		w.grantedLegacy("gx2", "ben", tSingle)
		w.granted("gx3", "cleo", tOther)
		for _, c := range []struct {
			g, r, subject, target string
			approveFirst          bool
		}{{"gx2", "rx2", "ben", tSingle, false}, {"gx3", "rx3", "cleo", tOther, true}} {
			w.expireIn(c.g, time.Hour)
			require.Equal(t, http.StatusOK, w.simJSON(http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"outcome": "never", "count": 1}, nil))
			w.renewOn(c.r, c.subject, c.target, c.g, c.approveFirst)
			if c.approveFirst {
				w.until(c.r, "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingRenewing))
				w.decide(c.r, "approve")
			}
			o, _ := w.until(c.r, "MR open, its pipeline running", func(o store.Operation, b store.Binding) bool {
				return o.MRIID != 0 && domain.StepStatus(o.Step) == domain.StepCreatePipelineRunning
			})
			require.NotZero(t, o.MRIID)
			w.expireRow(c.subject, c.target)
		}
		res := w.scan()
		require.Equal(t, 2, res.Lapsed, "both renewals are withdrawn: %+v", res)
		require.Zero(t, res.Revoked)
		w.cutBackToGrant("rx2", "gx2")
		w.cutBackToGrant("rx3", "gx3")
		require.Empty(t, w.approvalsOf("rx2"), "legacy, before its approval: none was asked for")
		w.approvalAskedOnce("rx3", approval.Approved)

		res = w.scan()
		require.Equal(t, 2, res.Revoked, "both expired grants are revoked: %+v", res)
		for _, c := range []struct{ g, subject, target string }{{"gx2", "ben", tSingle}, {"gx3", "cleo", tOther}} {
			w.until(domain.RevocationID(c.g), "removed", at(domain.StepRevokeCalledBack, domain.BindingRevoked))
			w.revokedOnce(c.g)
			_, ok := w.entryOf(c.target, c.subject)
			require.False(t, ok, "%s's entry is gone", c.subject)
		}
		w.renewalEndedOnce("rx2", domain.RenewalExpired)
		w.renewalEndedOnce("rx3", domain.RenewalExpired)
		require.Zero(t, w.scan().Revoked)
		w.filesExact("gx2", "rx2", "gx3", "rx3")
	})
}

// TestExpiryCutsARenewalWaitingInTheBatchSet: an approved renewal of a
// batching target waits in the batch set when its grant expires. The
// scan cuts it there, in the revocation's own transaction: out of the
// set (the next round claims only the removal), RENEW_EXPIRED, nothing
// upstream to undo (its approval is decided), and the grant's removal
// goes out in the round.
func TestExpiryCutsARenewalWaitingInTheBatchSet(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newRevokeWorld(t, st)
		w.admitted("bx1")
		require.Len(t, w.roundsUntilIdle(), 1)
		_, gb := w.until("bx1", "validated", at(domain.StepCalledBack, domain.BindingValidated))
		w.expireIn("bx1", time.Hour)
		w.renewOn("brx1", gb.Subject, tBatched, "bx1", true)
		w.until("brx1", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingRenewing))
		w.decide("brx1", "approve")
		w.until("brx1", "admitted", at(domain.StepCreateAdmitted, domain.BindingRenewing))
		w.expireRow(gb.Subject, tBatched)

		res := w.scan()
		require.Equal(t, 1, res.Revoked, "cut with the revocation, at once: %+v", res)
		require.Zero(t, res.Lapsed)
		o, err := st.OperationGet(t.Context(), "brx1")
		require.NoError(t, err)
		require.Equal(t, domain.StepRenewExpired, domain.StepStatus(o.Step))
		require.Empty(t, o.NextAction, "nothing upstream to undo for an approved renewal")
		var inSet int
		require.NoError(t, st.DB().QueryRowContext(t.Context(), "SELECT COUNT(*) FROM merge_batch_request WHERE operation_id = ?", "brx1").Scan(&inSet))
		require.Zero(t, inSet, "out of the batch set")
		w.renewalEndedOnce("brx1", domain.RenewalExpired)

		storetest.UntilAdmittedBeforeNow(t, st, domain.RevocationID("bx1"))
		rounds := w.roundsUntilIdle()
		require.Len(t, rounds, 1)
		require.Equal(t, 1, rounds[0].Members, "only the removal")
		w.until(domain.RevocationID("bx1"), "removed", at(domain.StepRevokeCalledBack, domain.BindingRevoked))
		w.revokedOnce("bx1")
		_, ok := w.entryOf(tBatched, gb.Subject)
		require.False(t, ok)
		require.Empty(t, w.mrsOf("brx1"), "the renewal never had an MR of its own")
		require.Zero(t, w.validations("brx1"))
		w.filesExact("bx1", "brx1")
	})
}

// TestExpiryLeavesARenewalInAClaimedBatchToItsBatch: the rule for a
// renewal a round has claimed. Its batch's MR carries another member's
// edit too and cannot lose one without being rebuilt, which would hold
// back the other member for a round; the approver said yes to the
// renewal. So the scan leaves it (nothing written, nothing revoked), the
// batch finishes, and merged wins: the renewal is in effect with its own
// expiry, the other member too, and no later scan revokes either.
func TestExpiryLeavesARenewalInAClaimedBatchToItsBatch(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newHeldPipelineWorld(t, st)
		w.admitted("bx2")
		require.Len(t, w.roundsUntilIdle(), 1)
		_, gb := w.until("bx2", "validated", at(domain.StepCalledBack, domain.BindingValidated))
		w.expireIn("bx2", time.Hour)
		w.renewOn("brx2", gb.Subject, tBatched, "bx2", true)
		w.until("brx2", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingRenewing))
		w.decide("brx2", "approve")
		w.until("brx2", "admitted", at(domain.StepCreateAdmitted, domain.BindingRenewing))
		w.admitted("bn2")
		// Expired before the round builds its MR (the entry on main is
		// rewritten to match, which must not conflict with the batch's).
		w.expireRow(gb.Subject, tBatched)
		r, iid := w.claimHeld(2, "brx2", "bn2")
		o, err := st.OperationGet(t.Context(), "brx2")
		require.NoError(t, err)
		require.Equal(t, r.BatchID, o.BatchID)

		res := w.scan()
		require.Zero(t, res.Revoked+res.Lapsed, "left to its batch: %+v", res)
		hist, err := st.OperationStepList(t.Context(), "brx2")
		require.NoError(t, err)
		for _, h := range hist {
			require.NotEqual(t, lifecycle.ExpiryActor, h.Actor, "the scan wrote nothing on the batch member: %+v", h)
		}
		// The batch's pipeline passes now: the batch finishes.
		code := w.simJSON(http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"mr_iid": iid, "outcome": "pass"}, nil)
		require.Equal(t, http.StatusOK, code)

		_, b := w.until("brx2", "in effect", at(domain.StepCalledBack, domain.BindingValidated))
		require.True(t, renewExpiry.Equal(b.ExpiresAt), "merged wins: the renewal's expiry")
		w.until("bn2", "in effect", at(domain.StepCalledBack, domain.BindingValidated))
		w.validatedOnce("brx2")
		w.validatedOnce("bn2")
		w.renewalEndedOnce("brx2", domain.RenewalInEffect)
		require.Zero(t, w.scan().Revoked, "nothing expired any more")
		_, err = st.OperationGet(t.Context(), domain.RevocationID("bx2"))
		require.ErrorIs(t, err, domain.ErrNotFound, "never revoked")
		w.filesExact("bx2", "brx2", "bn2")
	})
}

// TestExpiryScanRacingTheRenewalsMerge races the expiry scan against an
// approved renewal's own MR being approved and merged by the engine
// (goroutines; both databases), several times with the scan starting at
// different points of the merge. Each renewal ends in exactly one of two
// states: merged wins — in effect with its own expiry, its MR merged, its
// grant never revoked — or cut — RENEW_EXPIRED, its MR closed unmerged,
// the grant revoked and its entry removed. Never both, never neither, and
// the file on main agrees with the database.
func TestExpiryScanRacingTheRenewalsMerge(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newRevokeWorld(t, st)
		delays := []time.Duration{0, 5 * time.Millisecond, 20 * time.Millisecond, 60 * time.Millisecond, 150 * time.Millisecond}
		var ids []string
		outcomes := map[string]int{}
		for i, delay := range delays {
			g, r, subject := fmt.Sprintf("gxr%d", i), fmt.Sprintf("rxr%d", i), fmt.Sprintf("race-%d", i)
			ids = append(ids, g, r)
			w.granted(g, subject, tSingle)
			w.expireIn(g, time.Hour)
			w.renewOn(r, subject, tSingle, g, true)
			w.until(r, "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingRenewing))
			// Expired before the renewal's MR is built from main (the
			// entry there is rewritten to match, which must not conflict
			// with the MR); no scan runs until the race.
			w.expireRow(subject, tSingle)
			w.decide(r, "approve")
			w.until(r, "MR created", func(o store.Operation, _ store.Binding) bool { return o.MRIID != 0 })

			var (
				wg   sync.WaitGroup
				stop atomic.Bool
			)
			wg.Go(func() { // the engine: pipeline, bots' approvals, merge
				for !stop.Load() {
					_, _ = w.eng.RunDue(t.Context())
					time.Sleep(time.Millisecond)
				}
			})
			wg.Go(func() {
				defer stop.Store(true)
				time.Sleep(delay)
				for range 3 {
					_, _ = w.expiry.ScanOnce(t.Context())
				}
			})
			wg.Wait()

			// Cut: the withdrawal handed the row back to the grant — or,
			// when a racing scan then revoked the grant, the row is its
			// revocation's already (checked below to the end).
			o, b := w.until(r, "merged or cut", func(o store.Operation, b store.Binding) bool {
				step := domain.StepStatus(o.Step)
				return o.LeaseOwner == "" && (step == domain.StepCalledBack && b.Status == domain.BindingValidated ||
					step == domain.StepRenewExpired && o.NextAction == "" && (b.OperationID == g || b.OperationID == domain.RevocationID(g)))
			})
			mrs := w.mrsOf(r)
			require.Len(t, mrs, 1, "%s: one MR", r)
			if domain.StepStatus(o.Step) == domain.StepCalledBack {
				outcomes["merged wins"]++
				require.Equal(t, "merged", mrs[0]["state"], r)
				require.Equal(t, r, b.OperationID)
				require.True(t, renewExpiry.Equal(b.ExpiresAt), "%s: the renewal's expiry", r)
				w.validatedOnce(r)
				w.renewalEndedOnce(r, domain.RenewalInEffect)
				require.Zero(t, w.scan().Revoked, "%s: in effect, nothing to revoke", r)
				_, err := st.OperationGet(t.Context(), domain.RevocationID(g))
				require.ErrorIs(t, err, domain.ErrNotFound, "%s: renewed, never revoked", g)
				continue
			}
			outcomes["cut"]++
			require.Equal(t, "closed", mrs[0]["state"], r)
			require.Zero(t, w.validations(r), "%s: cut, never in effect", r)
			// The racing scans may have revoked the grant already, once
			// the withdrawal had handed the row back.
			if _, err := st.OperationGet(t.Context(), domain.RevocationID(g)); errors.Is(err, domain.ErrNotFound) {
				require.Equal(t, 1, w.scan().Revoked, "%s: the expired grant is revoked", g)
			}
			w.until(domain.RevocationID(g), "removed", at(domain.StepRevokeCalledBack, domain.BindingRevoked))
			w.revokedOnce(g)
			_, ok := w.entryOf(tSingle, subject)
			require.False(t, ok, "%s's entry is gone from main", subject)
			w.renewalEndedOnce(r, domain.RenewalExpired)
		}
		t.Logf("outcomes: %v", outcomes)
		w.filesExact(ids...)
	})
}

// TestExpiryCutsARenewalOnceItsBatchFailed: the other half of the batch
// rule. The scan leaves a claimed renewal to its batch; the batch's check
// pipeline fails, so the batch ends without merging and its member is no
// longer in an active batch (operation.batch_id still names it). The next
// scan cuts the renewal from where settlement left it, and the grant is
// revoked and its entry removed.
func TestExpiryCutsARenewalOnceItsBatchFailed(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newHeldPipelineWorld(t, st)
		w.admitted("bx3")
		require.Len(t, w.roundsUntilIdle(), 1)
		_, gb := w.until("bx3", "validated", at(domain.StepCalledBack, domain.BindingValidated))
		w.expireIn("bx3", time.Hour)
		w.renewOn("brx3", gb.Subject, tBatched, "bx3", true)
		w.until("brx3", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingRenewing))
		w.decide("brx3", "approve")
		w.until("brx3", "admitted", at(domain.StepCreateAdmitted, domain.BindingRenewing))
		w.expireRow(gb.Subject, tBatched)
		r, iid := w.claimHeld(1, "brx3")
		res := w.scan()
		require.Zero(t, res.Revoked+res.Lapsed, "left to its batch: %+v", res)

		code := w.simJSON(http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"mr_iid": iid, "outcome": "fail"}, nil)
		require.Equal(t, http.StatusOK, code)
		// Out of its batch once the batch is settled: a batch of one stops
		// its member at CREATE_PIPELINE_FAILED first and settles in the
		// batch_settle action after it (seen in CI: the scan ran between
		// the two and rightly left the renewal to its still-running batch).
		o, _ := w.until("brx3", "out of its batch", func(o store.Operation, _ store.Binding) bool {
			step := domain.StepStatus(o.Step)
			b, err := st.BatchGet(t.Context(), r.BatchID)
			require.NoError(t, err)
			return o.LeaseOwner == "" && (step == domain.StepCreateAdmitted || step.Stopped()) && !b.Status.Active()
		})
		t.Logf("after the batch: %s", domain.StepStatus(o.Step))
		res = w.scan()
		require.Equal(t, 1, res.Revoked+res.Lapsed, "cut once its batch is over: %+v", res)
		if res.Lapsed == 1 {
			// Stopped: withdrawn, the row back with the grant, then revoked.
			w.until("brx3", "withdrawn, the row back with the grant", func(o store.Operation, b store.Binding) bool {
				return domain.StepStatus(o.Step) == domain.StepRenewExpired && o.NextAction == "" && o.LeaseOwner == "" && b.OperationID == "bx3"
			})
			require.Equal(t, 1, w.scan().Revoked)
		}
		storetest.UntilAdmittedBeforeNow(t, st, domain.RevocationID("bx3"))
		w.roundsUntilIdle()
		w.until(domain.RevocationID("bx3"), "removed", at(domain.StepRevokeCalledBack, domain.BindingRevoked))
		w.revokedOnce("bx3")
		_, ok := w.entryOf(tBatched, gb.Subject)
		require.False(t, ok)
		w.renewalEndedOnce("brx3", domain.RenewalExpired)
		require.Zero(t, w.validations("brx3"))
		w.filesExact("bx3", "brx3")
	})
}
