package workflow_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/reconcile"
)

// TestBatchOfRemovalsWhoseDeployCallbackIsLostIsReconciled: on a batching
// target, two expired grants' removals and a new grant go out in one
// round's MR, which merges; its deploy callback is lost, so the members
// wait merged (the removals REVOKING, their entries already gone from
// main, the grant MERGED). Once a later MR of the project is deployed,
// reconciliation infers the batch MR's deployment: each removal ends
// REVOKE_RECONCILED / REVOKED and the grant RECONCILED / VALIDATED, each
// flipped once; a second run flips nothing; the files on main are exact.
// The single-request path's lost callback is
// TestExpiredGrantIsRemovedAndConfirmed.
func TestBatchOfRemovalsWhoseDeployCallbackIsLostIsReconciled(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newRevokeWorld(t, st)
		ov := e2eOverlay(w.simTS.URL)
		ov["reconcile.minAge"] = "0s"
		w.load(ov)
		w.admitted("old-1", "old-2")
		require.Len(t, w.roundsUntilIdle(), 1)
		for _, id := range []string{"old-1", "old-2"} {
			w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
		}
		subjects := map[string]string{}
		for _, id := range []string{"old-1", "old-2"} {
			b, err := st.BindingGetByOperation(t.Context(), id)
			require.NoError(t, err)
			subjects[id] = b.Subject
		}

		w.expire("old-1", "old-2")
		require.Equal(t, 2, w.scan().Revoked)
		revs := []string{domain.RevocationID("old-1"), domain.RevocationID("old-2")}
		storetest.UntilAdmittedBeforeNow(t, st, revs...)
		w.admitted("new-1")

		// The batch MR's deploy callback is lost.
		require.Equal(t, http.StatusOK, w.simJSON(http.MethodPost, "/deploy/_control/faults", map[string]any{"dropNext": 1}, nil))
		rounds := w.roundsUntilIdle()
		require.Len(t, rounds, 1, "one MR adds one entry and removes two")
		require.Equal(t, 3, rounds[0].Members)
		mrs := w.batchMRs(rounds[0].BatchID)
		require.Len(t, mrs, 1)
		require.Equal(t, "merged", mrs[0]["state"])
		w.until("new-1", "merged, not confirmed", at(domain.StepHandleMerged, domain.BindingMerged))
		for _, rev := range revs {
			w.until(rev, "merged, not confirmed", at(domain.StepHandleMerged, domain.BindingRevoking))
		}
		for id, subject := range subjects {
			_, ok := w.entryOf(tBatched, subject)
			require.False(t, ok, "%s's entry is gone from main once merged", id)
		}
		// The grant's entry is on main, merged but not yet in effect (the
		// file check counts VALIDATED requests only, so it runs at the end).
		nb, err := st.BindingGetByOperation(t.Context(), "new-1")
		require.NoError(t, err)
		e, ok := w.entryOf(tBatched, nb.Subject)
		require.True(t, ok, "new-1's entry is on main")
		require.Equal(t, "new-1", e.OperationID)

		// A later MR of the project is deployed: the lost callback is
		// inferred for every member of the batch MR below it.
		w.granted("later", "dora", tOther)
		rec := reconcile.New(w.deps.Env, w.deps.Store)
		res, err := rec.RunOnce(t.Context())
		require.NoError(t, err)
		require.Equal(t, 3, res.Validated, "%+v", res)
		for _, rev := range revs {
			w.until(rev, "reconciled", at(domain.StepRevokeReconciled, domain.BindingRevoked))
		}
		w.until("new-1", "reconciled", at(domain.StepReconciled, domain.BindingValidated))
		w.revokedOnce("old-1")
		w.revokedOnce("old-2")
		w.validatedOnce("new-1")
		res, err = rec.RunOnce(t.Context())
		require.NoError(t, err)
		require.Zero(t, res.Validated, "flipped once")
		w.filesExact("old-1", "old-2", "new-1", "later")
	})
}
