package store_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// TestBatchClaimOccupiedSlotLeavesNothing is the slot's answer (I1) on the
// product path, BatchClaim: the batch that takes it is RUNNING at version 1
// on its project; a second claim of the project answers ClaimSlotOccupied
// with no error and leaves no row behind — no second batch, its waiting
// request still waiting, no membership history — while another project's
// slot stays free.
func TestBatchClaimOccupiedSlotLeavesNothing(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx, db := t.Context(), s.DB()
		admitWaiting(t, s, 1, "first", 2)
		first := mustClaim(t, s, 1, 10)
		b := mustBatch(t, s, first.BatchID)
		require.Equal(t, domain.BatchRunning, b.Status)
		require.Equal(t, int64(1), b.Version)
		require.Equal(t, int64(1), b.ProjectID)

		later := admitWaiting(t, s, 1, "later", 1)
		again, err := s.BatchClaim(ctx, store.BatchClaimParams{ProjectID: 1, MaxRequests: 10})
		require.NoError(t, err, "an occupied slot is an answer, not an error")
		require.Equal(t, store.Claim{Outcome: store.ClaimSlotOccupied}, again)
		require.Equal(t, 1, count(t, db, "SELECT COUNT(*) FROM merge_batch"), "the occupied attempt left no batch")
		require.Equal(t, 1, count(t, db, "SELECT COUNT(*) FROM merge_batch_request WHERE operation_id = ? AND batch_id IS NULL", later[0]),
			"the occupied attempt claimed nothing")
		require.Equal(t, 0, count(t, db, "SELECT COUNT(*) FROM merge_batch_history WHERE operation_id = ?", later[0]))

		admitWaiting(t, s, 2, "other", 1)
		other := mustClaim(t, s, 2, 10)
		require.NotEqual(t, first.BatchID, other.BatchID, "each project has its own slot")
		require.Equal(t, 1, activeBatches(t, s, 1))
		require.Equal(t, 1, activeBatches(t, s, 2))
	})
}

func TestBatchTransitionTable(t *testing.T) {
	t.Parallel()
	all := []domain.BatchStatus{domain.BatchRunning, domain.BatchSucceeded, domain.BatchFailed, domain.BatchBlocked}
	legal := map[[2]domain.BatchStatus]bool{
		{domain.BatchRunning, domain.BatchBlocked}:   true,
		{domain.BatchRunning, domain.BatchSucceeded}: true,
		{domain.BatchRunning, domain.BatchFailed}:    true,
		{domain.BatchBlocked, domain.BatchSucceeded}: true,
		{domain.BatchBlocked, domain.BatchFailed}:    true,
		{domain.BatchBlocked, domain.BatchRunning}:   true, // an operator's retrigger (BatchResume)
	}
	for _, from := range all {
		for _, to := range all {
			want := legal[[2]domain.BatchStatus{from, to}]
			require.Equal(t, want, store.BatchTransitionLegal(from, to), "%s → %s", from, to)
		}
	}
}

func TestBatchBlockKeepsTheSlot(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		admitWaiting(t, s, 1, "op", 2)
		c := mustClaim(t, s, 1, 10)

		v, err := s.BatchBlock(ctx, store.BatchBlockParams{ID: c.BatchID, Version: 1, Code: "REBASE_CONFLICT", Message: "needs a person"})
		require.NoError(t, err)
		require.Equal(t, int64(2), v)
		b := mustBatch(t, s, c.BatchID)
		require.Equal(t, domain.BatchBlocked, b.Status)
		require.Equal(t, "REBASE_CONFLICT", b.FailureCode)
		require.Equal(t, "needs a person", b.FailureMessage)

		admitWaiting(t, s, 1, "later", 1)
		got, err := s.BatchClaim(ctx, store.BatchClaimParams{ProjectID: 1, MaxRequests: 10})
		require.NoError(t, err)
		require.Equal(t, store.ClaimSlotOccupied, got.Outcome, "BLOCKED keeps the slot")

		_, err = s.BatchBlock(ctx, store.BatchBlockParams{ID: c.BatchID, Version: 2})
		require.ErrorIs(t, err, domain.ErrPreempted, "BLOCKED is not RUNNING")
	})
}

