package store_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// repoEntries opens, through the repository reader's write, a repo
// period per subject → the operationId its entry carries on target.
func repoEntries(t *testing.T, s *store.Store, target string, at time.Time, entries map[string]string) {
	t.Helper()
	var writes []store.RepoAccessWrite
	for subject, op := range entries {
		writes = append(writes, store.RepoAccessWrite{Subject: subject, OperationID: op, Opens: true, SHA: "sha-hand", At: at})
	}
	require.NoError(t, s.AccessRepoApply(t.Context(), target, "bindings/"+target+".yaml", store.RepoCursor{},
		store.RepoCursor{SHA: "sha-hand", At: at}, writes))
}

// TestReviewHoldsRepoEntriesAndRemovesOneOnce: a campaign holds the
// target's repository entries beside its grants; the removal of a
// revoked one is started by exactly one of three instances racing
// (one operation, one binding REVOKING, one batch-set row, the item
// recorded once); a second start finds nothing pending. A subject whose
// row is at rest has it taken; one with a request under way waits,
// writing nothing. While the removal is REVOKING the repository
// reader leaves the entry's period open.
func TestReviewHoldsRepoEntriesAndRemovesOneOnce(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		later := time.Now().Add(48 * time.Hour)
		t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
		mustValidated(t, s, "rr", "t-rr", 1, later)
		mustSubmit(t, s, "ivy-old", "ivy", "t-rr", domain.BindingRejected)
		mustSubmit(t, s, "jay-new", "jay", "t-rr", domain.BindingMRCreating)
		repoEntries(t, s, "t-rr", t0, map[string]string{"hank": "hand-7", "ivy": "", "jay": "hand-9"})

		c, err := s.ReviewOpen(ctx, store.ReviewOpenParams{TargetKey: "t-rr", DueAt: later, Default: domain.ReviewRevoke, OpenedBy: "olivia"})
		require.NoError(t, err)
		require.Equal(t, 4, c.Items, "one grant and three repository entries")
		items, err := s.ReviewItems(ctx, c.ID)
		require.NoError(t, err)
		item := map[string]store.ReviewItem{}
		for _, it := range items {
			item[it.Subject] = it
		}
		require.Equal(t, "rr-0", item["rr-s0"].GrantOperationID)
		for _, sub := range []string{"hank", "ivy", "jay"} {
			require.Empty(t, item[sub].GrantOperationID, "%s is a repository entry", sub)
			require.True(t, item[sub].From.Equal(t0), "%s from %v", sub, item[sub].From)
			_, err := s.ReviewDecide(ctx, store.ReviewDecideParams{CampaignID: c.ID, ItemID: item[sub].ID, Decision: domain.ReviewRevoke, By: "olga"})
			require.NoError(t, err)
		}
		pending, err := s.ReviewPendingRemovals(ctx, 10)
		require.NoError(t, err)
		require.Len(t, pending, 3, "the repository entries are pending too")

		// Three instances start hank's removal at once: exactly one.
		params := store.RepoRemovalParams{ItemID: item["hank"].ID, ProjectID: 1, Batching: true, SingleAction: "create_mr",
			Text: domain.ReviewRevokeText(c.ID, "t-rr", "olga", false, ""), Actor: "olga"}
		var (
			wg                sync.WaitGroup
			mu                sync.Mutex
			created, preempts int
		)
		for range 3 {
			wg.Go(func() {
				res, err := s.RepoRemovalCreate(ctx, params)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil && res.OperationID != "":
					created++
				case err != nil:
					require.ErrorIs(t, err, domain.ErrPreempted)
					preempts++
				}
			})
		}
		wg.Wait()
		require.Equal(t, 1, created)
		require.Equal(t, 2, preempts)
		id := domain.RepoRemovalID(item["hank"].ID)
		op, err := s.OperationGet(ctx, id)
		require.NoError(t, err)
		require.Equal(t, domain.OperationRevoke, op.Kind)
		require.Equal(t, "hand-7", op.GrantOperationID, "the entry's own operationId: the only entry it removes")
		require.Equal(t, item["hank"].ID, op.ReviewItemID)
		require.Equal(t, domain.RevokeOperator, op.RevokeReason)
		require.Equal(t, int(domain.StepCreateAdmitted), op.Step)
		require.Contains(t, op.Reason, "revoked by olga")
		b, err := s.BindingGet(ctx, "hank", "t-rr")
		require.NoError(t, err)
		require.Equal(t, domain.BindingRevoking, b.Status)
		require.Equal(t, id, b.OperationID)
		require.Equal(t, 1, countOf(t, s, "SELECT COUNT(*) FROM merge_batch_request WHERE operation_id = ?", id))
		require.Equal(t, 1, countOf(t, s, "SELECT COUNT(*) FROM operation WHERE review_item_id = ?", item["hank"].ID))
		got, err := s.ReviewItemGet(ctx, c.ID, item["hank"].ID)
		require.NoError(t, err)
		require.Equal(t, id, got.RevocationID)
		_, err = s.RepoRemovalCreate(ctx, params)
		require.ErrorIs(t, err, domain.ErrPreempted, "nothing pending any more")

		// ivy's row is at rest (REJECTED): taken, on the single path.
		ivy := params
		ivy.ItemID, ivy.Batching = item["ivy"].ID, false
		before, err := s.BindingGet(ctx, "ivy", "t-rr")
		require.NoError(t, err)
		res, err := s.RepoRemovalCreate(ctx, ivy)
		require.NoError(t, err)
		require.Equal(t, domain.RepoRemovalID(item["ivy"].ID), res.OperationID)
		b, err = s.BindingGet(ctx, "ivy", "t-rr")
		require.NoError(t, err)
		require.Equal(t, domain.BindingRevoking, b.Status)
		require.Equal(t, before.Version+1, b.Version)
		op, err = s.OperationGet(ctx, res.OperationID)
		require.NoError(t, err)
		require.Empty(t, op.GrantOperationID, "a blank operationId in the file")
		require.Equal(t, int(domain.StepRevokeStarted), op.Step)
		require.Equal(t, "create_mr", op.NextAction)

		// jay's new request is under way: the removal waits, nothing written.
		jay := params
		jay.ItemID = item["jay"].ID
		res, err = s.RepoRemovalCreate(ctx, jay)
		require.NoError(t, err)
		require.True(t, res.Waiting)
		require.Equal(t, 0, countOf(t, s, "SELECT COUNT(*) FROM operation WHERE review_item_id = ?", item["jay"].ID))
		got, err = s.ReviewItemGet(ctx, c.ID, item["jay"].ID)
		require.NoError(t, err)
		require.Empty(t, got.RevocationID)
		require.Empty(t, got.RevokeNote)

		// The reader sees hank's entry leave the file (the removal
		// merged): while the removal is REVOKING the period stays open,
		// for the confirmation to end.
		cur, err := s.AccessRepoCursor(ctx, "t-rr", "bindings/t-rr.yaml")
		require.NoError(t, err)
		require.NoError(t, s.AccessRepoApply(ctx, "t-rr", "bindings/t-rr.yaml", cur, store.RepoCursor{SHA: "sha-merge", At: t0.Add(time.Hour)},
			[]store.RepoAccessWrite{{Subject: "hank", SHA: "sha-merge", At: t0.Add(time.Hour)}}))
		require.Equal(t, 1, countOf(t, s, "SELECT COUNT(*) FROM access_interval WHERE target_key = ? AND subject = ? AND source = ? AND until_at IS NULL",
			"t-rr", "hank", store.AccessSourceRepo))
	})
}

// countOf runs a COUNT query.
func countOf(t *testing.T, s *store.Store, q string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, s.DB().QueryRowContext(t.Context(), q, args...).Scan(&n))
	return n
}
