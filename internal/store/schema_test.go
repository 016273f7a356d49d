package store_test

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// Batch statuses of merge_batch.status (the domain package will name them).
const (
	batchRunning   = 1
	batchSucceeded = 2
	batchFailed    = 3
	batchBlocked   = 4
)

// bindingStatuses are the 14 BindingStatus names of docs/workflow.md, "Two layers of state", the values
// ck_binding_status admits.
var bindingStatuses = []string{
	"APPROVAL_SENDING", "APPROVAL_SENT", "MR_CREATING", "MR_CREATED", "MERGING", "MERGED",
	"VALIDATED", "CREATE_FAILED", "HANDLE_FAILED", "REJECTED", "CLOSED",
	"REVOKING", "REVOKED", "REVOKE_FAILED",
}

func insertBatch(t *testing.T, db execer, project int64, status int) error {
	t.Helper()
	return exec(t, db, "INSERT INTO merge_batch (project_id, status) VALUES (?, ?)", project, status)
}

func TestActiveSlotAdmitsOneActiveBatchPerProject(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		db := s.DB()
		require.NoError(t, insertBatch(t, db, 1, batchRunning))

		require.ErrorIs(t, insertBatch(t, db, 1, batchRunning), domain.ErrDuplicate, "second RUNNING")
		require.ErrorIs(t, insertBatch(t, db, 1, batchBlocked), domain.ErrDuplicate, "BLOCKED beside RUNNING")
		require.NoError(t, insertBatch(t, db, 2, batchRunning), "another project has its own slot")

		for range 3 {
			require.NoError(t, insertBatch(t, db, 1, batchSucceeded))
			require.NoError(t, insertBatch(t, db, 1, batchFailed))
		}

		// The terminal transition frees the slot by itself.
		require.Equal(t, int64(1), mustExec(t, db,
			"UPDATE merge_batch SET status = ? WHERE project_id = ? AND status = ?", batchSucceeded, 1, batchRunning))
		require.NoError(t, insertBatch(t, db, 1, batchBlocked), "slot free again")
		require.ErrorIs(t, insertBatch(t, db, 1, batchRunning), domain.ErrDuplicate, "BLOCKED holds the slot too")

		require.Equal(t, 2, count(t, db, "SELECT COUNT(*) FROM merge_batch WHERE active_slot IS NOT NULL"))
		require.Equal(t, 1, count(t, db, "SELECT COUNT(*) FROM merge_batch WHERE active_slot = ?", 1))
	})
}

func TestActiveSlotCannotBeWritten(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		db := s.DB()
		err := exec(t, db, "INSERT INTO merge_batch (project_id, status, active_slot) VALUES (?, ?, ?)", 3, batchSucceeded, 3)
		require.Error(t, err, "insert into the generated column")
		require.NoError(t, insertBatch(t, db, 3, batchSucceeded))
		err = exec(t, db, "UPDATE merge_batch SET active_slot = ? WHERE project_id = ?", 3, 3)
		require.Error(t, err, "update of the generated column")
		require.Equal(t, 0, count(t, db, "SELECT COUNT(*) FROM merge_batch WHERE active_slot IS NOT NULL"))

		// Writing NULL cannot free a held slot: SQLite refuses it, MariaDB
		// accepts NULL (and DEFAULT) silently and keeps the computed value.
		require.NoError(t, insertBatch(t, db, 3, batchRunning))
		_ = exec(t, db, "UPDATE merge_batch SET active_slot = NULL WHERE project_id = ? AND status = ?", 3, batchRunning)
		require.Equal(t, 1, count(t, db, "SELECT COUNT(*) FROM merge_batch WHERE active_slot = ?", 3))
		require.ErrorIs(t, insertBatch(t, db, 3, batchRunning), domain.ErrDuplicate)
	})
}

