package workflow_test

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/approval"
	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/batch"
	"changeflow/internal/workflow/lifecycle"
)

// revokedWithRenewalCut: grant's access was removed and deployed by its
// revocation, and renewal r ended at step without ever touching main.
func (w *revokeWorld) revokedWithRenewalCut(grant, r string, step domain.StepStatus, subject, target string) {
	w.t.Helper()
	w.until(domain.RevocationID(grant), "removed", at(domain.StepRevokeCalledBack, domain.BindingRevoked))
	w.revokedOnce(grant)
	o, _ := w.until(r, "cut off", func(o store.Operation, _ store.Binding) bool {
		return domain.StepStatus(o.Step) == step && o.NextAction == "" && o.LeaseOwner == ""
	})
	require.Zero(w.t, o.MRIID, "the renewal never opened an MR")
	require.Zero(w.t, w.validations(r))
	_, ok := w.entryOf(target, subject)
	require.False(w.t, ok, "the entry is gone from main")
}

// renewalsAdmitted makes each grant's access in effect, expiring in an
// hour, and its renewal r<prefix><i> approved into the batch set; it
// returns the grants' subjects and expiries.
func (w *revokeWorld) renewalsAdmitted(prefix string, grants ...string) (subjects []string, untils []time.Time) {
	w.t.Helper()
	for i, g := range grants {
		_, b := w.until(g, "validated", at(domain.StepCalledBack, domain.BindingValidated))
		untils = append(untils, w.expireIn(g, time.Hour))
		subjects = append(subjects, b.Subject)
		r := fmt.Sprintf("%s%d", prefix, i+1)
		w.mustRenew(r, b.Subject, tBatched, g)
		w.until(r, "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingRenewing))
		w.decide(r, "approve")
		w.until(r, "admitted", at(domain.StepCreateAdmitted, domain.BindingRenewing))
	}
	return subjects, untils
}

// newHeldPipelineWorld is a revokeWorld whose pipeline polls wait long
// enough for a check pipeline the test holds on purpose (claimHeld).
func newHeldPipelineWorld(t *testing.T, st *store.Store) *revokeWorld {
	w := newRevokeWorld(t, st)
	ov := e2eOverlay(w.simTS.URL)
	ov["polling.pipeline.timeout"] = "2m"
	w.load(ov)
	return w
}

// claimHeld runs one round over the waiting ids with the batch's check
// pipeline held (it never finishes until the test says), and returns the
// round and its MR's iid.
func (w *revokeWorld) claimHeld(members int, ids ...string) (batch.RoundResult, any) {
	w.t.Helper()
	storetest.UntilAdmittedBeforeNow(w.t, w.st, ids...)
	require.Equal(w.t, http.StatusOK, w.simJSON(http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"outcome": "never", "count": 1}, nil))
	r, err := w.rounds.RunRound(w.t.Context(), 1)
	require.NoError(w.t, err)
	require.Equal(w.t, "CLAIMED", r.Outcome)
	require.Equal(w.t, members, r.Members)
	var mrs []map[string]any
	require.Eventually(w.t, func() bool { mrs = w.batchMRs(r.BatchID); return len(mrs) == 1 }, 30*time.Second, 10*time.Millisecond, "the batch's MR")
	return r, mrs[0]["iid"]
}

