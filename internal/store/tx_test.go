package store_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

func TestDuplicateInsideTransactionLeavesItUsable(t *testing.T) {
	t.Parallel()
	// The claim catches the slot's duplicate key inside the
	// transaction and goes on.
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		err := s.InTx(t.Context(), nil, func(tx *sql.Tx) error {
			require.NoError(t, insertBatch(t, tx, 1, batchRunning))
			require.ErrorIs(t, insertBatch(t, tx, 1, batchRunning), domain.ErrDuplicate)
			require.NoError(t, insertBatch(t, tx, 1, batchSucceeded), "later statements run")
			return nil
		})
		require.NoError(t, err, "commit succeeds")
		require.Equal(t, 2, count(t, s.DB(), "SELECT COUNT(*) FROM merge_batch"))
	})
}

func TestInTxRollsBack(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		boom := errors.New("boom")
		err := s.InTx(ctx, nil, func(tx *sql.Tx) error {
			require.NoError(t, insertBatch(t, tx, 1, batchRunning))
			return boom
		})
		require.ErrorIs(t, err, boom)
		require.Equal(t, 0, count(t, s.DB(), "SELECT COUNT(*) FROM merge_batch"), "rolled back on error")

		require.PanicsWithValue(t, "kaboom", func() {
			_ = s.InTx(ctx, nil, func(tx *sql.Tx) error {
				require.NoError(t, insertBatch(t, tx, 1, batchRunning))
				panic("kaboom")
			})
		})
		require.Equal(t, 0, count(t, s.DB(), "SELECT COUNT(*) FROM merge_batch"), "rolled back on panic")

		// The slot is free: nothing leaked from the two attempts.
		require.NoError(t, insertBatch(t, s.DB(), 1, batchRunning))
	})
}

func TestInTxTranslatesErrors(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		err := s.InTx(ctx, nil, func(tx *sql.Tx) error {
			var id int64
			return tx.QueryRowContext(ctx, "SELECT id FROM binding WHERE subject_id = ?", "nobody").Scan(&id)
		})
		require.ErrorIs(t, err, domain.ErrNotFound)
		require.ErrorIs(t, err, sql.ErrNoRows, "cause kept")

		insertBinding(t, s.DB(), "alice", "t", "MERGED", "op-1")
		err = s.InTx(ctx, nil, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, "INSERT INTO binding (subject_id, target_key, status, operation_id) VALUES (?, ?, ?, ?)",
				"alice", "t", "MERGED", "op-2")
			return err // untranslated on purpose
		})
		require.ErrorIs(t, err, domain.ErrDuplicate)
	})
}

func TestReadOnlyTransaction(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		err := s.InTx(t.Context(), &sql.TxOptions{ReadOnly: true}, func(tx *sql.Tx) error {
			require.Equal(t, 0, count(t, tx, "SELECT COUNT(*) FROM binding"))
			return nil
		})
		require.NoError(t, err)
	})
}

func TestLockWaitIsBusy(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		db := s.DB()
		id := insertBinding(t, db, "alice", "t", "MERGED", "op-1")

		holder, err := db.BeginTx(ctx, nil)
		require.NoError(t, err)
		defer holder.Rollback() //nolint:errcheck // nothing to keep
		mustExec(t, holder, "UPDATE binding SET version = version + 1 WHERE id = ?", id)

		conn, err := db.Conn(ctx)
		require.NoError(t, err)
		defer conn.Close()
		if s.Dialect().IsMySQL() {
			mustExec(t, conn, "SET SESSION innodb_lock_wait_timeout = 1")
			defer mustExec(t, conn, "SET SESSION innodb_lock_wait_timeout = DEFAULT")
			err = exec(t, conn, "UPDATE binding SET version = version + 1 WHERE id = ?", id)
		} else {
			mustExec(t, conn, "PRAGMA busy_timeout = 20")
			defer mustExec(t, conn, "PRAGMA busy_timeout = 5000")
			var tx *sql.Tx
			tx, err = conn.BeginTx(ctx, nil) // BEGIN IMMEDIATE waits for the write lock
			if err == nil {
				_ = tx.Rollback()
			}
			err = store.Translate(err)
		}
		require.ErrorIs(t, err, domain.ErrBusy)
	})
}

// TestSnapshotIsolationConflictIsPreempted covers MariaDB's error 1020,
// which replaces a short row count when innodb_snapshot_isolation is ON
// (the default from MariaDB 11.6.2).
func TestSnapshotIsolationConflictIsPreempted(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		onlyMySQL(t, s, "SQLite has no snapshot-isolation conflict error")
		ctx := t.Context()
		db := s.DB()
		conn, err := db.Conn(ctx)
		require.NoError(t, err)
		defer conn.Close()
		if err := exec(t, conn, "SET SESSION innodb_snapshot_isolation = ON"); err != nil {
			t.Skipf("server lacks innodb_snapshot_isolation: %v", err)
		}
		defer mustExec(t, conn, "SET SESSION innodb_snapshot_isolation = DEFAULT")

		id := insertBinding(t, db, "alice", "t", "MERGED", "op-1")
		tx, err := conn.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
		require.NoError(t, err)
		defer tx.Rollback() //nolint:errcheck // the point is that it fails
		require.Equal(t, 1, count(t, tx, "SELECT version FROM binding WHERE id = ?", id), "snapshot taken")

		mustExec(t, db, "UPDATE binding SET version = version + 1 WHERE id = ?", id) // a concurrent writer commits

		err = exec(t, tx, "UPDATE binding SET status = ? WHERE id = ? AND version = ?", "VALIDATED", id, 1)
		require.ErrorIs(t, err, domain.ErrPreempted)
	})
}

func TestContextCancellationIsNotTranslated(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Nanosecond)
		defer cancel()
		<-ctx.Done()
		err := s.InTx(ctx, nil, func(*sql.Tx) error { return nil })
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.False(t, errors.Is(err, domain.ErrBusy))
	})
}
