package store_test

import (
	"context"
	"errors"
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

// sweepTimedOut is the storage half of the workflow's timeout sweep
// (workflow Rounds.Sweep, without the MR and the members' moves): read the
// timed-out batches (BatchTimedOut), then settle each FAILED with one
// BatchApply guarded on the status and version read. A batch another path
// settled meanwhile (domain.ErrPreempted) or whose write is busy
// (domain.ErrBusy) is skipped. It returns the batches it settled.
func sweepTimedOut(ctx context.Context, s *store.Store, maxAge time.Duration) ([]int64, error) {
	due, err := s.BatchTimedOut(ctx, maxAge, 0)
	if err != nil {
		return nil, err
	}
	var settled []int64
	for _, b := range due {
		_, err := s.BatchApply(ctx, store.BatchApplyParams{
			BatchID: b.ID, SettleTo: domain.BatchFailed, From: b.Status, Version: b.Version,
			FailureCode: store.BatchFailureTimeout, ProjectID: b.ProjectID,
		})
		switch {
		case errors.Is(err, domain.ErrPreempted), errors.Is(err, domain.ErrBusy):
			continue
		case err != nil:
			return settled, fmt.Errorf("sweep batch %d: %w", b.ID, err)
		}
		settled = append(settled, b.ID)
	}
	return settled, nil
}

// TestBatchTimedOut: the timeout sweep's read returns the RUNNING batches
// claimed more than maxAge ago (database clock, from created_at), oldest
// first and at most limit; never a young one, never a BLOCKED one (it
// waits for a person), never a settled one.
func TestBatchTimedOut(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		claim := func(project int64) store.Claim {
			admitWaiting(t, s, project, fmt.Sprintf("p%d", project), 2)
			return mustClaim(t, s, project, 10)
		}
		older, old, young, blocked := claim(1), claim(2), claim(3), claim(4)
		ageBatch(t, s, older.BatchID, 3*time.Hour)
		ageBatch(t, s, old.BatchID, 2*time.Hour)
		ageBatch(t, s, blocked.BatchID, 4*time.Hour)
		_, err := s.BatchBlock(ctx, store.BatchBlockParams{ID: blocked.BatchID, Version: 1})
		require.NoError(t, err)

		_, err = s.BatchTimedOut(ctx, 0, 0)
		require.ErrorContains(t, err, "maxAge must be positive")

		ids := func(bs []store.Batch) []int64 {
			out := make([]int64, 0, len(bs))
			for _, b := range bs {
				require.Equal(t, domain.BatchRunning, b.Status)
				out = append(out, b.ID)
			}
			return out
		}
		due, err := s.BatchTimedOut(ctx, time.Hour, 0)
		require.NoError(t, err)
		require.Equal(t, []int64{older.BatchID, old.BatchID}, ids(due), "oldest first; young and BLOCKED batches stay")
		require.Equal(t, int64(1), due[0].Version, "the version a guarded settlement needs")
		due, err = s.BatchTimedOut(ctx, time.Hour, 1)
		require.NoError(t, err)
		require.Equal(t, []int64{older.BatchID}, ids(due), "limit")

		settled, err := sweepTimedOut(ctx, s, time.Hour)
		require.NoError(t, err)
		require.Equal(t, []int64{older.BatchID, old.BatchID}, settled)
		b := mustBatch(t, s, old.BatchID)
		require.Equal(t, domain.BatchFailed, b.Status)
		require.Equal(t, store.BatchFailureTimeout, b.FailureCode)
		require.Equal(t, 0, activeBatches(t, s, 2), "slot released")
		require.Equal(t, 0, count(t, s.DB(), "SELECT COUNT(*) FROM merge_batch_request WHERE batch_id = ?", old.BatchID), "members released")
		require.Equal(t, domain.BatchRunning, mustBatch(t, s, young.BatchID).Status)
		require.Equal(t, domain.BatchBlocked, mustBatch(t, s, blocked.BatchID).Status)

		due, err = s.BatchTimedOut(ctx, time.Hour, 0)
		require.NoError(t, err)
		require.Empty(t, due, "settled batches are not found again")
	})
}

// TestBatchSweepRacesTheRunningTask: the sweep's settlement is guarded on
// the status and version it read, so it races the running task and other
// sweepers safely — whoever writes first wins, the others get
// domain.ErrPreempted and write nothing. (The race through the workflow,
// with the MR and the members, is the workflow's
// TestBatchSweepRacingAnOperatorSettlesOnce.)
func TestBatchSweepRacesTheRunningTask(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		t.Run("sweep first: the task's stale writes miss", func(t *testing.T) {
			admitWaiting(t, s, 1, "a", 2)
			c := mustClaim(t, s, 1, 10)
			read := mustBatch(t, s, c.BatchID) // what the task last saw
			ageBatch(t, s, c.BatchID, time.Hour)
			settled, err := sweepTimedOut(ctx, s, time.Minute)
			require.NoError(t, err)
			require.Equal(t, []int64{c.BatchID}, settled)

			_, err = s.BatchApply(ctx, store.BatchApplyParams{BatchID: c.BatchID, SettleTo: domain.BatchSucceeded, From: read.Status, Version: read.Version})
			require.ErrorIs(t, err, domain.ErrPreempted)
			_, err = s.BatchBlock(ctx, store.BatchBlockParams{ID: c.BatchID, Version: read.Version})
			require.ErrorIs(t, err, domain.ErrPreempted)
			require.Equal(t, domain.BatchFailed, mustBatch(t, s, c.BatchID).Status)
		})
		t.Run("task first: the sweep finds nothing", func(t *testing.T) {
			admitWaiting(t, s, 2, "b", 2)
			c := mustClaim(t, s, 2, 10)
			ageBatch(t, s, c.BatchID, time.Hour)
			_, err := s.BatchApply(ctx, store.BatchApplyParams{BatchID: c.BatchID, SettleTo: domain.BatchSucceeded, From: domain.BatchRunning, Version: 1})
			require.NoError(t, err)
			settled, err := sweepTimedOut(ctx, s, time.Minute)
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
					settled, err := sweepTimedOut(ctx, s, time.Minute)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					defer mu.Unlock()
					got = append(got, settled...)
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
