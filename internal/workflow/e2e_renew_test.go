package workflow_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/approval"
	"changeflow/internal/bindingfile"
	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/flow"
)

// renewExpiry is the renewal's own expiry in these tests (the grants'
// is moved close to now by expireIn).
var renewExpiry = time.Date(2032, 5, 6, 7, 8, 9, 0, time.UTC)

// expireIn moves the expiry of id's binding (and of its entry on main)
// to d from now by the database clock: inside its renewal window.
func (w *revokeWorld) expireIn(id string, d time.Duration) time.Time {
	w.t.Helper()
	at, arg := w.st.Dialect().NowAdd(d)
	_, err := w.st.DB().ExecContext(w.t.Context(), "UPDATE binding SET expires_at = "+at+" WHERE operation_id = ?", arg, id)
	require.NoError(w.t, err)
	b, err := w.st.BindingGetByOperation(w.t.Context(), id)
	require.NoError(w.t, err)
	// The grant's operation says the same expiry (the view and the
	// window read it from there).
	_, err = w.st.DB().ExecContext(w.t.Context(), "UPDATE operation SET expires_at = ? WHERE operation_id = ?", w.st.Dialect().Time(b.ExpiresAt), id)
	require.NoError(w.t, err)
	f, err := bindingfile.Parse([]byte(w.fileOnMain(b.TargetKey)))
	require.NoError(w.t, err)
	e, ok := f.Entry(b.Subject)
	require.True(w.t, ok)
	e.ExpiresAt = b.ExpiresAt
	w.commitOnMain("update", b.TargetKey, string(f.With(e).Marshal()))
	return b.ExpiresAt
}

// expireRow moves the expiry of subject's binding on target (whoever owns
// it: a renewal in flight) and of the grant's entry on main an hour into
// the past (database clock).
func (w *revokeWorld) expireRow(subject, target string) {
	w.t.Helper()
	past, arg := w.st.Dialect().NowAdd(-time.Hour)
	_, err := w.st.DB().ExecContext(w.t.Context(), "UPDATE binding SET expires_at = "+past+" WHERE subject_id = ? AND target_key = ?", arg, subject, target)
	require.NoError(w.t, err)
	b, err := w.st.BindingGet(w.t.Context(), subject, target)
	require.NoError(w.t, err)
	f, err := bindingfile.Parse([]byte(w.fileOnMain(target)))
	require.NoError(w.t, err)
	e, ok := f.Entry(subject)
	require.True(w.t, ok)
	e.ExpiresAt = b.ExpiresAt
	w.commitOnMain("update", target, string(f.With(e).Marshal()))
}

// renew submits id as a re-application of subject for target, as the
// HTTP submit does, with the default renewal window.
func (w *revokeWorld) renew(id, subject, target string) (store.OperationSubmitResult, error) {
	w.t.Helper()
	entry := flow.Entry(true)
	res, err := w.st.OperationSubmit(w.t.Context(), store.OperationSubmitParams{
		Operation: store.OperationCreateParams{
			OperationID: id, Subject: subject, TargetKey: target, ProjectID: 1, Flow: entry.Flow,
			Step: int(entry.Step), Reason: "renew", Days: 7, ExpiresAt: renewExpiry, Actor: subject, NextAction: entry.Action,
		},
		BindingStatus: entry.Binding,
		Renew:         &domain.RenewWindow{Percent: 25, Min: 24 * time.Hour},
	})
	if err == nil && w.eng != nil {
		w.eng.Wake()
	}
	return res, err
}

// mustRenew is renew that must be accepted as a renewal of grant.
func (w *revokeWorld) mustRenew(id, subject, target, grant string) {
	w.t.Helper()
	res, err := w.renew(id, subject, target)
	require.NoError(w.t, err)
	require.Equal(w.t, grant, res.Application.Renews)
	require.Equal(w.t, domain.OperationRenew, res.Operation.Kind)
	require.Equal(w.t, domain.BindingRenewing, res.Application.Binding.Status)
}

// accessUnchanged: subject's access on target is exactly grant's as it
// was — the binding in effect with its expiry, the entry on main.
func (w *revokeWorld) accessUnchanged(subject, target, owner string, until time.Time) {
	w.t.Helper()
	b, err := w.st.BindingGet(w.t.Context(), subject, target)
	require.NoError(w.t, err)
	require.Contains(w.t, []domain.BindingStatus{domain.BindingValidated, domain.BindingRenewing}, b.Status)
	require.True(w.t, until.Equal(b.ExpiresAt), "expiry %s, want %s", b.ExpiresAt, until)
	e, ok := w.entryOf(target, subject)
	require.True(w.t, ok, "the entry is on main")
	require.Equal(w.t, owner, e.OperationID)
	require.True(w.t, until.Truncate(time.Second).Equal(e.ExpiresAt), "entry expiry %s, want %s", e.ExpiresAt, until)
}