func TestCheckConstraintsRejectUnknownEnumValues(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		db := s.DB()
		for i, status := range bindingStatuses {
			insertBinding(t, db, fmt.Sprintf("user%d", i), "payments-db-readonly", status, fmt.Sprintf("op-%d", i))
		}
		tests := []struct {
			name string
			q    string
			args []any
		}{
			{"binding status outside the 11 names",
				"INSERT INTO binding (subject_id, target_key, status, operation_id) VALUES (?, ?, ?, ?)",
				[]any{"alice", "t", "PROCESSING", "op-x"}},
			{"binding status in lower case",
				"INSERT INTO binding (subject_id, target_key, status, operation_id) VALUES (?, ?, ?, ?)",
				[]any{"alice", "t", "merged", "op-x"}},
			{"binding history status",
				"INSERT INTO binding_history (subject_id, target_key, operation_id, status) VALUES (?, ?, ?, ?)",
				[]any{"alice", "t", "op-x", "DONE"}},
			{"step history binding status",
				"INSERT INTO operation_step (operation_id, to_step, to_binding_status) VALUES (?, ?, ?)",
				[]any{"op-x", 10001, "SENT"}},
			{"batch status 5",
				"INSERT INTO merge_batch (project_id, status) VALUES (?, ?)",
				[]any{1, 5}},
			{"operation flow",
				"INSERT INTO operation (operation_id, subject, target_key, project_id, flow, step_status) VALUES (?, ?, ?, ?, ?, ?)",
				[]any{"op-x", "alice", "t", 1, "FAST", 10001}},
			{"idempotency state",
				"INSERT INTO idempotency_record (idem_key, subject, request_hash, operation_id, state, expires_at) VALUES (?, ?, ?, ?, ?, ?)",
				[]any{"k", "alice", "h", "op-x", "PENDING", s.Dialect().Time(time.Now())}},
			{"approval callback result",
				"INSERT INTO approval_callback (delivery_key, operation_id, result) VALUES (?, ?, ?)",
				[]any{"d", "op-x", "MAYBE"}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				err := exec(t, db, tt.q, tt.args...)
				require.Error(t, err)
				require.True(t, store.IsCheckViolation(err), "want a CHECK violation, got %v", err)
			})
		}
		// NULL passes a CHECK: step history rows without a binding change.
		mustExec(t, db, "INSERT INTO operation_step (operation_id, to_step) VALUES (?, ?)", "op-x", 10001)
	})
}

func TestUniqueKeysAreAnswers(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		db := s.DB()
		dup := func(t *testing.T, q string, args ...any) {
			t.Helper()
			mustExec(t, db, q, args...)
			require.ErrorIs(t, exec(t, db, q, args...), domain.ErrDuplicate, q)
		}
		t.Run("one binding per subject and target (I5)", func(t *testing.T) {
			insertBinding(t, db, "alice", "billing-dashboard", "REJECTED", "op-1")
			err := exec(t, db, "INSERT INTO binding (subject_id, target_key, status, operation_id) VALUES (?, ?, ?, ?)",
				"alice", "billing-dashboard", "APPROVAL_SENDING", "op-2")
			require.ErrorIs(t, err, domain.ErrDuplicate)
			insertBinding(t, db, "alice", "prod-console", "APPROVAL_SENDING", "op-3")
			insertBinding(t, db, "bob", "billing-dashboard", "APPROVAL_SENDING", "op-4")
			// Keys compare byte for byte on both databases (utf8mb4_bin).
			insertBinding(t, db, "Alice", "billing-dashboard", "APPROVAL_SENDING", "op-5")
		})
		t.Run("admission once per operation (I4)", func(t *testing.T) {
			dup(t, "INSERT INTO merge_batch_request (operation_id, project_id) VALUES (?, ?)", "op-1", 1)
		})
		t.Run("operation id", func(t *testing.T) {
			dup(t, "INSERT INTO operation (operation_id, subject, target_key, project_id, flow, step_status) VALUES (?, ?, ?, ?, ?, ?)",
				"op-1", "alice", "billing-dashboard", 1, "LEGACY", 10001)
		})
		t.Run("idempotency key, per caller", func(t *testing.T) {
			dup(t, "INSERT INTO idempotency_record (idem_key, subject, request_hash, operation_id, expires_at) VALUES (?, ?, ?, ?, ?)",
				"key-1", "alice", "h", "op-1", s.Dialect().Time(time.Now().Add(time.Hour)))
			// Another caller's same key is another key.
			mustExec(t, db, "INSERT INTO idempotency_record (idem_key, subject, request_hash, operation_id, expires_at) VALUES (?, ?, ?, ?, ?)",
				"key-1", "bob", "h", "op-2", s.Dialect().Time(time.Now().Add(time.Hour)))
		})
		t.Run("audit key", func(t *testing.T) {
			dup(t, "INSERT INTO audit_log (audit_key, actor, action, outcome) VALUES (?, ?, ?, ?)", "a-1", "olivia", "settle", "OK")
		})
		t.Run("callback and webhook deliveries", func(t *testing.T) {
			dup(t, "INSERT INTO approval_callback (delivery_key, operation_id, result) VALUES (?, ?, ?)", "req-1", "op-1", "APPROVED")
			dup(t, "INSERT INTO deploy_callback (delivery_key, project_id, mr_iid, status) VALUES (?, ?, ?, ?)", "dep-1", 1, 7, "SUCCESS")
			dup(t, "INSERT INTO gitlab_event (event_uuid, kind) VALUES (?, ?)", "uuid-1", "pipeline")
			// Deploy callbacks without a delivery id do not collide (NULLs are distinct).
			mustExec(t, db, "INSERT INTO deploy_callback (project_id, mr_iid, status) VALUES (?, ?, ?)", 1, 8, "SUCCESS")
			mustExec(t, db, "INSERT INTO deploy_callback (project_id, mr_iid, status) VALUES (?, ?, ?)", 1, 8, "SUCCESS")
		})
		t.Run("primary key", func(t *testing.T) {
			dup(t, "INSERT INTO instance_heartbeat (instance_id) VALUES (?)", "host-1")
		})
	})
}

