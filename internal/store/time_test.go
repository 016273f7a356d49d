package store_test

import (
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

func TestTimesRoundTripAtDialectPrecision(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		db, d := s.DB(), s.Dialect()
		tests := []struct {
			name string
			in   time.Time
		}{
			{"nanoseconds in another zone", time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.FixedZone("CET", 3600))},
			{"exact milliseconds", time.Date(2030, 12, 31, 23, 59, 59, 999000000, time.UTC)},
			{"whole second", time.Date(2029, 6, 1, 0, 0, 0, 0, time.UTC)},
			{"now", time.Now()},
		}
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				id := mustInsert(t, db, "INSERT INTO binding (subject_id, target_key, status, operation_id, expires_at) VALUES (?, ?, ?, ?, ?)",
					"alice", tt.name, "MERGED", "op", d.Time(tt.in))
				got := mustTime(t, db, "SELECT expires_at FROM binding WHERE id = ?", id)
				want := tt.in.UTC().Truncate(d.Precision())
				require.True(t, want.Equal(got), "want %v, got %v (case %d)", want, got, i)
				require.Equal(t, time.UTC, got.Location())

				// The stored value matches itself when bound again.
				require.Equal(t, 1, count(t, db, "SELECT COUNT(*) FROM binding WHERE id = ? AND expires_at = ?", id, d.Time(tt.in)))
			})
		}
	})
}

func TestZeroTimeIsNull(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		require.Nil(t, s.Dialect().Time(time.Time{}))
		id := mustInsert(t, s.DB(), "INSERT INTO binding (subject_id, target_key, status, operation_id, expires_at) VALUES (?, ?, ?, ?, ?)",
			"alice", "t", "MERGED", "op", s.Dialect().Time(time.Time{}))
		var got sql.NullTime
		require.NoError(t, s.DB().QueryRowContext(t.Context(), "SELECT expires_at FROM binding WHERE id = ?", id).Scan(&got))
		require.False(t, got.Valid)
	})
}

func TestDefaultsHaveSubSecondPrecision(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		db := s.DB()
		first := mustInsert(t, db, "INSERT INTO merge_batch_request (operation_id, project_id) VALUES (?, ?)", "op-1", 1)
		time.Sleep(3 * time.Millisecond)
		second := mustInsert(t, db, "INSERT INTO merge_batch_request (operation_id, project_id) VALUES (?, ?)", "op-2", 1)
		a := mustTime(t, db, "SELECT created_at FROM merge_batch_request WHERE id = ?", first)
		b := mustTime(t, db, "SELECT created_at FROM merge_batch_request WHERE id = ?", second)
		require.True(t, b.After(a), "3 ms apart must differ: %v, %v", a, b)
		require.Less(t, b.Sub(a), time.Second)
	})
}

func TestDatabaseClockComparesWithStoredDefaults(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		db, d := s.DB(), s.Dialect()
		mustExec(t, db, "INSERT INTO merge_batch_request (operation_id, project_id) VALUES (?, ?)", "op-1", 1)
		q := "SELECT COUNT(*) FROM merge_batch_request WHERE created_at < "
		require.Equal(t, 0, count(t, db, q+d.Now()+" AND created_at > "+d.Now()), "a row is not both before and after now")

		time.Sleep(5 * time.Millisecond)
		require.Equal(t, 1, count(t, db, q+d.Now()), "a row inserted a few ms ago is before the DB clock (claimable)")

		expr, arg := d.NowMinus(time.Hour)
		require.Equal(t, 0, count(t, db, q+expr, arg), "not older than an hour")
		expr, arg = d.NowMinus(time.Millisecond)
		require.Equal(t, 1, count(t, db, q+expr, arg), "older than a millisecond")
		expr, arg = d.NowAdd(90 * time.Second)
		require.Equal(t, 1, count(t, db, q+expr, arg))

		// The window query of reconciliation: minAge < age < maxAge.
		minExpr, minArg := d.NowMinus(time.Millisecond)
		maxExpr, maxArg := d.NowMinus(time.Minute)
		require.Equal(t, 1, count(t, db,
			"SELECT COUNT(*) FROM merge_batch_request WHERE created_at < "+minExpr+" AND created_at > "+maxExpr, minArg, maxArg))

		// Go-side times compare with DB-clock values, both directions.
		require.Equal(t, 1, count(t, db, q+"?", d.Time(time.Now().Add(time.Minute))))
		require.Equal(t, 0, count(t, db, q+"?", d.Time(time.Now().Add(-time.Minute))))
	})
}

func TestDatabaseClockIsUTC(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		now := mustTime(t, s.DB(), "SELECT "+s.Dialect().Now())
		require.WithinDuration(t, time.Now(), now, 5*time.Second, "DB clock read as UTC")

		// Aggregates over time columns scan into time.Time on both drivers.
		mustExec(t, s.DB(), "INSERT INTO instance_heartbeat (instance_id) VALUES (?)", "host-1")
		last := mustTime(t, s.DB(), "SELECT MAX(heartbeat_at) FROM instance_heartbeat")
		require.WithinDuration(t, time.Now(), last, 5*time.Second)
	})
}