// TestRenewalApprovedMovesTheExpiry: a grant in its renewal window is
// re-applied for; until the renewal is deployed the access is exactly as
// it was (binding in effect, same expiry, the grant's entry on main);
// approved, merged by one MR and deployed, the entry and the binding
// carry the renewal's expiry. Outside the window the re-application is
// refused ALREADY_IN_EFFECT.
func TestRenewalApprovedMovesTheExpiry(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newRevokeWorld(t, st)
		w.granted("g1", "amy", tSingle)

		// Outside the window (the grant ends in 2031): refused, nothing stored.
		_, err := w.renew("g1-early", "amy", tSingle)
		var refused *store.BindingRefusedError
		require.ErrorAs(t, err, &refused)
		require.Equal(t, domain.CodeAlreadyInEffect, refused.Code())
		_, err = st.OperationGet(t.Context(), "g1-early")
		require.ErrorIs(t, err, domain.ErrNotFound)

		until := w.expireIn("g1", 2*time.Hour)
		w.mustRenew("r1", "amy", tSingle, "g1")
		w.accessUnchanged("amy", tSingle, "g1", until)
		w.filesExact("g1", "r1")
		// A second re-application meanwhile is in progress.
		_, err = w.renew("r1-twice", "amy", tSingle)
		require.ErrorAs(t, err, &refused)
		require.Equal(t, domain.CodeRequestInProgress, refused.Code())

		w.until("r1", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingRenewing))
		w.accessUnchanged("amy", tSingle, "g1", until)
		w.decide("r1", "approve")
		w.until("r1", "merged", func(o store.Operation, b store.Binding) bool {
			return domain.StepStatus(o.Step) == domain.StepHandleMerged || domain.StepStatus(o.Step) == domain.StepCalledBack
		})
		o, b := w.until("r1", "in effect", at(domain.StepCalledBack, domain.BindingValidated))
		require.Equal(t, "r1", b.OperationID)
		require.True(t, renewExpiry.Equal(b.ExpiresAt), "the binding carries the renewal's expiry, got %s", b.ExpiresAt)
		require.NotZero(t, o.MRIID)
		require.Len(t, w.mrsOf("r1"), 1, "one MR")
		e, ok := w.entryOf(tSingle, "amy")
		require.True(t, ok)
		require.Equal(t, "r1", e.OperationID)
		require.True(t, renewExpiry.Equal(e.ExpiresAt), "entry expiry %s", e.ExpiresAt)
		w.validatedOnce("r1")
		w.filesExact("g1", "r1")
		require.Zero(t, w.scan().Revoked, "nothing expired")
	})
}

// TestRenewalRejectedLeavesAccessUnchanged: the approval says no; the
// binding goes back to the grant, VALIDATED with its own expiry, the file
// is untouched, no MR was opened — and the grant can be renewed again.
func TestRenewalRejectedLeavesAccessUnchanged(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newRevokeWorld(t, st)
		w.granted("g2", "ben", tSingle)
		until := w.expireIn("g2", 3*time.Hour)
		before := w.fileOnMain(tSingle)
		w.mustRenew("r2", "ben", tSingle, "g2")
		w.until("r2", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingRenewing))
		w.decide("r2", "reject")
		_, b := w.until("r2", "rejected", at(domain.StepCloseRejected, ""))
		require.Equal(t, domain.BindingValidated, b.Status)
		require.Equal(t, "g2", b.OperationID, "the row is the grant's again")
		w.accessUnchanged("ben", tSingle, "g2", until)
		require.Equal(t, before, w.fileOnMain(tSingle), "the file is untouched")
		require.Empty(t, w.mrsOf("r2"), "no MR for a rejected renewal")
		require.Zero(t, w.validations("r2"))
		w.filesExact("g2", "r2")

		// Renewable again, and this time it lands.
		w.mustRenew("r2b", "ben", tSingle, "g2")
		w.until("r2b", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingRenewing))
		w.decide("r2b", "approve")
		w.until("r2b", "in effect", at(domain.StepCalledBack, domain.BindingValidated))
		w.filesExact("g2", "r2", "r2b")
	})
}

