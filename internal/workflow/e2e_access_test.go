package workflow_test

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// period is the access period id opened, checked against what the
// request's own records say: it starts at the step-history time of its
// deploy confirmation, and names its approval, its MR and that MR's merge
// commit on main.
func (w *revokeWorld) period(id string) store.AccessInterval {
	w.t.Helper()
	a, err := w.st.AccessOfOperation(w.t.Context(), id)
	require.NoError(w.t, err, "the period %s opened", id)
	o, err := w.st.OperationGet(w.t.Context(), id)
	require.NoError(w.t, err)
	require.Equal(w.t, o.ApprovalID, a.ApprovalID)
	require.NotEmpty(w.t, a.ApprovalID)
	require.Equal(w.t, o.MRIID, a.MRIID)
	require.NotZero(w.t, a.MRIID)
	require.Equal(w.t, store.AccessSourceChangeflow, a.Source)
	require.Equal(w.t, w.mergeCommitOnMain(id), a.MergeSHA, "%s: the period names its MR's merge commit", id)
	steps, err := w.st.OperationStepList(w.t.Context(), id)
	require.NoError(w.t, err)
	var confirmed []time.Time
	for _, s := range steps {
		if s.ToBinding == domain.BindingValidated && domain.StepStatus(s.ToStep) == domain.StepCalledBack {
			confirmed = append(confirmed, s.CreatedAt)
		}
	}
	require.Len(w.t, confirmed, 1, "%s confirmed once", id)
	require.True(w.t, confirmed[0].Equal(a.From), "%s: from %s, confirmed at %s", id, a.From, confirmed[0])
	return a
}

// mergeCommitOnMain is the merge commit of id's MR (a batch member's: its
// batch MR) as the simulated GitLab answers the MR, checked to be in the
// history of main (git log of the simulator's repository).
func (w *world) mergeCommitOnMain(id string) string {
	w.t.Helper()
	o, err := w.st.OperationGet(w.t.Context(), id)
	require.NoError(w.t, err)
	require.NotZero(w.t, o.MRIID, "%s has an MR", id)
	var mr struct {
		State          string `json:"state"`
		MergeCommitSHA string `json:"merge_commit_sha"`
	}
	require.Equal(w.t, http.StatusOK, w.simJSON(http.MethodGet, "/gitlab/api/v4/projects/1/merge_requests/"+itoa(o.MRIID), nil, &mr))
	require.Equal(w.t, "merged", mr.State, "%s: MR !%d", id, o.MRIID)
	require.Len(w.t, mr.MergeCommitSHA, 40, "%s: MR !%d's merge commit", id, o.MRIID)
	var log []struct {
		ID string `json:"id"`
	}
	require.Equal(w.t, http.StatusOK, w.simJSON(http.MethodGet, "/gitlab/api/v4/projects/1/repository/commits?ref_name=main&per_page=100", nil, &log))
	require.True(w.t, slices.ContainsFunc(log, func(c struct {
		ID string `json:"id"`
	}) bool {
		return c.ID == mr.MergeCommitSHA
	}), "%s: merge commit %s on main", id, mr.MergeCommitSHA)
	return mr.MergeCommitSHA
}

// accessAt is who had access to target at t, as operationIds.
func (w *revokeWorld) accessAt(target string, t time.Time) []string {
	w.t.Helper()
	items, err := w.st.AccessAtTarget(w.t.Context(), target, t)
	require.NoError(w.t, err)
	ids := []string{}
	for _, a := range items {
		ids = append(ids, a.OperationID)
	}
	return ids
}

// boundary checks one second before and after instant b: before, who
// had access is before; after, after (operationIds, by subject).
func (w *revokeWorld) boundary(what, target string, b time.Time, before, after []string) {
	w.t.Helper()
	require.Equal(w.t, before, w.accessAt(target, b.Add(-time.Second)), "%s: one second before", what)
	require.Equal(w.t, after, w.accessAt(target, b.Add(time.Second)), "%s: one second after", what)
	require.Equal(w.t, after, w.accessAt(target, b), "%s: at the instant, the later period", what)
}

// pastByTwoSeconds waits until the database clock is two seconds past t,
// so that the next boundary is more than a second away from it.
func (w *revokeWorld) pastByTwoSeconds(t time.Time) {
	w.t.Helper()
	require.Eventually(w.t, func() bool {
		now, err := w.st.DatabaseNow(w.t.Context())
		require.NoError(w.t, err)
		return now.After(t.Add(2 * time.Second))
	}, 10*time.Second, 50*time.Millisecond)
}