func TestUpdatedAtFollowsEveryUpdate(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		db := s.DB()
		id := insertBinding(t, db, "alice", "billing-dashboard", "APPROVAL_SENDING", "op-1")
		created := mustTime(t, db, "SELECT created_at FROM binding WHERE id = ?", id)
		before := mustTime(t, db, "SELECT updated_at FROM binding WHERE id = ?", id)
		time.Sleep(5 * time.Millisecond) // let the DB clock move past the precision

		require.Equal(t, int64(1), mustExec(t, db,
			"UPDATE binding SET status = ?, version = version + 1 WHERE id = ? AND status = ? AND version = ?",
			"APPROVAL_SENT", id, "APPROVAL_SENDING", 1))
		after := mustTime(t, db, "SELECT updated_at FROM binding WHERE id = ?", id)
		require.True(t, after.After(before), "updated_at moved: %v → %v", before, after)
		require.True(t, created.Equal(mustTime(t, db, "SELECT created_at FROM binding WHERE id = ?", id)), "created_at kept")

		// An explicit value wins over the automatic one, as with ON UPDATE.
		explicit := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
		mustExec(t, db, "UPDATE binding SET status = ?, updated_at = ? WHERE id = ?", "MR_CREATING", s.Dialect().Time(explicit), id)
		require.True(t, explicit.Equal(mustTime(t, db, "SELECT updated_at FROM binding WHERE id = ?", id)))
	})
}

func TestNoOpGuardedUpdateCountsTheRow(t *testing.T) {
	t.Parallel()
	// A guarded write whose new value equals the old one must report 1 row,
	// or callers would read "pre-empted" (MariaDB needs clientFoundRows).
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		db := s.DB()
		id := insertBinding(t, db, "alice", "billing-dashboard", "MERGED", "op-1")
		require.Equal(t, int64(1), mustExec(t, db,
			"UPDATE binding SET status = ? WHERE id = ? AND status = ?", "MERGED", id, "MERGED"))
		require.Equal(t, int64(0), mustExec(t, db,
			"UPDATE binding SET status = ? WHERE id = ? AND status = ?", "VALIDATED", id, "MERGING"), "guard miss")
	})
}