// TestGiveBackWhileARenewalWaitsForItsApproval: ending the access wins
// over extending it. The owner gives the access back while its renewal
// waits for its approval: in one transaction the renewal is cut off
// (RENEW_REVOKED) and the grant's revocation takes the row; the
// renewal's approval is withdrawn upstream once; the removal is merged
// and deployed (REVOKED once); a late approval callback is stale.
func TestGiveBackWhileARenewalWaitsForItsApproval(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newRevokeWorld(t, st)
		w.granted("gg1", "amy", tSingle)
		w.expireIn("gg1", 2*time.Hour)
		w.mustRenew("rg1", "amy", tSingle, "gg1")
		w.until("rg1", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingRenewing))

		res, err := revoker(w.deps).Revoke(t.Context(), "gg1", domain.RevokeGivenBack, "given back by its owner", "amy")
		require.NoError(t, err)
		require.True(t, res.Created)
		require.Equal(t, domain.RevocationID("gg1"), res.OperationID)
		again, err := revoker(w.deps).Revoke(t.Context(), "gg1", domain.RevokeGivenBack, "given back by its owner", "amy")
		require.NoError(t, err)
		require.False(t, again.Created, "a second give-back answers the revocation")
		w.eng.Wake()
		w.revokedWithRenewalCut("gg1", "rg1", domain.StepRenewRevoked, "amy", tSingle)

		as := w.approvalsOf("rg1")
		require.Len(t, as, 1)
		require.Equal(t, approval.Withdrawn, as[0].Status)
		require.Equal(t, 1, w.withdrawCalls(as[0].ApprovalID))
		w.postCallback("/callbacks/approval", map[string]any{"requestId": "late-rg1", "approvalId": as[0].ApprovalID,
			"operationId": "rg1", "result": "APPROVED", "ext": map[string]any{}})
		rec, ok, err := st.ApprovalCallbackLatest(t.Context(), "rg1")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, store.InboxStale, rec.Disposition)
		o, err := st.OperationGet(t.Context(), "rg1")
		require.NoError(t, err)
		require.Equal(t, domain.StepRenewRevoked, domain.StepStatus(o.Step))
		require.Equal(t, 1, w.created[domain.RevokeGivenBack])
		w.renewalEndedOnce("rg1", domain.RenewalClosed)
		w.filesExact("gg1", "rg1")
	})
}

// TestOperatorRevokesWhileARenewalWaitsInTheBatchSet: an operator revokes
// an access whose approved renewal waits in the batch set: the renewal
// leaves the set (RENEW_REVOKED) and the revocation takes its place; the
// round's MR removes the grant's entry. A renewal already claimed by a
// round is past that point: the revocation is refused with what to do,
// nothing changes, and once the renewal is in effect it can be revoked.
func TestOperatorRevokesWhileARenewalWaitsInTheBatchSet(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newRevokeWorld(t, st)
		w.admitted("go1", "go2")
		require.Len(t, w.roundsUntilIdle(), 1)
		subjects, _ := w.renewalsAdmitted("ro", "go1", "go2")

		res, err := revoker(w.deps).Revoke(t.Context(), "go1", domain.RevokeOperator, "left the team", "ops-olga")
		require.NoError(t, err)
		require.True(t, res.Created)
		o, err := st.OperationGet(t.Context(), "ro1")
		require.NoError(t, err)
		require.Equal(t, domain.StepRenewRevoked, domain.StepStatus(o.Step), "cut off")
		var inSet int
		require.NoError(t, st.DB().QueryRowContext(t.Context(), "SELECT COUNT(*) FROM merge_batch_request WHERE operation_id = ?", "ro1").Scan(&inSet))
		require.Zero(t, inSet, "out of the batch set")

		// ro2 is claimed by the round (with go1's removal): too late.
		storetest.UntilAdmittedBeforeNow(t, st, "ro2", domain.RevocationID("go1"))
		r, err := w.rounds.RunRound(t.Context(), 1)
		require.NoError(t, err)
		require.Equal(t, "CLAIMED", r.Outcome)
		require.Equal(t, 2, r.Members, "the renewal still waiting and the removal")
		_, err = revoker(w.deps).Revoke(t.Context(), "go2", domain.RevokeOperator, "left the team", "ops-olga")
		var under *lifecycle.RenewalUnderWayError
		require.ErrorAs(t, err, &under)
		require.Equal(t, "ro2", under.Renewal)
		require.Contains(t, under.Advice, "wait until it is in effect")
		_, err = st.OperationGet(t.Context(), domain.RevocationID("go2"))
		require.ErrorIs(t, err, domain.ErrNotFound, "nothing was written")

		w.roundsUntilIdle()
		w.revokedWithRenewalCut("go1", "ro1", domain.StepRenewRevoked, subjects[0], tBatched)
		w.until("ro2", "in effect", at(domain.StepCalledBack, domain.BindingValidated))
		w.renewalEndedOnce("ro1", domain.RenewalClosed)
		w.renewalEndedOnce("ro2", domain.RenewalInEffect)
		// In effect now: revoking the renewal ends the access.
		res, err = revoker(w.deps).Revoke(t.Context(), "ro2", domain.RevokeOperator, "left the team", "ops-olga")
		require.NoError(t, err)
		require.True(t, res.Created)
		w.roundsUntilIdle()
		w.until(domain.RevocationID("ro2"), "removed", at(domain.StepRevokeCalledBack, domain.BindingRevoked))
		_, ok := w.entryOf(tBatched, subjects[1])
		require.False(t, ok)
		require.Empty(t, w.approvalsOf(domain.RevocationID("go1")), "no approval is asked to lose access")
		w.filesExact("go1", "go2", "ro1", "ro2")
	})
}

