package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// The settlement of a batch (its storage half) as the product runs
// it: one BatchApply whose first write is the batch's guarded move to
// FAILED or SUCCEEDED (the workflow's batch_settle, the timeout sweep, an
// operator's settlement of a BLOCKED batch), with the members' release and
// re-admission in the same transaction.

// TestBatchFailedSettlementReleasesMembersAndKeepsHistory: a FAILED settlement
// frees the slot, records why, deletes the members' waiting-set rows and
// re-admits, in the same transaction, the members the workflow picked; a
// member it did not pick can be admitted again later. The history keeps
// every membership.
func TestBatchFailedSettlementReleasesMembersAndKeepsHistory(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx, db := t.Context(), s.DB()
		admitWaiting(t, s, 1, "op", 5)
		c := mustClaim(t, s, 1, 3)

		released, err := s.BatchApply(ctx, store.BatchApplyParams{
			BatchID: c.BatchID, SettleTo: domain.BatchFailed, From: domain.BatchRunning, Version: 1,
			FailureCode: "PIPELINE_FAILED", FailureMessage: "check pipeline failed",
			Readmit: []string{"op-1"}, ProjectID: 1,
		})
		require.NoError(t, err)
		require.Equal(t, c.Members, released, "the members, in claim order")

		b := mustBatch(t, s, c.BatchID)
		require.Equal(t, domain.BatchFailed, b.Status)
		require.Equal(t, int64(2), b.Version)
		require.Equal(t, "PIPELINE_FAILED", b.FailureCode)
		require.Equal(t, "check pipeline failed", b.FailureMessage)
		require.Equal(t, 0, activeBatches(t, s, 1), "the slot is free")

		require.Equal(t, 0, count(t, db, "SELECT COUNT(*) FROM merge_batch_request WHERE batch_id = ?", c.BatchID), "members released")
		require.Equal(t, 0, count(t, db, "SELECT COUNT(*) FROM merge_batch_request WHERE operation_id IN (?, ?)", "op-0", "op-2"),
			"members not re-admitted have no row")
		require.Equal(t, 3, count(t, db, "SELECT COUNT(*) FROM merge_batch_request WHERE batch_id IS NULL"),
			"the re-admitted member and the two that kept waiting")
		history, err := s.BatchMembers(ctx, c.BatchID)
		require.NoError(t, err)
		require.Equal(t, c.Members, history, "history is append-only")

		// A released request can be admitted again; it queues behind the
		// ones that kept waiting and the one the settlement re-admitted,
		// each under a new row id.
		admitted, err := s.BatchAdmit(ctx, "op-0", 1)
		require.NoError(t, err)
		require.True(t, admitted)
		backdateWaiting(t, s, 1)
		next := mustClaim(t, s, 1, 10)
		require.Equal(t, []string{"op-3", "op-4", "op-1", "op-0"}, memberOpIDs(next.Members))
		require.NotEqual(t, c.Members[1].ID, next.Members[2].ID)
		require.NotEqual(t, c.Members[0].ID, next.Members[3].ID)
		for _, op := range []string{"op-0", "op-1"} {
			require.Equal(t, 2, count(t, db, "SELECT COUNT(*) FROM merge_batch_history WHERE operation_id = ?", op),
				"%s: in two batches, one of them failed", op)
		}
	})
}

func TestBatchSettleBlockedBatch(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		admitWaiting(t, s, 1, "a", 1)
		admitWaiting(t, s, 2, "b", 1)
		a := mustClaim(t, s, 1, 10)
		b := mustClaim(t, s, 2, 10)
		for _, id := range []int64{a.BatchID, b.BatchID} {
			_, err := s.BatchBlock(ctx, store.BatchBlockParams{ID: id, Version: 1, Code: "MERGE_CONFLICT"})
			require.NoError(t, err)
		}
		failA := store.BatchApplyParams{BatchID: a.BatchID, SettleTo: domain.BatchFailed, From: domain.BatchRunning, Version: 2}
		_, err := s.BatchApply(ctx, failA)
		require.ErrorIs(t, err, domain.ErrPreempted, "it is BLOCKED now")

		failA.From, failA.FailureCode = domain.BatchBlocked, "OPERATOR_CLOSED"
		released, err := s.BatchApply(ctx, failA)
		require.NoError(t, err)
		require.Equal(t, a.Members, released)
		require.Equal(t, int64(3), mustBatch(t, s, a.BatchID).Version)
		require.Equal(t, "OPERATOR_CLOSED", mustBatch(t, s, a.BatchID).FailureCode)

		released, err = s.BatchApply(ctx, store.BatchApplyParams{BatchID: b.BatchID, SettleTo: domain.BatchSucceeded, From: domain.BatchBlocked, Version: 2})
		require.NoError(t, err)
		require.Empty(t, released, "a success releases nothing")
		require.Equal(t, domain.BatchSucceeded, mustBatch(t, s, b.BatchID).Status)
		require.Equal(t, int64(3), mustBatch(t, s, b.BatchID).Version)
		require.Equal(t, "MERGE_CONFLICT", mustBatch(t, s, b.BatchID).FailureCode, "why it was blocked stays on record")
		require.Equal(t, 1, count(t, s.DB(), "SELECT COUNT(*) FROM merge_batch_request WHERE batch_id = ?", b.BatchID))
		require.Equal(t, 0, activeBatches(t, s, 1)+activeBatches(t, s, 2))
	})
}

