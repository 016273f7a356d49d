package store_test

import (
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// wantVersions are the migration versions shipped in migrations/{mysql,sqlite}.
var wantVersions = []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}

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