// TestAccessHistoryOfAGrantRenewedGivenBackAndOneExpired: amy's grant is
// deployed, renewed (the renewal's period starts at the very instant the
// grant's ends) and given back; ben's grant is deployed and expires. At
// one second before and after each boundary the access history answers
// exactly who had access — by target, by subject and over a window —
// each period naming its request, approval and MR; and the files on main
// are what the database says.
func TestAccessHistoryOfAGrantRenewedGivenBackAndOneExpired(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newRevokeWorld(t, st)
		ctx := t.Context()

		w.granted("acc-g1", "amy", tSingle)
		g1 := w.period("acc-g1")
		require.True(t, g1.Open())

		w.pastByTwoSeconds(g1.From)
		w.expireIn("acc-g1", 2*time.Hour)
		w.mustRenew("acc-r1", "amy", tSingle, "acc-g1")
		w.until("acc-r1", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingRenewing))
		require.True(t, w.period("acc-g1").Open(), "a renewal under way: the grant's access lasts")
		w.decide("acc-r1", "approve")
		w.until("acc-r1", "in effect", at(domain.StepCalledBack, domain.BindingValidated))
		g1, r1 := w.period("acc-g1"), w.period("acc-r1")
		require.True(t, g1.Until.Equal(r1.From), "the renewal takes over at the instant the grant ends")
		require.Equal(t, "acc-r1", g1.EndOperationID)
		require.Equal(t, w.mergeCommitOnMain("acc-r1"), g1.EndSHA, "the grant's period ends with the renewal's merge commit")
		require.NotEqual(t, g1.ApprovalID, r1.ApprovalID, "each period names who approved it")

		w.pastByTwoSeconds(r1.From)
		res, err := revoker(w.deps).Revoke(ctx, "acc-r1", domain.RevokeGivenBack, "given back by its owner", "amy")
		require.NoError(t, err)
		require.True(t, res.Created)
		w.eng.Wake()
		w.until(domain.RevocationID("acc-r1"), "removed", at(domain.StepRevokeCalledBack, domain.BindingRevoked))
		r1 = w.period("acc-r1")
		require.False(t, r1.Open())
		require.Equal(t, domain.RevocationID("acc-r1"), r1.EndOperationID)
		require.Equal(t, w.mergeCommitOnMain(domain.RevocationID("acc-r1")), r1.EndSHA, "ended by the removal's merge commit")

		w.pastByTwoSeconds(r1.Until)
		w.granted("acc-g2", "ben", tSingle)
		g2 := w.period("acc-g2")
		w.pastByTwoSeconds(g2.From)
		w.expire("acc-g2")
		require.Equal(t, 1, w.scan().Revoked)
		w.eng.Wake()
		w.until(domain.RevocationID("acc-g2"), "removed", at(domain.StepRevokeCalledBack, domain.BindingRevoked))
		g2 = w.period("acc-g2")
		require.False(t, g2.Open())
		require.Equal(t, domain.RevocationID("acc-g2"), g2.EndOperationID)
		require.Equal(t, w.mergeCommitOnMain(domain.RevocationID("acc-g2")), g2.EndSHA)
		require.Equal(t, w.mergeCommitOnMain("acc-g2"), g2.MergeSHA, "a removal's period keeps its grant's merge commit")

		none := []string{}
		w.boundary("amy's grant in effect", tSingle, g1.From, none, []string{"acc-g1"})
		w.boundary("amy's renewal in effect", tSingle, r1.From, []string{"acc-g1"}, []string{"acc-r1"})
		w.boundary("amy's give-back in effect", tSingle, r1.Until, []string{"acc-r1"}, none)
		w.boundary("ben's grant in effect", tSingle, g2.From, none, []string{"acc-g2"})
		w.boundary("ben's expiry in effect", tSingle, g2.Until, []string{"acc-g2"}, none)

		// By subject: what amy had just after her renewal, and later.
		mine, err := st.AccessAtSubject(ctx, "amy", r1.From.Add(time.Second))
		require.NoError(t, err)
		require.Len(t, mine, 1)
		require.Equal(t, "acc-r1", mine[0].OperationID)
		require.Equal(t, tSingle, mine[0].TargetKey)
		mine, err = st.AccessAtSubject(ctx, "amy", g2.From)
		require.NoError(t, err)
		require.Empty(t, mine)

		// The window from before the first to after the last boundary:
		// every period, oldest first; one that starts after amy's end
		// and before ben's start holds none of amy's.
		hist, more, err := st.AccessHistory(ctx, tSingle, g1.From.Add(-time.Second), g2.Until.Add(time.Second), store.MaxAccessHistory)
		require.NoError(t, err)
		require.False(t, more)
		var ids []string
		for _, a := range hist {
			ids = append(ids, a.OperationID)
		}
		require.Equal(t, []string{"acc-g1", "acc-r1", "acc-g2"}, ids)
		hist, _, err = st.AccessHistory(ctx, tSingle, r1.Until.Add(time.Second), g2.From.Add(-time.Second), store.MaxAccessHistory)
		require.NoError(t, err)
		require.Empty(t, hist)

		w.filesExact("acc-g1", "acc-r1", "acc-g2")
	})
}

// TestAccessPeriodsOfABatchNameTheBatchMerge: two grants merged in one
// batch MR open periods that both name the batch MR's merge commit on
// main; one is then revoked, its removal merged in a batch of its own,
// and its period keeps the grant's merge commit and ends with the
// removal's. The files on main are what the database says.
func TestAccessPeriodsOfABatchNameTheBatchMerge(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newRevokeWorld(t, st)
		w.admitted("bm-1", "bm-2")
		w.roundsUntilIdle()
		for _, id := range []string{"bm-1", "bm-2"} {
			w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
		}
		p1, p2 := w.period("bm-1"), w.period("bm-2")
		require.NotEmpty(t, p1.MergeSHA)
		require.Equal(t, p1.MergeSHA, p2.MergeSHA, "one batch MR, one merge commit")

		w.expire("bm-1")
		require.Equal(t, 1, w.scan().Revoked)
		storetest.UntilAdmittedBeforeNow(t, st, domain.RevocationID("bm-1"))
		w.roundsUntilIdle()
		w.until(domain.RevocationID("bm-1"), "removed", at(domain.StepRevokeCalledBack, domain.BindingRevoked))
		p1 = w.period("bm-1")
		require.False(t, p1.Open())
		require.Equal(t, p2.MergeSHA, p1.MergeSHA, "the removal keeps the grant's merge commit")
		removal := w.mergeCommitOnMain(domain.RevocationID("bm-1"))
		require.NotEqual(t, p1.MergeSHA, removal)
		require.Equal(t, removal, p1.EndSHA, "ended by the removal's merge commit")
		w.filesExact("bm-1", "bm-2")
	})
}
