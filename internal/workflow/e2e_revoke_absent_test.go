package workflow_test

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/bindingfile"
	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/flow"
)

// removeByHand deletes the entries of grants ids from the batching
// target's file on main, as a maintainer editing the config repo would.
func (w *revokeWorld) removeByHand(ids ...string) {
	w.t.Helper()
	f, err := bindingfile.Parse([]byte(w.fileOnMain(tBatched)))
	require.NoError(w.t, err)
	for _, id := range ids {
		_, b := w.state(id)
		e, ok := f.Entry(b.Subject)
		require.True(w.t, ok && e.OperationID == id, "%s has its entry on main before the hand edit", id)
		f = f.Without(b.Subject)
	}
	w.commitOnMain("update", tBatched, string(f.Marshal()))
}

// absentOnce: revocation rev was settled REVOKE_ABSENT → REVOKED by the
// round of batch batchID, once, without an MR of its own or of the batch.
func (w *revokeWorld) absentOnce(grant string, batchID int64) {
	w.t.Helper()
	rev := domain.RevocationID(grant)
	o, b := w.state(rev)
	require.Equal(w.t, domain.StepRevokeAbsent, domain.StepStatus(o.Step), "%s step", rev)
	require.Equal(w.t, domain.BindingRevoked, b.Status, "%s binding", rev)
	require.Zero(w.t, o.MRIID, "%s is linked to no MR", rev)
	require.Empty(w.t, o.NextAction, "%s has nothing left to run", rev)
	hist, err := w.st.OperationStepList(w.t.Context(), rev)
	require.NoError(w.t, err)
	n := 0
	for _, h := range hist {
		if domain.StepStatus(h.ToStep) == domain.StepRevokeAbsent {
			n++
			require.Equal(w.t, domain.BindingRevoking, h.FromBinding)
			require.Equal(w.t, domain.BindingRevoked, h.ToBinding)
			require.Contains(w.t, h.Note, "nothing to remove")
			require.Equal(w.t, "batch-"+strconv.FormatInt(batchID, 10), h.Actor)
		}
	}
	require.Equal(w.t, 1, n, "%s: one REVOKE_ABSENT row", rev)
	w.revokedOnce(grant)
}

// TestBatchOfRevocationsWithNothingToRemoveSettlesAtOnce: two grants of a
// batching target expire after a maintainer removed both entries from
// main by hand. The round that claims their revocations has nothing to
// commit: it settles both at once as REVOKE_ABSENT (REVOKED, the lag
// counted once each), opens no MR, and finishes the batch SUCCEEDED in the
// same transaction — the slot is free at once, nothing is re-admitted, and
// the next round finds nothing waiting. (Before,
// the round could not open an MR without a change, and the sweep failed
// the batch and re-admitted the members, round after round.)
func TestBatchOfRevocationsWithNothingToRemoveSettlesAtOnce(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newRevokeWorld(t, st)
		grants := []string{"gone-1", "gone-2"}
		w.admitted(grants...)
		w.roundsUntilIdle()
		for _, id := range grants {
			w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
		}
		w.removeByHand(grants...)
		w.expire(grants...)
		require.Equal(t, 2, w.scan().Revoked)
		storetest.UntilAdmittedBeforeNow(t, st, domain.RevocationID("gone-1"), domain.RevocationID("gone-2"))

		r, err := w.rounds.RunRound(t.Context(), 1)
		require.NoError(t, err)
		require.Equal(t, "CLAIMED", r.Outcome, "%+v", r)
		require.Zero(t, r.MRIID, "no MR for a batch with nothing to change")
		// Settled by the round itself, before it returned: no step, no
		// sweep, no waiting.
		b, err := st.BatchGet(t.Context(), r.BatchID)
		require.NoError(t, err)
		require.Equal(t, domain.BatchSucceeded, b.Status)
		require.Zero(t, b.MRIID)
		require.Empty(t, w.batchMRs(r.BatchID))
		require.Empty(t, w.branchHead(flow.BatchBranchName(r.BatchID)), "no batch branch was pushed")
		for _, id := range grants {
			w.absentOnce(id, r.BatchID)
		}

		n, err := st.BatchWaitingCount(t.Context(), 1)
		require.NoError(t, err)
		require.Zero(t, n, "nothing re-admitted")
		again, err := w.rounds.RunRound(t.Context(), 1)
		require.NoError(t, err)
		require.Equal(t, "NOTHING_WAITING", again.Outcome)
		w.filesExact(grants...)
	})
}

// TestMixedBatchDropsRevocationsWithNothingToRemove: one round claims a
// new grant, the revocation of a grant whose entry is on main, and the
// revocation of one whose entry a maintainer removed by hand. The last is
// settled at once (REVOKE_ABSENT) and dropped from the batch's change: the
// MR's commit and description name only the other two, it is linked to no
// MR, and the batch's steps never move it. The grant is VALIDATED and the
// other removal REVOKED by the deploy callback, each once.
func TestMixedBatchDropsRevocationsWithNothingToRemove(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newRevokeWorld(t, st)
		w.admitted("keep", "gone")
		w.roundsUntilIdle()
		for _, id := range []string{"keep", "gone"} {
			w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
		}
		w.removeByHand("gone")
		w.expire("keep", "gone")
		require.Equal(t, 2, w.scan().Revoked)
		w.admitted("new")
		storetest.UntilAdmittedBeforeNow(t, st, domain.RevocationID("keep"), domain.RevocationID("gone"))

		rounds := w.roundsUntilIdle()
		require.Len(t, rounds, 1)
		require.Equal(t, 2, rounds[0].Members, "the MR's members: the grant and the removal with an entry")
		mrs := w.batchMRs(rounds[0].BatchID)
		require.Len(t, mrs, 1)
		desc, _ := mrs[0]["description"].(string)
		require.True(t, flow.HasTrailer(desc, "new"), desc)
		require.True(t, flow.HasTrailer(desc, domain.RevocationID("keep")), desc)
		require.False(t, flow.HasTrailer(desc, domain.RevocationID("gone")), "dropped from the MR: %s", desc)
		w.absentOnce("gone", rounds[0].BatchID)

		w.until("new", "validated", at(domain.StepCalledBack, domain.BindingValidated))
		w.validatedOnce("new")
		w.until(domain.RevocationID("keep"), "removed", at(domain.StepRevokeCalledBack, domain.BindingRevoked))
		w.revokedOnce("keep")
		// The batch's later steps did not touch the settled member.
		w.absentOnce("gone", rounds[0].BatchID)
		w.filesExact("keep", "gone", "new")
	})
}