// TestBatchResume: a BLOCKED batch resumed by an operator is RUNNING again
// with the slot held throughout, the block's reason cleared and its clock
// restarted (the sweep measures batch.timeout from created_at); a stale
// version or a batch that is not BLOCKED is pre-empted.
func TestBatchResume(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		admitWaiting(t, s, 1, "op", 1)
		c := mustClaim(t, s, 1, 10)
		claimed := mustBatch(t, s, c.BatchID)
		_, err := s.BatchResume(ctx, c.BatchID, 1)
		require.ErrorIs(t, err, domain.ErrPreempted, "RUNNING is not BLOCKED")
		_, err = s.BatchBlock(ctx, store.BatchBlockParams{ID: c.BatchID, Version: 1, Code: "BATCH_NEEDS_A_PERSON", Message: "bot forbidden"})
		require.NoError(t, err)
		time.Sleep(2 * time.Millisecond) // the DB clock moves past the claim

		v, err := s.BatchResume(ctx, c.BatchID, 2)
		require.NoError(t, err)
		require.Equal(t, int64(3), v)
		b := mustBatch(t, s, c.BatchID)
		require.Equal(t, domain.BatchRunning, b.Status)
		require.Empty(t, b.FailureCode)
		require.Empty(t, b.FailureMessage)
		require.True(t, b.CreatedAt.After(claimed.CreatedAt), "clock restarted: %s → %s", claimed.CreatedAt, b.CreatedAt)
		active, err := s.BatchActive(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, c.BatchID, active.ID, "the slot stayed with the batch")

		_, err = s.BatchResume(ctx, c.BatchID, 2)
		require.ErrorIs(t, err, domain.ErrPreempted, "stale version")
	})
}

func TestBatchGuardedWritesArePreempted(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		admitWaiting(t, s, 1, "op", 1)
		c := mustClaim(t, s, 1, 10)
		// Each settlement carries a re-admission, as the workflow's does: a
		// pre-empted one must not have made it either.
		tests := []struct {
			name    string
			id      int64
			from    domain.BatchStatus
			version int64
		}{
			{"stale version", c.BatchID, domain.BatchRunning, 7},
			{"wrong status", c.BatchID, domain.BatchBlocked, 1},
			{"unknown batch", c.BatchID + 100, domain.BatchRunning, 1},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				for _, to := range []domain.BatchStatus{domain.BatchSucceeded, domain.BatchFailed} {
					_, err := s.BatchApply(ctx, store.BatchApplyParams{BatchID: tt.id, SettleTo: to, From: tt.from, Version: tt.version,
						Readmit: []string{"stale-readmit"}, ProjectID: 1})
					require.ErrorIs(t, err, domain.ErrPreempted, "to %s", to)
				}
			})
		}
		b := mustBatch(t, s, c.BatchID)
		require.Equal(t, domain.BatchRunning, b.Status, "nothing changed")
		require.Equal(t, int64(1), b.Version)
		require.Equal(t, 1, count(t, s.DB(), "SELECT COUNT(*) FROM merge_batch_request WHERE batch_id = ?", c.BatchID))
		require.Equal(t, 0, count(t, s.DB(), "SELECT COUNT(*) FROM merge_batch_request WHERE operation_id = ?", "stale-readmit"))

		t.Run("not a settlement is refused before the database", func(t *testing.T) {
			_, err := s.BatchApply(ctx, store.BatchApplyParams{BatchID: c.BatchID, SettleTo: domain.BatchBlocked, From: domain.BatchRunning, Version: 1})
			require.ErrorContains(t, err, "not a settlement")
			require.NotErrorIs(t, err, domain.ErrPreempted)
			require.Equal(t, int64(1), mustBatch(t, s, c.BatchID).Version)
		})

		t.Run("illegal transition is refused before the database", func(t *testing.T) {
			_, err := s.BatchApply(ctx, store.BatchApplyParams{BatchID: c.BatchID, SettleTo: domain.BatchSucceeded, From: domain.BatchRunning, Version: 1})
			require.NoError(t, err)
			_, err = s.BatchApply(ctx, store.BatchApplyParams{BatchID: c.BatchID, SettleTo: domain.BatchFailed, From: domain.BatchSucceeded,
				Version: mustBatch(t, s, c.BatchID).Version})
			require.ErrorContains(t, err, "illegal transition SUCCEEDED → FAILED")
			require.NotErrorIs(t, err, domain.ErrPreempted)
		})
	})
}

func TestBatchFailureTextIsCutToTheColumn(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		admitWaiting(t, s, 1, "op", 1)
		c := mustClaim(t, s, 1, 10)
		long := strings.Repeat("é", 400) // 800 bytes, two per rune
		_, err := s.BatchApply(t.Context(), store.BatchApplyParams{
			BatchID: c.BatchID, SettleTo: domain.BatchFailed, From: domain.BatchRunning, Version: 1,
			FailureCode: strings.Repeat("X", 100), FailureMessage: long,
		})
		require.NoError(t, err, "MariaDB strict mode would refuse an over-long value")
		b := mustBatch(t, s, c.BatchID)
		require.Len(t, b.FailureCode, 64)
		require.Len(t, b.FailureMessage, 512)
		require.Equal(t, strings.Repeat("é", 256), b.FailureMessage, "cut on a rune boundary")
	})
}

