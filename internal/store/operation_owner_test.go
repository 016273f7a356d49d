package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

func TestOperationOwnersOf(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		_, err := s.OperationCreate(ctx, opParams("own-a", "alice", "t1"))
		require.NoError(t, err)
		_, err = s.OperationCreate(ctx, opParams("own-b", "bob", "t2"))
		require.NoError(t, err)
		// More ids than one IN list carries: the unknown ones are absent.
		ids := []string{"own-a", "nobody"}
		for i := range store.InChunkSize {
			ids = append(ids, fmt.Sprintf("unknown-%d", i))
		}
		ids = append(ids, "own-b")
		got, err := s.OperationOwnersOf(ctx, ids)
		require.NoError(t, err)
		require.ElementsMatch(t, []store.OperationOwner{
			{OperationID: "own-a", Subject: "alice", TargetKey: "t1", Kind: domain.OperationGrant},
			{OperationID: "own-b", Subject: "bob", TargetKey: "t2", Kind: domain.OperationGrant},
		}, got)
		none, err := s.OperationOwnersOf(ctx, nil)
		require.NoError(t, err)
		require.Empty(t, none)
	})
}

func TestDatabaseNow(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		now, err := s.DatabaseNow(ctx)
		require.NoError(t, err)
		require.Equal(t, time.UTC, now.Location())
		// The same clock the stored defaults come from: a row written
		// now was created at most a moment before a later read.
		_, err = s.OperationCreate(ctx, opParams("clock-1", "alice", "t"))
		require.NoError(t, err)
		later, err := s.DatabaseNow(ctx)
		require.NoError(t, err)
		created := mustOperation(t, s, "clock-1").CreatedAt
		require.False(t, created.Before(now.Add(-time.Second)), "created %v, clock before %v", created, now)
		require.False(t, later.Before(created), "clock after %v, created %v", later, created)
	})
}
