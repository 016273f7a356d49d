package store_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// ageBatch moves a batch's creation back by age on the database clock,
// without a state write (its version stays).
func ageBatch(t testing.TB, s *store.Store, id int64, age time.Duration) {
	t.Helper()
	past, arg := s.Dialect().NowMinus(age)
	mustExec(t, s.DB(), "UPDATE merge_batch SET created_at = "+past+" WHERE id = ?", arg, id)
}

func TestBatchSweepTimedOut(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		claim := func(project int64) store.Claim {
			admitWaiting(t, s, project, fmt.Sprintf("p%d", project), 2)
			return mustClaim(t, s, project, 10)
		}
		old := claim(1)
		young := claim(2)
		blocked := claim(3)
		ageBatch(t, s, old.BatchID, 2*time.Hour)
		ageBatch(t, s, blocked.BatchID, 2*time.Hour)
		_, err := s.BatchBlock(ctx, store.BatchBlockParams{ID: blocked.BatchID, Version: 1})
		require.NoError(t, err)

		_, err = s.BatchSweepTimedOut(ctx, store.BatchSweepParams{})
		require.ErrorContains(t, err, "MaxAge must be positive")

		settled, err := s.BatchSweepTimedOut(ctx, store.BatchSweepParams{MaxAge: time.Hour})
		require.NoError(t, err)
		require.Equal(t, []store.BatchSettlement{{BatchID: old.BatchID, Status: domain.BatchFailed, Version: 2, Members: old.Members}}, settled)

		b := mustBatch(t, s, old.BatchID)
		require.Equal(t, domain.BatchFailed, b.Status)
		require.Equal(t, store.BatchFailureTimeout, b.FailureCode)
		require.Equal(t, "batch still RUNNING 1h0m0s after its claim", b.FailureMessage)
		require.Equal(t, 0, activeBatches(t, s, 1), "slot released")
		require.Equal(t, 0, count(t, s.DB(), "SELECT COUNT(*) FROM merge_batch_request WHERE batch_id = ?", old.BatchID), "members released")

		require.Equal(t, domain.BatchRunning, mustBatch(t, s, young.BatchID).Status, "young batches stay")
		require.Equal(t, domain.BatchBlocked, mustBatch(t, s, blocked.BatchID).Status, "BLOCKED waits for a person")

		again, err := s.BatchSweepTimedOut(ctx, store.BatchSweepParams{MaxAge: time.Hour})
		require.NoError(t, err)
		require.Empty(t, again)
	})
}

func TestBatchSweepCodeAndLimit(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		var ids []int64
		for project := int64(1); project <= 3; project++ {
			admitWaiting(t, s, project, fmt.Sprintf("p%d", project), 1)
			c := mustClaim(t, s, project, 10)
			ageBatch(t, s, c.BatchID, time.Duration(10-project)*time.Minute)
			ids = append(ids, c.BatchID)
		}
		settled, err := s.BatchSweepTimedOut(t.Context(), store.BatchSweepParams{
			MaxAge: time.Minute, Limit: 2, FailureCode: "STUCK", FailureMessage: "operator sweep",
		})
		require.NoError(t, err)
		require.Len(t, settled, 2)
		require.Equal(t, []int64{ids[0], ids[1]}, []int64{settled[0].BatchID, settled[1].BatchID}, "oldest first")
		b := mustBatch(t, s, ids[0])
		require.Equal(t, "STUCK", b.FailureCode)
		require.Equal(t, "operator sweep", b.FailureMessage)
		require.Equal(t, domain.BatchRunning, mustBatch(t, s, ids[2]).Status, "left for the next sweep")
	})
}

func TestBatchSweepRacesTheRunningTask(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		t.Run("sweep first: the task's stale writes miss", func(t *testing.T) {
			admitWaiting(t, s, 1, "a", 2)
			c := mustClaim(t, s, 1, 10)
			read := mustBatch(t, s, c.BatchID) // what the task last saw
			ageBatch(t, s, c.BatchID, time.Hour)
			settled, err := s.BatchSweepTimedOut(ctx, store.BatchSweepParams{MaxAge: time.Minute})
			require.NoError(t, err)
			require.Len(t, settled, 1)

			_, err = s.BatchSettleSucceeded(ctx, store.BatchSettleParams{ID: c.BatchID, From: read.Status, Version: read.Version})
			require.ErrorIs(t, err, domain.ErrPreempted)
			_, err = s.BatchBlock(ctx, store.BatchBlockParams{ID: c.BatchID, Version: read.Version})
			require.ErrorIs(t, err, domain.ErrPreempted)
			require.Equal(t, domain.BatchFailed, mustBatch(t, s, c.BatchID).Status)
		})
		t.Run("task first: the sweep finds nothing", func(t *testing.T) {
			admitWaiting(t, s, 2, "b", 2)
			c := mustClaim(t, s, 2, 10)
			ageBatch(t, s, c.BatchID, time.Hour)
			_, err := s.BatchSettleSucceeded(ctx, store.BatchSettleParams{ID: c.BatchID, From: domain.BatchRunning, Version: 1})
			require.NoError(t, err)
			settled, err := s.BatchSweepTimedOut(ctx, store.BatchSweepParams{MaxAge: time.Minute})
			require.NoError(t, err)
			require.Empty(t, settled)
			require.Equal(t, domain.BatchSucceeded, mustBatch(t, s, c.BatchID).Status)
		})
		t.Run("overlapping sweeps settle each batch once", func(t *testing.T) {
			var want []int64
			for project := int64(10); project < 16; project++ {
				admitWaiting(t, s, project, fmt.Sprintf("c%d", project), 3)
				c := mustClaim(t, s, project, 10)
				ageBatch(t, s, c.BatchID, time.Hour)
				want = append(want, c.BatchID)
			}
			var (
				mu  sync.Mutex
				got []int64
				wg  sync.WaitGroup
			)
			for range 6 {
				wg.Go(func() {
					settled, err := s.BatchSweepTimedOut(ctx, store.BatchSweepParams{MaxAge: time.Minute})
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					defer mu.Unlock()
					for _, st := range settled {
						got = append(got, st.BatchID)
					}
				})
			}
			wg.Wait()
			require.ElementsMatch(t, want, got, "every batch settled by exactly one sweep")
			for _, id := range want {
				require.Equal(t, int64(2), mustBatch(t, s, id).Version, "one write per batch")
			}
		})
	})
}