// TestGiveBackWhileARenewalsMRIsOpen: the renewal's own MR is open: the
// give-back is refused (409 on the API) saying to withdraw the renewal
// first; nothing changes. Withdrawn, the access is the grant's again and
// the give-back then removes it.
func TestGiveBackWhileARenewalsMRIsOpen(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newRevokeWorld(t, st)
		w.granted("gm1", "cleo", tSingle)
		until := w.expireIn("gm1", 2*time.Hour)
		require.Equal(t, http.StatusOK, w.simJSON(http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"outcome": "never", "count": 1}, nil))
		w.mustRenew("rm1", "cleo", tSingle, "gm1")
		w.until("rm1", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingRenewing))
		w.decide("rm1", "approve")
		w.until("rm1", "MR open", at(domain.StepCreatePipelineRunning, domain.BindingRenewing))

		_, err := revoker(w.deps).Revoke(t.Context(), "gm1", domain.RevokeGivenBack, "given back by its owner", "cleo")
		var under *lifecycle.RenewalUnderWayError
		require.ErrorAs(t, err, &under)
		require.Contains(t, under.Advice, "withdraw the renewal first (POST /api/requests/rm1/withdraw)")
		w.accessUnchanged("cleo", tSingle, "gm1", until)

		w.withdrawRenewal("rm1")
		w.backWithGrant("rm1", domain.StepCloseRequesterWithdrawn, "cleo", tSingle, "gm1", until)
		w.renewalEndedOnce("rm1", domain.RenewalClosed)
		res, err := revoker(w.deps).Revoke(t.Context(), "gm1", domain.RevokeGivenBack, "given back by its owner", "cleo")
		require.NoError(t, err)
		require.True(t, res.Created)
		w.eng.Wake()
		w.until(domain.RevocationID("gm1"), "removed", at(domain.StepRevokeCalledBack, domain.BindingRevoked))
		w.revokedOnce("gm1")
		w.filesExact("gm1", "rm1")
	})
}

// TestGiveBackRacingTheRenewalsApproval races, for two grants at once
// (each on a file of its own: removals and renewals of one file would
// only add rebases between their single-request MRs), the owner's give-back against the approval callback of the
// grant's renewal (goroutines; both databases). Each grant ends in one of
// two consistent states: the give-back won — the renewal RENEW_REVOKED,
// the approval's callback stale, the grant's entry removed — or the
// approval won — the give-back refused (the renewal's MR is under way),
// the renewal in effect; given back then, it is removed. Never both, never
// neither, and the files on main match the database.
func TestGiveBackRacingTheRenewalsApproval(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newRevokeWorld(t, st)
		targets := []string{tSingle, tOther}
		n := len(targets)
		var grants, renewals, subjects []string
		for i := range n {
			g, r, s := fmt.Sprintf("gr%d", i), fmt.Sprintf("rr%d", i), fmt.Sprintf("racer%d", i)
			w.granted(g, s, targets[i])
			w.expireIn(g, 2*time.Hour)
			w.mustRenew(r, s, targets[i], g)
			w.until(r, "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingRenewing))
			grants, renewals, subjects = append(grants, g), append(renewals, r), append(subjects, s)
		}
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Add(2)
			go func() {
				defer wg.Done()
				<-start
				decideNoFatal(w, renewals[i])
			}()
			go func() {
				defer wg.Done()
				<-start
				_, errs[i] = revoker(w.deps).Revoke(t.Context(), grants[i], domain.RevokeGivenBack, "given back by its owner", subjects[i])
			}()
		}
		close(start)
		wg.Wait()
		w.eng.Wake()
		won := 0
		for i := range n {
			var under *lifecycle.RenewalUnderWayError
			switch {
			case errs[i] == nil:
				won++
				w.revokedWithRenewalCut(grants[i], renewals[i], domain.StepRenewRevoked, subjects[i], targets[i])
			case errors.As(errs[i], &under):
				_, err := st.OperationGet(t.Context(), domain.RevocationID(grants[i]))
				require.ErrorIs(t, err, domain.ErrNotFound, "%s: refused, nothing written", grants[i])
				w.until(renewals[i], "in effect", at(domain.StepCalledBack, domain.BindingValidated))
				w.validatedOnce(renewals[i])
				res, err := revoker(w.deps).Revoke(t.Context(), renewals[i], domain.RevokeGivenBack, "given back by its owner", subjects[i])
				require.NoError(t, err)
				require.True(t, res.Created)
				w.eng.Wake()
				w.until(domain.RevocationID(renewals[i]), "removed", at(domain.StepRevokeCalledBack, domain.BindingRevoked))
			default:
				t.Fatalf("%s: %v", grants[i], errs[i])
			}
			_, ok := w.entryOf(targets[i], subjects[i])
			require.False(t, ok, "%s: removed in the end", grants[i])
		}
		w.filesExact(append(grants, renewals...)...)
		t.Logf("outcomes: %d given back before the approval, %d after the renewal", won, n-won)
	})
}

