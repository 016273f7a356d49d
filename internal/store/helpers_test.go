package store_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/store"
)

// execer is what *sql.DB, *sql.Tx and *sql.Conn have in common.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// mustExec runs q and returns the rows it affected.
func mustExec(t testing.TB, db execer, q string, args ...any) int64 {
	t.Helper()
	res, err := db.ExecContext(t.Context(), q, args...)
	require.NoError(t, err, q)
	n, err := res.RowsAffected()
	require.NoError(t, err)
	return n
}

// mustInsert runs an INSERT and returns the new row's id.
func mustInsert(t testing.TB, db execer, q string, args ...any) int64 {
	t.Helper()
	res, err := db.ExecContext(t.Context(), q, args...)
	require.NoError(t, err, q)
	id, err := res.LastInsertId()
	require.NoError(t, err)
	return id
}

// exec runs q and returns its translated error.
func exec(t testing.TB, db execer, q string, args ...any) error {
	t.Helper()
	_, err := db.ExecContext(t.Context(), q, args...)
	return store.Translate(err)
}

// count runs a COUNT(*) query.
func count(t testing.TB, db execer, q string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRowContext(t.Context(), q, args...).Scan(&n), q)
	return n
}

// mustTime scans one time column.
func mustTime(t testing.TB, db execer, q string, args ...any) time.Time {
	t.Helper()
	var v time.Time
	require.NoError(t, db.QueryRowContext(t.Context(), q, args...).Scan(&v), q)
	return v
}

// onlyMySQL skips a subtest on SQLite, saying why.
func onlyMySQL(t *testing.T, s *store.Store, why string) {
	t.Helper()
	if !s.Dialect().IsMySQL() {
		t.Skip("MariaDB only: " + why)
	}
}

// insertBinding inserts a binding row in status and returns its id.
func insertBinding(t testing.TB, db execer, subject, target, status, opID string) int64 {
	t.Helper()
	return mustInsert(t, db,
		"INSERT INTO binding (subject_id, target_key, status, operation_id) VALUES (?, ?, ?, ?)",
		subject, target, status, opID)
}