// TestClaimDoesNotBlockAdmission pins the lock footprint I3 relies on: the
// claim's plain read of the waiting set and its guarded UPDATE by id list
// (on the primary key, Dialect.PrimaryKeyHint) take no lock that stops a
// concurrent admission into the same project. SQLite has a single writer
// by design, so this is MariaDB's property.
func TestClaimDoesNotBlockAdmission(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		waiting int
	}{
		{"the whole small waiting set", 3},
		{"chunked id lists", 2*store.InChunkSize + 7},
	}
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		onlyMySQL(t, s, "SQLite serializes all writers")
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				project := int64(100 + i)
				ids := claimWaitingAndHold(t, s, project, tt.waiting)
				require.Len(t, ids, tt.waiting)
			})
		}
	})
}

// claimWaitingAndHold admits n requests into project, claims them as the
// claim transaction does, and — while that transaction is still open
// — admits one more on another connection, which must not wait.
func claimWaitingAndHold(t *testing.T, s *store.Store, project int64, n int) []int64 {
	t.Helper()
	ctx := t.Context()
	db := s.DB()
	for start := 0; start < n; start += store.InChunkSize {
		rows := min(store.InChunkSize, n-start)
		q := "INSERT INTO merge_batch_request (operation_id, project_id) VALUES (?, ?)" +
			strings.Repeat(", (?, ?)", rows-1)
		args := make([]any, 0, 2*rows)
		for i := range rows {
			args = append(args, fmt.Sprintf("p%d-waiting-%d", project, start+i), project)
		}
		mustExec(t, db, q, args...)
	}
	time.Sleep(2 * time.Millisecond) // created_at < DB clock

	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	require.NoError(t, err)
	defer tx.Rollback() //nolint:errcheck // committed below
	batchID := mustInsert(t, tx, "INSERT INTO merge_batch (project_id) VALUES (?)", project)
	rows, err := tx.QueryContext(ctx,
		"SELECT id FROM merge_batch_request WHERE project_id = ? AND batch_id IS NULL AND created_at < "+s.Dialect().Now()+
			" ORDER BY created_at, id LIMIT ?", project, n)
	require.NoError(t, err)
	var ids []int64
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(t, rows.Err())
	for start := 0; start < len(ids); start += store.InChunkSize {
		part := ids[start:min(start+store.InChunkSize, len(ids))]
		args := []any{batchID}
		for _, id := range part {
			args = append(args, id)
		}
		updated := mustExec(t, tx, "UPDATE merge_batch_request "+s.Dialect().PrimaryKeyHint()+
			" SET batch_id = ? WHERE batch_id IS NULL AND id IN (?"+strings.Repeat(", ?", len(part)-1)+")", args...)
		require.Equal(t, int64(len(part)), updated, "guarded claim")
	}

	// Admission on another connection while the claim is open.
	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	// A lock wait timeout of 0 fails the statement at once (error 1205)
	// if it would wait for any lock at all: "does not wait" is checked as
	// state, not as a duration a loaded machine may exceed.
	mustExec(t, conn, "SET SESSION innodb_lock_wait_timeout = 0")
	defer mustExec(t, conn, "SET SESSION innodb_lock_wait_timeout = DEFAULT")
	err = exec(t, conn, "INSERT INTO merge_batch_request (operation_id, project_id) VALUES (?, ?)",
		fmt.Sprintf("p%d-admitted-during-claim", project), project)
	require.NoError(t, err, "admission must not wait for the claim")

	require.NoError(t, tx.Commit())
	require.Equal(t, 1, count(t, db, "SELECT COUNT(*) FROM merge_batch_request WHERE project_id = ? AND batch_id IS NULL", project))
	require.NoError(t, exec(t, db, "UPDATE merge_batch SET status = ? WHERE id = ?", batchSucceeded, batchID))
	return ids
}

func TestCheckViolationIsNotADuplicate(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		err := exec(t, s.DB(), "INSERT INTO merge_batch (project_id, status) VALUES (?, ?)", 1, 9)
		require.Error(t, err)
		for _, sentinel := range []error{domain.ErrDuplicate, domain.ErrBusy, domain.ErrPreempted, domain.ErrNotFound} {
			require.False(t, errors.Is(err, sentinel), "%v is not %v", err, sentinel)
		}
	})
}