// TestRenewalInABatchRound: on a batching target a renewal is admitted
// after its approval like a grant and goes out in the project's round
// with a new grant: one MR replaces the renewed entry and adds the new
// one.
func TestRenewalInABatchRound(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newRevokeWorld(t, st)
		w.admitted("bg")
		require.Len(t, w.roundsUntilIdle(), 1)
		_, gb := w.until("bg", "validated", at(domain.StepCalledBack, domain.BindingValidated))
		until := w.expireIn("bg", time.Hour)
		w.mustRenew("br", gb.Subject, tBatched, "bg")
		w.until("br", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingRenewing))
		w.decide("br", "approve")
		w.until("br", "admitted", at(domain.StepCreateAdmitted, domain.BindingRenewing))
		w.accessUnchanged(gb.Subject, tBatched, "bg", until)
		w.admitted("bn")
		storetest.UntilAdmittedBeforeNow(t, st, "br", "bn")
		rounds := w.roundsUntilIdle()
		require.Len(t, rounds, 1, "one round, one MR")
		require.Equal(t, 2, rounds[0].Members)
		require.Len(t, w.batchMRs(rounds[0].BatchID), 1)
		_, b := w.until("br", "in effect", at(domain.StepCalledBack, domain.BindingValidated))
		require.True(t, renewExpiry.Equal(b.ExpiresAt))
		w.until("bn", "in effect", at(domain.StepCalledBack, domain.BindingValidated))
		w.validatedOnce("br")
		w.filesExact("bg", "br", "bn")
	})
}

// TestRenewalUndecidedAtExpiryIsCutOff: the grant expires while its
// renewal still waits for the approval. Expiry wins: the scan revokes
// the grant and closes the renewal (RENEW_EXPIRED) with its withdraw
// action due, which withdraws the approval in the approval system —
// once, durably (an engine step), so nobody is left asked to decide it;
// the removal is merged and deployed; an approval callback arriving
// afterwards changes nothing.
func TestRenewalUndecidedAtExpiryIsCutOff(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newRevokeWorld(t, st)
		w.granted("g3", "cleo", tSingle)
		w.expireIn("g3", time.Hour)
		w.mustRenew("r3", "cleo", tSingle, "g3")
		w.until("r3", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingRenewing))
		w.expireRow("cleo", tSingle)
		// The scan wakes the engine, whose withdraw step could finish
		// before the read below and clear the action it proves durable:
		// the approval system holds its answer to that one withdrawal
		// (it withdraws first), so the action is still the row's while
		// the step runs.
		require.Equal(t, http.StatusOK, w.simJSON(http.MethodPost, "/approval/_control/faults",
			map[string]any{"holdWithdrawsNext": map[string]any{"count": 1, "delayMs": 2000}}, nil))
		require.Equal(t, 1, w.scan().Revoked)
		o, err := st.OperationGet(t.Context(), "r3")
		require.NoError(t, err)
		require.Equal(t, domain.StepRenewExpired, domain.StepStatus(o.Step))
		require.Equal(t, flow.ActionWithdraw, o.NextAction, "the approval's withdrawal is an engine step")
		require.False(t, o.DueAt.IsZero())
		rev := domain.RevocationID("g3")
		w.until(rev, "removed", at(domain.StepRevokeCalledBack, domain.BindingRevoked))
		w.revokedOnce("g3")
		_, ok := w.entryOf(tSingle, "cleo")
		require.False(t, ok)
		w.until("r3", "approval withdrawn", func(o store.Operation, _ store.Binding) bool {
			return domain.StepStatus(o.Step) == domain.StepRenewExpired && o.NextAction == "" && o.LeaseOwner == ""
		})
		as := w.approvalsOf("r3")
		require.Len(t, as, 1)
		require.Equal(t, approval.Withdrawn, as[0].Status, "withdrawn in the approval system")
		require.Equal(t, 1, w.withdrawCalls(as[0].ApprovalID), "withdrawn once")
		code := w.simJSON(http.MethodPost, "/approval/_control/approvals/"+as[0].ApprovalID+"/approve", map[string]any{}, nil)
		require.Equal(t, http.StatusConflict, code, "a withdrawn approval can no longer be decided")
		// A callback that was on its way before the withdrawal: stale.
		w.postCallback("/callbacks/approval", map[string]any{"requestId": "late-r3", "approvalId": as[0].ApprovalID,
			"operationId": "r3", "result": "APPROVED", "ext": map[string]any{}})
		rec, found, err := st.ApprovalCallbackLatest(t.Context(), "r3")
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, store.InboxStale, rec.Disposition)
		o, err = st.OperationGet(t.Context(), "r3")
		require.NoError(t, err)
		require.Equal(t, domain.StepRenewExpired, domain.StepStatus(o.Step), "a late approval moves nothing")
		require.Empty(t, w.mrsOf("r3"))
		w.filesExact("g3", "r3")
	})
}

