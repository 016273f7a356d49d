package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// The full read OperationViewGet is compared with (export_test.go) reads
// what the two separate reads read: so the comparison has a trustworthy
// reference.
func TestOperationGetWithBinding(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		t.Run("reads what the two separate reads read", func(t *testing.T) {
			mustSubmit(t, s, "owb-1", "alice", "billing", domain.BindingApprovalSending)
			got, err := s.OperationGetWithBinding(ctx, "owb-1")
			require.NoError(t, err)
			require.Equal(t, mustOperation(t, s, "owb-1"), got.Operation)
			b, err := s.BindingGetByOperation(ctx, "owb-1")
			require.NoError(t, err)
			require.True(t, got.HasBinding)
			require.Equal(t, b, got.Binding)
			require.False(t, got.Binding.Expired)
		})
		t.Run("the binding's expiry is judged by the database clock, as alone", func(t *testing.T) {
			mustSubmit(t, s, "owb-expired", "alice", "expired", domain.BindingApprovalSending)
			mustSetBinding(t, s, "alice", "expired", domain.BindingValidated, time.Now().Add(-time.Hour))
			got, err := s.OperationGetWithBinding(ctx, "owb-expired")
			require.NoError(t, err)
			b, err := s.BindingGetByOperation(ctx, "owb-expired")
			require.NoError(t, err)
			require.True(t, b.Expired)
			require.Equal(t, b, got.Binding)
		})
		t.Run("an operation no binding names has none", func(t *testing.T) {
			_, err := s.OperationCreate(ctx, opParams("owb-bare", "alice", "bare"))
			require.NoError(t, err)
			insertBinding(t, s.DB(), "alice", "bare", string(domain.BindingApprovalSending), "owb-someone-else")
			got, err := s.OperationGetWithBinding(ctx, "owb-bare")
			require.NoError(t, err)
			require.Equal(t, mustOperation(t, s, "owb-bare"), got.Operation)
			require.False(t, got.HasBinding)
			require.Zero(t, got.Binding)
		})
		t.Run("a missing operation is not found", func(t *testing.T) {
			_, err := s.OperationGetWithBinding(ctx, "owb-missing")
			require.ErrorIs(t, err, domain.ErrNotFound)
		})
	})
}

// preparedOn is how many prepared reads a store on driver keeps after n
// distinct hot reads: n on SQLite, none on MariaDB/MySQL (text statements
// only there, prepared.go).
func preparedOn(driver string, n int) int {
	if driver == store.DriverMySQL {
		return 0
	}
	return n
}

// The hot reads are prepared once per pooled connection and then only
// executed on SQLite, and sent as text statements on MariaDB: either way
// statements grow with the reads, prepares do not.
func TestPreparedReadsAreReused(t *testing.T) {
	t.Parallel()
	for _, driver := range storetest.Drivers() {
		t.Run(driver, func(t *testing.T) {
			s, counter, err := store.OpenCounting(t.Context(), driver, storetest.NewMigratedDatabase(t, driver))
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			_, err = s.Migrate(t.Context())
			require.NoError(t, err)
			mustSubmit(t, s, "prep-1", "alice", "billing", domain.BindingApprovalSending)
			ctx := t.Context()
			reads := func(n int) {
				for range n {
					_, err := s.OperationGet(ctx, "prep-1")
					require.NoError(t, err)
					_, err = s.BindingGetByOperation(ctx, "prep-1")
					require.NoError(t, err)
					_, err = s.OperationViewGet(ctx, "prep-1")
					require.NoError(t, err)
				}
			}
			reads(20) // every idle connection sees each statement once
			s0, p0, _ := counter.Snapshot()
			reads(50)
			s1, p1, _ := counter.Snapshot()
			require.Equal(t, int64(150), s1-s0, "one statement per read")
			require.Zero(t, p1-p0, "no read prepares again")
			require.Equal(t, preparedOn(driver, 3), store.PreparedReads(s))
		})
	}
}

// Many first reads at once prepare each statement for the store once
// (the losers of the race close their copies) and all read correctly.
func TestPreparedReadsFirstUseRace(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		for i := range raceGoroutines {
			mustSubmit(t, s, fmt.Sprintf("prep-race-%d", i), "alice", fmt.Sprintf("t-%d", i), domain.BindingApprovalSending)
		}
		errs := make(chan error, raceGoroutines)
		runAtOnce(func(g int) {
			id := fmt.Sprintf("prep-race-%d", g)
			got, err := s.OperationViewGet(context.Background(), id)
			switch {
			case err != nil:
				errs <- err
			case got.Operation.OperationID != id || got.Binding.OperationID != id || got.Operation.TargetKey != fmt.Sprintf("t-%d", g) || !got.HasBinding:
				errs <- fmt.Errorf("%s read %+v", id, got)
			}
			if _, err := s.OperationGet(context.Background(), id); err != nil {
				errs <- err
			}
		})
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		require.Equal(t, preparedOn(s.Dialect().Name(), 2), store.PreparedReads(s))
	})
}

// A read after Close fails; it does not prepare on a closed pool.
func TestPreparedReadsAfterClose(t *testing.T) {
	t.Parallel()
	storetest.EachDSN(t, func(t *testing.T, driver, dsn string) {
		s, err := store.Open(t.Context(), driver, dsn)
		require.NoError(t, err)
		_, err = s.Migrate(t.Context())
		require.NoError(t, err)
		_, err = s.OperationGet(t.Context(), "nobody")
		require.ErrorIs(t, err, domain.ErrNotFound)
		require.NoError(t, s.Close())
		_, err = s.OperationGet(t.Context(), "nobody")
		require.Error(t, err)
		require.NotErrorIs(t, err, domain.ErrNotFound)
		require.Zero(t, store.PreparedReads(s))
	})
}
