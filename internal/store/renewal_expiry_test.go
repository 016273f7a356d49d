package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// mustRenewalAt stores grant (VALIDATED, expiring within the hour) and its
// renewal on flow (approveFirst false: legacy), walked to step along the
// flow's path; withMR records an MR of its own, as create_mr does.
func mustRenewalAt(t *testing.T, s *store.Store, grant, renewal, subject string, approveFirst bool, step domain.StepStatus, withMR bool) store.Operation {
	t.Helper()
	const target = "crm-readonly"
	mustSubmit(t, s, grant, subject, target, domain.BindingMRCreating)
	mustSetBinding(t, s, subject, target, domain.BindingValidated, time.Now().Add(time.Hour))
	p, status, path := opParams(renewal, subject, target), domain.BindingMRCreating, storetest.LegacyPath
	if approveFirst {
		p, status, path = approveFirstParams(renewal, subject, target), domain.BindingApprovalSending, storetest.ApproveFirstPath
	}
	res, err := s.OperationSubmit(t.Context(), store.OperationSubmitParams{
		Operation: p, BindingStatus: status, Renew: &domain.RenewWindow{Percent: 25, Min: 24 * time.Hour},
	})
	require.NoError(t, err)
	require.Equal(t, grant, res.Application.Renews)
	storetest.WalkTo(t, s, renewal, path, step)
	if withMR {
		mustExec(t, s.DB(), "UPDATE operation SET mr_iid = 41 WHERE operation_id = ?", renewal)
	}
	return mustOperation(t, s, renewal)
}

// expireGrantOf moves subject's row's expiry (the grant's, while the
// renewal owns it) an hour into the past.
func expireGrantOf(t *testing.T, s *store.Store, subject string) {
	t.Helper()
	mustExec(t, s.DB(), "UPDATE binding SET expires_at = ? WHERE subject_id = ?", s.Dialect().Time(time.Now().Add(-time.Hour)), subject)
}

// TestExpiredRenewalsReadsEveryPlace: the scan's one read of renewals of
// expired grants returns each renewal not yet in effect and not claimed
// by a round, with where it is, and the decision for each is the one
// domain.ExpiryCutOf's table gives: waiting for its approval without an
// MR, or in the batch set → cut with the revocation; the legacy flow's
// MR waiting for its approval, an approved renewal's MR being checked
// (a step running under a lease) → withdrawn. A claimed batch member, a
// merged renewal and the renewal of a grant not yet expired are not read.
func TestExpiredRenewalsReadsEveryPlace(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		mustRenewalAt(t, s, "xr-g1", "xr-r1", "xr-s1", true, domain.StepCreateApprovalSubmitted, false)
		mustRenewalAt(t, s, "xr-g2", "xr-r2", "xr-s2", false, domain.StepCreateApprovalSubmitted, true)
		mustRenewalAt(t, s, "xr-g3", "xr-r3", "xr-s3", true, domain.StepCreatePipelineRunning, true)
		require.NoError(t, s.WorkSchedule(t.Context(), "xr-r3", "poll_pipeline", 0))
		_, ok, err := s.WorkClaimOne(t.Context(), "xr-r3", "engine-a", time.Minute)
		require.NoError(t, err)
		require.True(t, ok, "its poll is running")
		mustRenewalAdmitted(t, s, "xr-g4", "xr-r4", "xr-s4", 801)
		mustRenewalAdmitted(t, s, "xr-g5", "xr-r5", "xr-s5", 802)
		mustClaim(t, s, 802, 10)
		mustRenewalAt(t, s, "xr-g6", "xr-r6", "xr-s6", true, domain.StepHandleMerged, true)
		mustRenewalAt(t, s, "xr-g7", "xr-r7", "xr-s7", false, domain.StepCreateApprovalSubmitted, true)
		for _, subject := range []string{"xr-s1", "xr-s2", "xr-s3", "xr-s4", "xr-s5", "xr-s6"} {
			expireGrantOf(t, s, subject) // xr-s7's grant is still in effect
		}

		got, err := s.ExpiredRenewals(t.Context(), 100)
		require.NoError(t, err)
		cuts := map[string]domain.ExpiryCut{}
		for _, r := range got {
			cuts[r.Renewal] = domain.ExpiryCutOf(r.Place())
			require.Equal(t, r.Renewal[:3]+"g"+r.Renewal[4:], r.GrantOperationID, "the candidate is the grant's")
			require.Equal(t, domain.BindingRenewing, mustBinding(t, s, r.Subject, r.TargetKey).Status)
		}
		require.Equal(t, map[string]domain.ExpiryCut{
			"xr-r1": domain.ExpiryCutWithRevocation,
			"xr-r2": domain.ExpiryCutWithdraw,
			"xr-r3": domain.ExpiryCutWithdraw,
			"xr-r4": domain.ExpiryCutWithRevocation,
		}, cuts)
		limited, err := s.ExpiredRenewals(t.Context(), 2)
		require.NoError(t, err)
		require.Len(t, limited, 2, "at most limit rows")
	})
}