// TestBatchSucceededSettlementKeepsMembersClaimed: "merged wins" — a SUCCEEDED
// settlement frees the slot and keeps the members' rows claimed, so the
// merged requests cannot be admitted again under the same operationId.
func TestBatchSucceededSettlementKeepsMembersClaimed(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		admitWaiting(t, s, 1, "op", 2)
		c := mustClaim(t, s, 1, 10)
		released, err := s.BatchApply(ctx, store.BatchApplyParams{BatchID: c.BatchID, SettleTo: domain.BatchSucceeded, From: domain.BatchRunning, Version: 1})
		require.NoError(t, err)
		require.Empty(t, released)
		b := mustBatch(t, s, c.BatchID)
		require.Equal(t, domain.BatchSucceeded, b.Status)
		require.Equal(t, int64(2), b.Version)
		history, err := s.BatchMembers(ctx, c.BatchID)
		require.NoError(t, err)
		require.Equal(t, c.Members, history)
		require.Equal(t, 2, count(t, s.DB(), "SELECT COUNT(*) FROM merge_batch_request WHERE batch_id = ?", c.BatchID))
		admitted, err := s.BatchAdmit(ctx, "op-0", 1)
		require.NoError(t, err)
		require.False(t, admitted, "a merged request is not admitted again")
		require.Equal(t, 0, activeBatches(t, s, 1))
	})
}