// TestGiveBackWhileARenewalWaitsAgainAfterItsBatchFailed: a renewal was
// claimed into a batch whose check pipeline failed; settlement put it back
// in the batch set (operation.batch_id still names the failed batch). It
// waits there exactly as a renewal never claimed does, so giving the
// access back cuts it off and removes the grant's entry — it was refused
// as "claimed into a batch" while only the stale batch id said so.
func TestGiveBackWhileARenewalWaitsAgainAfterItsBatchFailed(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newHeldPipelineWorld(t, st)
		w.admitted("gf1", "gf2")
		require.Len(t, w.roundsUntilIdle(), 1)
		subjects, _ := w.renewalsAdmitted("rf", "gf1", "gf2")
		r, iid := w.claimHeld(2, "rf1", "rf2")
		require.Equal(t, http.StatusOK, w.simJSON(http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"mr_iid": iid, "outcome": "fail"}, nil))

		// The failed batch of two is not a culprit's: both wait again.
		var back []string
		for _, id := range []string{"rf1", "rf2"} {
			o, _ := w.until(id, "back in the batch set", func(o store.Operation, _ store.Binding) bool {
				// Only once the batch is settled: its driver stops first
				// and settles in the batch_settle action after it.
				b, err := st.BatchGet(t.Context(), r.BatchID)
				require.NoError(t, err)
				return o.LeaseOwner == "" && (domain.StepStatus(o.Step) == domain.StepCreateAdmitted || domain.StepStatus(o.Step).Stopped()) && !b.Status.Active()
			})
			if domain.StepStatus(o.Step) == domain.StepCreateAdmitted {
				require.Equal(t, r.BatchID, o.BatchID, "%s: the batch id of the failed batch stays on the row", id)
				back = append(back, id)
			}
		}
		require.NotEmpty(t, back, "no member went back to the batch set")
		renewal := back[0]
		grant := map[string]string{"rf1": "gf1", "rf2": "gf2"}[renewal]
		subject := subjects[map[string]int{"rf1": 0, "rf2": 1}[renewal]]

		res, err := revoker(w.deps).Revoke(t.Context(), grant, domain.RevokeGivenBack, "", subject)
		require.NoError(t, err, "a renewal waiting in the batch set again is cut off, as one never claimed is")
		require.True(t, res.Created)
		o, err := st.OperationGet(t.Context(), renewal)
		require.NoError(t, err)
		require.Equal(t, domain.StepRenewRevoked, domain.StepStatus(o.Step), "cut off")

		storetest.UntilAdmittedBeforeNow(t, st, domain.RevocationID(grant))
		w.roundsUntilIdle()
		w.until(domain.RevocationID(grant), "removed", at(domain.StepRevokeCalledBack, domain.BindingRevoked))
		w.revokedOnce(grant)
		_, ok := w.entryOf(tBatched, subject)
		require.False(t, ok, "the entry is gone from main")
		require.Zero(t, w.validations(renewal))
		w.renewalEndedOnce(renewal, domain.RenewalClosed)
		w.filesExact("gf1", "gf2", "rf1", "rf2")
	})
}
