package workflow_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/flow"
)

// TestGiveBackAndOperatorRevokeOnABatchingTarget: on a batching target,
// an owner gives access back and an operator revokes another's, both long
// before their expiry; the two revocations wait in the batch set like the
// expiry's and one round's MR removes both entries (one MR naming both);
// after its deploy callback each is REVOKED with its own reason, flipped
// and counted once, no approval asked; a third grant's entry stays. The
// single-request path is TestGiveBackAndOperatorRevoke.
func TestGiveBackAndOperatorRevokeOnABatchingTarget(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newRevokeWorld(t, st)
		w.admitted("mine", "theirs", "kept")
		require.Len(t, w.roundsUntilIdle(), 1)
		for _, id := range []string{"mine", "theirs", "kept"} {
			w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
		}
		owner := func(id string) string {
			b, err := st.BindingGetByOperation(t.Context(), id)
			require.NoError(t, err)
			return b.Subject
		}

		r, err := revoker(w.deps).Revoke(t.Context(), "mine", domain.RevokeGivenBack, "given back by its owner", owner("mine"))
		require.NoError(t, err)
		require.True(t, r.Created)
		_, err = revoker(w.deps).Revoke(t.Context(), "theirs", domain.RevokeOperator, "left the team", "ops-olga")
		require.NoError(t, err)
		revs := []string{domain.RevocationID("mine"), domain.RevocationID("theirs")}
		for _, rev := range revs {
			w.until(rev, "in the batch set", at(domain.StepCreateAdmitted, domain.BindingRevoking))
		}
		storetest.UntilAdmittedBeforeNow(t, st, revs...)

		rounds := w.roundsUntilIdle()
		require.Len(t, rounds, 1, "one round removes both")
		require.Equal(t, 2, rounds[0].Members)
		mrs := w.batchMRs(rounds[0].BatchID)
		require.Len(t, mrs, 1)
		desc, _ := mrs[0]["description"].(string)
		for _, rev := range revs {
			require.True(t, flow.HasTrailer(desc, rev), "trailer of %s in %q", rev, desc)
		}
		o, _ := w.until(revs[0], "given back", at(domain.StepRevokeCalledBack, domain.BindingRevoked))
		require.Equal(t, domain.RevokeGivenBack, o.RevokeReason)
		o, _ = w.until(revs[1], "revoked by an operator", at(domain.StepRevokeCalledBack, domain.BindingRevoked))
		require.Equal(t, domain.RevokeOperator, o.RevokeReason)
		require.Equal(t, "left the team", o.Reason)
		for _, rev := range revs {
			require.Empty(t, w.approvalsOf(rev), "no approval is asked to lose access")
		}
		w.revokedOnce("mine")
		w.revokedOnce("theirs")
		require.Equal(t, 1, w.created[domain.RevokeGivenBack])
		require.Equal(t, 1, w.created[domain.RevokeOperator])
		_, ok := w.entryOf(tBatched, owner("kept"))
		require.True(t, ok, "a grant in effect stays")
		w.filesExact("mine", "theirs", "kept")
	})
}