func TestBatchSecondSettlementRollsBackBeforeDoingAnything(t *testing.T) {
	t.Parallel()
	// The guarded batch write comes first, so the losing path of
	// two racing settlements fails there and changes nothing — not even
	// the re-admissions it carries.
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx, db := t.Context(), s.DB()
		waiting := func(op string) int {
			return count(t, db, "SELECT COUNT(*) FROM merge_batch_request WHERE operation_id = ? AND batch_id IS NULL", op)
		}

		t.Run("sequential: a stale settlement after re-admission", func(t *testing.T) {
			admitWaiting(t, s, 1, "seq", 2)
			c := mustClaim(t, s, 1, 10)
			fail := store.BatchApplyParams{BatchID: c.BatchID, SettleTo: domain.BatchFailed, From: domain.BatchRunning, Version: 1,
				Readmit: []string{"seq-0"}, ProjectID: 1} // the workflow re-admits a member
			_, err := s.BatchApply(ctx, fail)
			require.NoError(t, err)
			require.Equal(t, 1, waiting("seq-0"))

			stale := fail
			stale.Readmit = []string{"seq-1"}
			_, err = s.BatchApply(ctx, stale)
			require.ErrorIs(t, err, domain.ErrPreempted)
			stale.SettleTo, stale.Readmit = domain.BatchSucceeded, nil
			_, err = s.BatchApply(ctx, stale)
			require.ErrorIs(t, err, domain.ErrPreempted)
			require.Equal(t, 1, count(t, db, "SELECT COUNT(*) FROM merge_batch_request WHERE operation_id = ?", "seq-0"),
				"the re-admitted request was not released again")
			require.Equal(t, 1, waiting("seq-0"))
			require.Equal(t, 0, count(t, db, "SELECT COUNT(*) FROM merge_batch_request WHERE operation_id = ?", "seq-1"),
				"the losing settlement re-admitted nothing")
			b := mustBatch(t, s, c.BatchID)
			require.Equal(t, domain.BatchFailed, b.Status)
			require.Equal(t, int64(2), b.Version)
		})

		t.Run("concurrent: the second waits for the first and then misses", func(t *testing.T) {
			admitWaiting(t, s, 2, "con", 2)
			c := mustClaim(t, s, 2, 10)
			read := make(chan struct{})
			rel := make(chan struct{})
			release := sync.OnceFunc(func() { close(rel) })
			t.Cleanup(release)
			first := make(chan error, 1)
			p := store.ApplyBeforeCommit(store.BatchApplyParams{BatchID: c.BatchID, SettleTo: domain.BatchFailed, From: domain.BatchRunning, Version: 1,
				FailureCode: "TIMEOUT", Readmit: []string{"con-0"}, ProjectID: 2},
				func(context.Context, *sql.Tx) error {
					close(read)
					<-rel
					return nil
				})
			go func() {
				_, err := s.BatchApply(context.WithoutCancel(ctx), p)
				first <- err
			}()
			<-read
			second := make(chan error, 1)
			go func() {
				_, err := s.BatchApply(ctx, store.BatchApplyParams{BatchID: c.BatchID, SettleTo: domain.BatchSucceeded, From: domain.BatchRunning, Version: 1})
				second <- err
			}()
			if s.Dialect().IsMySQL() {
				waitForLockWait(t, s) // on the batch row the first one updated
			} else {
				time.Sleep(100 * time.Millisecond) // SQLite: waits for the writer lock
			}
			release()
			require.NoError(t, <-first)
			require.ErrorIs(t, <-second, domain.ErrPreempted)
			b := mustBatch(t, s, c.BatchID)
			require.Equal(t, domain.BatchFailed, b.Status, "the first path's outcome stands")
			require.Equal(t, int64(2), b.Version, "exactly one write")
			require.Equal(t, 1, waiting("con-0"), "the first path's re-admission stands")
			require.Equal(t, 0, count(t, db, "SELECT COUNT(*) FROM merge_batch_request WHERE operation_id = ?", "con-1"))
		})
	})
}

func TestBatchSettlementDoesNotBlockAdmissions(t *testing.T) {
	t.Parallel()
	// Settling deletes members by primary key. A range delete over the
	// waiting index would lock the gap after the batch's entries — the
	// place where the next project's first admission goes when that
	// project has claimed rows but nothing waiting. The settlement held
	// open here is the product's whole transaction: the guarded write, the
	// release and a re-admission.
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		onlyMySQL(t, s, "SQLite serializes all writers")
		ctx, db := t.Context(), s.DB()
		admitWaiting(t, s, 1, "p1", 3)
		admitWaiting(t, s, 2, "p2", 2)
		c1 := mustClaim(t, s, 1, 10)
		mustClaim(t, s, 2, 10) // project 2: claimed rows only, nothing waiting

		held := make(chan struct{})
		rel := make(chan struct{})
		release := sync.OnceFunc(func() { close(rel) })
		t.Cleanup(release)
		done := make(chan error, 1)
		p := store.ApplyBeforeCommit(store.BatchApplyParams{BatchID: c1.BatchID, SettleTo: domain.BatchFailed, From: domain.BatchRunning, Version: 1,
			Readmit: []string{"p1-1"}, ProjectID: 1},
			func(context.Context, *sql.Tx) error {
				close(held)
				<-rel
				return nil
			})
		go func() {
			_, err := s.BatchApply(context.WithoutCancel(ctx), p)
			done <- err
		}()
		<-held

		conn, err := db.Conn(ctx)
		require.NoError(t, err)
		defer conn.Close()
		// 0: a statement that would wait for any lock fails at once (error
		// 1205), so "does not wait" is checked as state, not as a duration.
		mustExec(t, conn, "SET SESSION innodb_lock_wait_timeout = 0")
		defer mustExec(t, conn, "SET SESSION innodb_lock_wait_timeout = DEFAULT")
		admit := func(project int64) error {
			tx, err := conn.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
			admitted, err := s.BatchAdmitTx(ctx, tx, fmt.Sprintf("during-settle-%d", project), project)
			if err != nil {
				return err
			}
			require.True(t, admitted)
			return tx.Commit()
		}
		for _, project := range []int64{1, 2, 3} {
			require.NoError(t, admit(project), "project %d: admission must not wait for the settlement", project)
		}
		release()
		require.NoError(t, <-done)
	})
}