func TestBatchReads(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		_, err := s.BatchGet(ctx, 404)
		require.ErrorIs(t, err, domain.ErrNotFound)
		_, err = s.BatchActive(ctx, 1)
		require.ErrorIs(t, err, domain.ErrNotFound, "free slot")

		// Five batches of project 1 (the last one active) and one of project 2.
		var ids []int64
		for i := range 5 {
			admitWaiting(t, s, 1, "p1-"+string(rune('a'+i)), 2)
			c := mustClaim(t, s, 1, 10)
			ids = append(ids, c.BatchID)
			if i < 4 {
				mustSucceed(t, s, c.BatchID)
			}
		}
		admitWaiting(t, s, 2, "p2", 3)
		p2 := mustClaim(t, s, 2, 10)

		active, err := s.BatchActive(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, ids[4], active.ID)
		require.Equal(t, domain.BatchRunning, active.Status)
		require.False(t, active.CreatedAt.IsZero())
		require.False(t, active.UpdatedAt.IsZero())

		t.Run("list is newest first and pages by cursor", func(t *testing.T) {
			page, err := s.BatchList(ctx, store.BatchListParams{ProjectID: 1, Limit: 2})
			require.NoError(t, err)
			require.Equal(t, []int64{ids[4], ids[3]}, batchIDs(page.Items))
			require.Equal(t, ids[3], page.NextBeforeID)
			page, err = s.BatchList(ctx, store.BatchListParams{ProjectID: 1, Limit: 2, BeforeID: page.NextBeforeID})
			require.NoError(t, err)
			require.Equal(t, []int64{ids[2], ids[1]}, batchIDs(page.Items))
			page, err = s.BatchList(ctx, store.BatchListParams{ProjectID: 1, Limit: 2, BeforeID: page.NextBeforeID})
			require.NoError(t, err)
			require.Equal(t, []int64{ids[0]}, batchIDs(page.Items))
			require.Zero(t, page.NextBeforeID, "last page")

			all, err := s.BatchList(ctx, store.BatchListParams{})
			require.NoError(t, err)
			require.Len(t, all.Items, 6)
			require.Equal(t, p2.BatchID, all.Items[0].ID)

			running, err := s.BatchList(ctx, store.BatchListParams{Status: domain.BatchRunning})
			require.NoError(t, err)
			require.Equal(t, []int64{p2.BatchID, ids[4]}, batchIDs(running.Items))
		})

		t.Run("members come from the history in claim order", func(t *testing.T) {
			members, err := s.BatchMembers(ctx, p2.BatchID)
			require.NoError(t, err)
			require.Equal(t, p2.Members, members)
			require.Equal(t, []string{"p2-0", "p2-1", "p2-2"}, memberOpIDs(members))
			none, err := s.BatchMembers(ctx, 404)
			require.NoError(t, err)
			require.Empty(t, none)
		})
	})
}

func TestBatchWaitingCountAndQueuePosition(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		for _, op := range []string{"a", "b", "c", "d"} {
			admitted, err := s.BatchAdmit(ctx, op, 1)
			require.NoError(t, err)
			require.True(t, admitted)
		}
		_, err := s.BatchAdmit(ctx, "other-project", 2)
		require.NoError(t, err)

		n, err := s.BatchWaitingCount(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, 4, n)

		for i, op := range []string{"a", "b", "c", "d"} {
			qp, err := s.BatchQueuePosition(ctx, op)
			require.NoError(t, err)
			require.Equal(t, i+1, qp.Position, op)
			require.Zero(t, qp.BatchID)
			require.Equal(t, int64(1), qp.ProjectID)
		}
		qp, err := s.BatchQueuePosition(ctx, "other-project")
		require.NoError(t, err)
		require.Equal(t, 1, qp.Position, "queues are per project")

		backdateWaiting(t, s, 1)
		c := mustClaim(t, s, 1, 2)
		require.Equal(t, []string{"a", "b"}, memberOpIDs(c.Members), "position 1 and 2 are what the claim took")

		qp, err = s.BatchQueuePosition(ctx, "a")
		require.NoError(t, err)
		require.Equal(t, c.BatchID, qp.BatchID)
		require.Zero(t, qp.Position)
		qp, err = s.BatchQueuePosition(ctx, "d")
		require.NoError(t, err)
		require.Equal(t, 2, qp.Position, "moved up")

		n, err = s.BatchWaitingCount(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, 2, n)

		_, err = s.BatchQueuePosition(ctx, "never-admitted")
		require.ErrorIs(t, err, domain.ErrNotFound)
	})
}

func batchIDs(bs []store.Batch) []int64 {
	out := make([]int64, len(bs))
	for i, b := range bs {
		out[i] = b.ID
	}
	return out
}