// TestRenewalLapseCutsARunningRenewalGuarded: the scan's withdrawal of a
// renewal with an MR of its own, on both databases. A renewal whose step
// runs under a lease is cut all the same — RENEW_EXPIRED, the withdraw
// action due at once, the lease cleared, the binding still RENEWING (the
// MR may still merge) — and the running step can no longer write its
// outcome. A renewal that moved after the read (its step written, or a
// round claimed it) fails the guard: the whole call writes nothing
// (ErrPreempted) and the next read decides again.
func TestRenewalLapseCutsARunningRenewalGuarded(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		mustRenewalAt(t, s, "lg-g1", "lg-r1", "lg-s1", false, domain.StepCreateApprovalSubmitted, true)
		mustRenewalAt(t, s, "lg-g2", "lg-r2", "lg-s2", true, domain.StepCreatePipelineRunning, true)
		require.NoError(t, s.WorkSchedule(t.Context(), "lg-r2", "poll_pipeline", 0))
		item, ok, err := s.WorkClaimOne(t.Context(), "lg-r2", "engine-a", time.Minute)
		require.NoError(t, err)
		require.True(t, ok)
		expireGrantOf(t, s, "lg-s1")
		expireGrantOf(t, s, "lg-s2")
		read, err := s.ExpiredRenewals(t.Context(), 10)
		require.NoError(t, err)
		require.Len(t, read, 2)
		rows := []store.RenewalLapsed{read[0].Lapsed(), read[1].Lapsed()}

		// One of them moves after the read: nothing is written.
		moved := mustOperation(t, s, "lg-r1")
		_, err = s.Transition(t.Context(), store.TransitionParams{OperationID: "lg-r1", FromStep: moved.Step,
			ToStep: int(domain.StepHandleStarted), Version: moved.Version, Actor: "approval-callback"})
		require.NoError(t, err)
		err = s.RenewalLapse(t.Context(), store.RenewalLapseParams{Action: withdrawAction, Actor: "scan", Rows: rows})
		require.ErrorIs(t, err, domain.ErrPreempted)
		require.Equal(t, int(domain.StepCreatePipelineRunning), mustOperation(t, s, "lg-r2").Step, "rolled back whole")
		require.Equal(t, "engine-a", mustOperation(t, s, "lg-r2").LeaseOwner[:len("engine-a")])

		// Read again: both are still to cut (the approved legacy renewal
		// now being approved by the bots), and the cut holds.
		read, err = s.ExpiredRenewals(t.Context(), 10)
		require.NoError(t, err)
		require.Len(t, read, 2)
		rows = rows[:0]
		for _, r := range read {
			require.Equal(t, domain.ExpiryCutWithdraw, domain.ExpiryCutOf(r.Place()), r.Renewal)
			rows = append(rows, r.Lapsed())
		}
		require.NoError(t, s.RenewalLapse(t.Context(), store.RenewalLapseParams{Action: withdrawAction, Actor: "scan", Rows: rows}))
		for _, id := range []string{"lg-r1", "lg-r2"} {
			o := mustOperation(t, s, id)
			require.Equal(t, int(domain.StepRenewExpired), o.Step, id)
			require.Equal(t, withdrawAction, o.NextAction, id)
			require.False(t, o.DueAt.IsZero(), "%s: due at once", id)
			require.Empty(t, o.LeaseOwner, "%s: the running step's lease is gone", id)
			require.Empty(t, o.LastError, id)
			b := mustBinding(t, s, o.Subject, o.TargetKey)
			require.Equal(t, domain.BindingRenewing, b.Status, "%s: the row stays the renewal's until its MR is known closed", id)
			require.Equal(t, id, b.OperationID)
		}
		_, err = s.WorkComplete(t.Context(), store.WorkCompleteParams{OperationID: "lg-r2", Lease: item.Lease,
			Step: int(domain.StepCreateSucceeded), Binding: domain.BindingMRCreated})
		require.Error(t, err, "the pre-empted poll cannot write its outcome")
		require.Equal(t, int(domain.StepRenewExpired), mustOperation(t, s, "lg-r2").Step)
		again, err := s.ExpiredRenewals(t.Context(), 10)
		require.NoError(t, err)
		require.Empty(t, again, "a cut renewal is not read again")

		// A renewal a round claimed after the read is refused by the guard.
		mustRenewalAdmitted(t, s, "lg-g3", "lg-r3", "lg-s3", 803)
		expireGrantOf(t, s, "lg-s3")
		read, err = s.ExpiredRenewals(t.Context(), 10)
		require.NoError(t, err)
		require.Len(t, read, 1)
		require.True(t, read[0].InSet)
		mustClaim(t, s, 803, 10)
		err = s.RenewalLapse(t.Context(), store.RenewalLapseParams{Action: withdrawAction, Actor: "scan", Rows: []store.RenewalLapsed{read[0].Lapsed()}})
		require.Error(t, err, "a batch-set renewal is not withdrawn this way, and a claimed one never")
		require.Equal(t, int(domain.StepCreateAdmitted), mustOperation(t, s, "lg-r3").Step)
		_, err = s.RevocationCreate(t.Context(), store.RevocationCreateParams{
			Reason: domain.RevokeExpired, Text: "expired", Actor: "scan", SingleAction: "create_mr", RenewalAction: withdrawAction,
			Rows: []store.RevocationRow{{RevocationCandidate: read[0].RevocationCandidate, Batching: true}},
		})
		require.ErrorIs(t, err, store.ErrRenewalClaimed, "claimed first: the cut with the revocation misses too")
		require.Equal(t, domain.BindingRenewing, mustBinding(t, s, "lg-s3", "crm-readonly").Status)
	})
}