// TestRenewalRacingTheExpiryScan races, for several grants at once, the
// renewals' approvals against expiry scans that find the grants expired
// (goroutines; both databases). Each grant ends in one of two consistent
// states — the renewal took effect (its expiry, no revocation) or the
// revocation took the row (the renewal RENEW_EXPIRED, the entry removed)
// — and the file on main agrees with the database. The target batches,
// so the renewals and removals that follow go out in the project's
// rounds (one MR each) rather than in MRs that conflict with each other.
func TestRenewalRacingTheExpiryScan(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newRevokeWorld(t, st)
		ov := e2eOverlay(w.simTS.URL)
		ov["expiry.chunkSize"] = 1
		w.load(ov)
		const n = 6
		var grants, renewals, subjects []string
		for i := range n {
			grants = append(grants, fmt.Sprintf("rg%d", i))
		}
		w.admitted(grants...)
		w.roundsUntilIdle()
		for i, g := range grants {
			_, b := w.until(g, "validated", at(domain.StepCalledBack, domain.BindingValidated))
			w.expireIn(g, time.Hour)
			r := fmt.Sprintf("rr%d", i)
			w.mustRenew(r, b.Subject, tBatched, g)
			w.until(r, "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingRenewing))
			renewals, subjects = append(renewals, r), append(subjects, b.Subject)
		}
		for _, s := range subjects {
			w.expireRow(s, tBatched)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			for _, r := range renewals {
				decideNoFatal(w, r)
			}
		}()
		go func() {
			defer wg.Done()
			<-start
			// One renewal's approval landing between a scan's read and
			// its write rolls the whole chunk back: chunks of one
			// (expiry.chunkSize), so the grants are decided one by one
			// as the approvals arrive.
			for range 2 * n {
				_, _ = w.expiry.ScanOnce(t.Context())
			}
		}()
		close(start)
		wg.Wait()
		// Settle: whatever was neither approved nor cut yet is cut by one
		// more scan; then the rounds take renewals and removals out.
		w.scan()
		for _, r := range renewals {
			w.until(r, "approved or cut off", func(o store.Operation, b store.Binding) bool {
				step := domain.StepStatus(o.Step)
				return o.LeaseOwner == "" && (step == domain.StepRenewExpired || step == domain.StepCreateAdmitted)
			})
		}
		storetest.UntilAdmittedBeforeNow(t, st, admittedOf(t, st, grants, renewals)...)
		w.roundsUntilIdle()
		cut := 0
		for i, r := range renewals {
			g := grants[i]
			o, err := st.OperationGet(t.Context(), r)
			require.NoError(t, err)
			if domain.StepStatus(o.Step) == domain.StepRenewExpired {
				cut++
				w.until(domain.RevocationID(g), "removed", at(domain.StepRevokeCalledBack, domain.BindingRevoked))
				_, ok := w.entryOf(tBatched, subjects[i])
				require.False(t, ok, "%s: revoked, entry gone", g)
				require.Zero(t, w.validations(r))
				continue
			}
			_, b := w.until(r, "in effect", at(domain.StepCalledBack, domain.BindingValidated))
			_, err = st.OperationGet(t.Context(), domain.RevocationID(g))
			require.ErrorIs(t, err, domain.ErrNotFound, "%s: renewed, never revoked", g)
			require.True(t, renewExpiry.Equal(b.ExpiresAt))
			w.validatedOnce(r)
		}
		w.filesExact(append(grants, renewals...)...)
		t.Logf("outcomes: %d renewed, %d cut off by the expiry", n-cut, cut)
	})
}

// admittedOf lists, of the renewals and the grants' revocations, those
// waiting in the batch set.
func admittedOf(t *testing.T, st *store.Store, grants, renewals []string) []string {
	t.Helper()
	var out []string
	for i, r := range renewals {
		id := r
		if o, err := st.OperationGet(t.Context(), r); err == nil && domain.StepStatus(o.Step) == domain.StepRenewExpired {
			id = domain.RevocationID(grants[i])
		}
		out = append(out, id)
	}
	return out
}

// decideNoFatal approves r from a goroutine (no t.FailNow there).
func decideNoFatal(w *revokeWorld, r string) {
	for _, a := range w.approvalsOf(r) {
		w.simJSON(http.MethodPost, "/approval/_control/approvals/"+a.ApprovalID+"/approve", map[string]any{}, nil)
	}
}
