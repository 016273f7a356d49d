package store_test

import (
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// holdAndRelease takes n connections at once and gives them back, so the
// pool's idle limit decides how many stay.
func holdAndRelease(t *testing.T, db *sql.DB, n int) {
	t.Helper()
	conns := make([]*sql.Conn, n)
	for i := range conns {
		c, err := db.Conn(t.Context())
		require.NoError(t, err)
		conns[i] = c
	}
	for _, c := range conns {
		require.NoError(t, c.Close())
	}
}

// database.maxIdleConns reached the pool: before WithPoolLimits the
// configured value was read, documented and then dropped, and every open
// connection stayed idle.
func TestPoolLimitsReachThePool(t *testing.T) {
	storetest.EachDSN(t, func(t *testing.T, driver, dsn string) {
		t.Run("configured", func(t *testing.T) {
			st := storetest.OpenDSN(t, driver, dsn, store.WithMaxOpenConns(6), store.WithPoolLimits(2, time.Hour, time.Hour))
			holdAndRelease(t, st.DB(), 5)
			stats := st.DB().Stats()
			require.Equal(t, 2, stats.Idle, "idle connections kept")
			require.GreaterOrEqual(t, stats.MaxIdleClosed, int64(3), "connections closed for the idle limit")
		})
		t.Run("idle limit above the open limit is the open limit", func(t *testing.T) {
			st := storetest.OpenDSN(t, driver, dsn, store.WithMaxOpenConns(3), store.WithPoolLimits(50, 0, 0))
			holdAndRelease(t, st.DB(), 3)
			require.Equal(t, 3, st.DB().Stats().Idle)
		})
		t.Run("zero idle connections", func(t *testing.T) {
			st := storetest.OpenDSN(t, driver, dsn, store.WithMaxOpenConns(4), store.WithPoolLimits(0, 0, 0))
			holdAndRelease(t, st.DB(), 3)
			require.Zero(t, st.DB().Stats().Idle)
		})
	})
}

// An in-memory SQLite database is its one connection: an idle limit of 0
// would close it and lose every table, so the limits do not apply there.
func TestPoolLimitsKeepTheInMemoryDatabase(t *testing.T) {
	st, err := store.Open(t.Context(), store.DriverSQLite, ":memory:", store.WithPoolLimits(0, time.Nanosecond, time.Nanosecond))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	_, err = st.DB().ExecContext(t.Context(), "CREATE TABLE kept (id INTEGER)")
	require.NoError(t, err)
	time.Sleep(5 * time.Millisecond) // past the lifetime the limits would set
	_, err = st.DB().ExecContext(t.Context(), "INSERT INTO kept (id) VALUES (1)")
	require.NoError(t, err, "the in-memory database survived")
}
