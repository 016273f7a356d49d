package store_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// wantVersions are the migration versions shipped in migrations/{mysql,sqlite}.
var wantVersions = []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 24, 25, 26}

func TestMigrateAppliesOnceAndReportsStatus(t *testing.T) {
	t.Parallel()
	storetest.EachDSN(t, func(t *testing.T, driver, dsn string) {
		ctx := t.Context()
		s := storetest.OpenDSN(t, driver, dsn)

		current, latest, pending, err := s.MigrationStatus(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(0), current, "fresh database")
		require.Equal(t, wantVersions[len(wantVersions)-1], latest)
		require.True(t, pending)

		applied, err := s.Migrate(ctx)
		require.NoError(t, err)
		require.Equal(t, wantVersions, applied)

		current, latest, pending, err = s.MigrationStatus(ctx)
		require.NoError(t, err)
		require.Equal(t, latest, current)
		require.False(t, pending)

		applied, err = s.Migrate(ctx)
		require.NoError(t, err)
		require.Empty(t, applied, "second run applies nothing")

		// A second store (another instance) agrees and applies nothing.
		other := storetest.OpenDSN(t, driver, dsn)
		applied, err = other.Migrate(ctx)
		require.NoError(t, err)
		require.Empty(t, applied)
	})
}

func TestMigrateConcurrentInstances(t *testing.T) {
	t.Parallel()
	storetest.EachDSN(t, func(t *testing.T, driver, dsn string) {
		const instances = 5
		stores := make([]*store.Store, instances)
		for i := range stores {
			stores[i] = storetest.OpenDSN(t, driver, dsn)
		}
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			all     []int64
			errs    []error
			started = make(chan struct{})
		)
		for _, s := range stores {
			wg.Go(func() {
				<-started
				applied, err := s.Migrate(t.Context())
				mu.Lock()
				defer mu.Unlock()
				all = append(all, applied...)
				if err != nil {
					errs = append(errs, err)
				}
			})
		}
		close(started)
		wg.Wait()
		require.Empty(t, errs)
		slices.Sort(all)
		require.Equal(t, wantVersions, all, "every version applied exactly once across instances")

		for _, s := range stores {
			current, latest, pending, err := s.MigrationStatus(t.Context())
			require.NoError(t, err)
			require.Equal(t, latest, current)
			require.False(t, pending)
		}
		for _, v := range wantVersions {
			require.Equal(t, 1, count(t, stores[0].DB(),
				"SELECT COUNT(*) FROM goose_db_version WHERE version_id = ?", v), "version %d recorded once", v)
		}
	})
}

// TestMigrateLeaseRowOnSQLite: SQLite has no session lock, so Migrate
// serializes on a lease row. A row held by a live owner makes another
// migrator wait (and give up busy after its lock timeout, the row left
// alone); a row older than a minute by the database clock is a killed
// migrator's and is taken over; a successful run leaves no row.
func TestMigrateLeaseRowOnSQLite(t *testing.T) {
	t.Parallel()
	dsn := storetest.NewDatabase(t, store.DriverSQLite)
	s := storetest.OpenDSN(t, store.DriverSQLite, dsn, store.WithMigrateLockTimeout(300*time.Millisecond))
	ctx := t.Context()
	_, err := s.Migrate(ctx) // creates the lease table, and leaves no row
	require.NoError(t, err)
	rows := func() int { return count(t, s.DB(), "SELECT COUNT(*) FROM changeflow_migrate_lock") }
	require.Zero(t, rows())

	_, err = s.DB().ExecContext(ctx, "INSERT INTO changeflow_migrate_lock (id, owner, locked_at) VALUES (1, 'alive', CURRENT_TIMESTAMP)")
	require.NoError(t, err)
	_, err = s.Migrate(ctx)
	require.ErrorIs(t, err, domain.ErrBusy, "a live owner's row is waited for, then busy")
	require.Equal(t, 1, count(t, s.DB(), "SELECT COUNT(*) FROM changeflow_migrate_lock WHERE owner = 'alive'"), "and left alone")

	_, err = s.DB().ExecContext(ctx, "UPDATE changeflow_migrate_lock SET locked_at = datetime(CURRENT_TIMESTAMP, '-2 minutes')")
	require.NoError(t, err)
	_, err = s.Migrate(ctx)
	require.NoError(t, err, "a row a killed migrator left is taken over")
	require.Zero(t, rows(), "and released")
}

func TestMigrateInMemorySQLite(t *testing.T) {
	t.Parallel()
	s := storetest.OpenDSN(t, store.DriverSQLite, ":memory:")
	applied, err := s.Migrate(t.Context())
	require.NoError(t, err)
	require.Equal(t, wantVersions, applied)
	_, _, pending, err := s.MigrationStatus(t.Context())
	require.NoError(t, err)
	require.False(t, pending, "one connection keeps the in-memory schema")
}
