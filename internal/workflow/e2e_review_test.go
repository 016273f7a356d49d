package workflow_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/lifecycle"
	"changeflow/internal/workflow/review"
)

// wakingRevoker is the workflow's revoker that wakes the engine after a
// revocation is created, as serve's does.
type wakingRevoker struct {
	lifecycle.Revoker
	wake func()
}

func (r wakingRevoker) Revoke(ctx context.Context, grant string, reason domain.RevokeReason, text, actor string) (lifecycle.RevokeResult, error) {
	res, err := r.Revoker.Revoke(ctx, grant, reason, text, actor)
	if err == nil && res.Created {
		r.wake()
	}
	return res, err
}

// passes runs the review pass of two instances at once and sums them.
func passes(t *testing.T, rs ...*review.Reviews) review.PassResult {
	t.Helper()
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		sum review.PassResult
	)
	for _, r := range rs {
		wg.Go(func() {
			res, err := r.PassOnce(t.Context())
			require.NoError(t, err)
			mu.Lock()
			sum.Opened += res.Opened
			sum.Closed += res.Closed
			sum.Defaulted += res.Defaulted
			sum.Removals += res.Removals
			mu.Unlock()
		})
	}
	wg.Wait()
	return sum
}

// TestAccessReviewKeepsRevokesAndDefaults: three people hold access to a
// target its owner reviews. The owner keeps one and revokes another; the
// third is left undecided and takes the campaign's default (revoke) at
// the due date. Both removals go through the ordinary removal path (an
// operator revocation naming the campaign) to REVOKED, leave main, and
// the report says so; the kept entry stays. Two instances run the review
// pass side by side: the scheduled campaign of another target opens
// once, the due campaign closes once, each removal starts once.
func TestAccessReviewKeepsRevokesAndDefaults(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newRevokeWorld(t, st)
		ov := e2eOverlay(w.simTS.URL)
		targets := ov["targets"].(map[string]any)
		targets[tSingle].(map[string]any)["owners"] = []any{"olga", "amy"}
		targets[tOther].(map[string]any)["review"] = map[string]any{"every": "90d"}
		w.load(ov)
		w.granted("keep", "amy", tSingle)
		w.granted("gone", "ben", tSingle)
		w.granted("late", "cleo", tSingle)

		rv := wakingRevoker{Revoker: revoker(w.deps), wake: w.eng.Wake}
		one := &review.Reviews{Store: st, Revoker: rv, Config: w.cfg.Load}
		two := &review.Reviews{Store: st, Revoker: rv, Config: w.cfg.Load}
		c, err := st.ReviewOpen(t.Context(), store.ReviewOpenParams{TargetKey: tSingle, DueAt: time.Now().Add(time.Hour),
			Default: domain.ReviewRevoke, OpenedBy: "ops-olga"})
		require.NoError(t, err)
		require.Equal(t, 3, c.Items)
		items, err := st.ReviewItems(t.Context(), c.ID)
		require.NoError(t, err)
		item := map[string]store.ReviewItem{}
		for _, it := range items {
			item[it.Subject] = it
		}
		require.Equal(t, "keep", item["amy"].GrantOperationID)
		require.False(t, item["amy"].From.IsZero(), "when the grant took effect")

		// amy owns the target but cannot keep her own access; olga can.
		owners := w.cfg.Load().Targets()
		var own []string
		for _, tg := range owners {
			if tg.Key == tSingle {
				own = tg.Owners
			}
		}
		require.Equal(t, domain.ReviewOwnAccess, domain.MayDecide(domain.Reviewer{Account: "amy"}, own, "amy"))
		require.Equal(t, domain.ReviewAllowed, domain.MayDecide(domain.Reviewer{Account: "olga"}, own, "amy"))
		_, err = st.ReviewDecide(t.Context(), store.ReviewDecideParams{CampaignID: c.ID, ItemID: item["amy"].ID, Decision: domain.ReviewKeep, By: "olga"})
		require.NoError(t, err)
		_, err = st.ReviewDecide(t.Context(), store.ReviewDecideParams{CampaignID: c.ID, ItemID: item["ben"].ID,
			Decision: domain.ReviewRevoke, By: "olga", Comment: "left the team"})
		require.NoError(t, err)

		res := passes(t, one, two)
		require.Equal(t, 1, res.Opened, "the scheduled campaign of %s, once", tOther)
		require.Equal(t, 1, res.Removals, "ben's removal, once")
		require.Zero(t, res.Closed, "not due yet")
		gone := domain.RevocationID("gone")
		o, _ := w.until(gone, "removed", at(domain.StepRevokeCalledBack, domain.BindingRevoked))
		require.Equal(t, domain.RevokeOperator, o.RevokeReason)
		require.Contains(t, o.Reason, "access review")
		require.Contains(t, o.Reason, "revoked by olga (left the team)")
		w.revokedOnce("gone")

		// The due date passes: cleo's undecided item takes the default.
		_, err = st.DB().ExecContext(t.Context(), "UPDATE review_campaign SET due_at = ? WHERE id = ?",
			st.Dialect().Time(time.Now().Add(-time.Minute)), c.ID)
		require.NoError(t, err)
		res = passes(t, one, two)
		require.Equal(t, 1, res.Closed, "closed once")
		require.Equal(t, 1, res.Defaulted, "cleo's item, once")
		require.Zero(t, res.Opened)
		late := domain.RevocationID("late")
		o, _ = w.until(late, "removed", at(domain.StepRevokeCalledBack, domain.BindingRevoked))
		require.True(t, strings.Contains(o.Reason, "default"), o.Reason)
		w.revokedOnce("late")
		require.Equal(t, review.PassResult{}, passes(t, one, two), "nothing left to do")

		// The report: who decided what, and the removals in effect.
		items, err = st.ReviewItems(t.Context(), c.ID)
		require.NoError(t, err)
		for _, it := range items {
			item[it.Subject] = it
		}
		require.Equal(t, domain.ReviewKeep, item["amy"].Decision)
		require.Empty(t, item["amy"].RevocationID)
		require.Equal(t, "olga", item["ben"].DecidedBy)
		require.Equal(t, gone, item["ben"].RevocationID)
		require.True(t, item["ben"].RemovalInEffect)
		require.False(t, item["ben"].ByDefault)
		require.Equal(t, domain.ReviewRevoke, item["cleo"].Decision)
		require.True(t, item["cleo"].ByDefault)
		require.Equal(t, domain.ReviewActor(c.ID), item["cleo"].DecidedBy)
		require.Equal(t, late, item["cleo"].RevocationID)
		require.True(t, item["cleo"].RemovalInEffect)
		got, err := st.ReviewCampaignGet(t.Context(), c.ID)
		require.NoError(t, err)
		require.Equal(t, domain.ReviewClosed, got.Status)

		_, ok := w.entryOf(tSingle, "amy")
		require.True(t, ok, "the kept entry stays")
		for _, s := range []string{"ben", "cleo"} {
			_, ok := w.entryOf(tSingle, s)
			require.False(t, ok, "%s's entry is gone from main", s)
		}
		w.filesExact("keep", "gone", "late")
	})
}
