package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

func TestBindingListBySubject(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		mustSubmit(t, s, "mine-b", "alice", "t-b", domain.BindingMRCreating)
		mustSubmit(t, s, "mine-a", "alice", "t-a", domain.BindingMRCreating)
		mustSubmit(t, s, "theirs", "bob", "t-a", domain.BindingMRCreating)
		// One in effect whose expiry passed: the database clock says so,
		// as for every other read of a binding.
		mustSetBinding(t, s, "alice", "t-a", domain.BindingValidated, time.Now().Add(-time.Hour))

		got, err := s.BindingListBySubject(ctx, "alice")
		require.NoError(t, err)
		require.Len(t, got, 2, "alice's bindings only")
		require.Equal(t, []string{"t-a", "t-b"}, []string{got[0].TargetKey, got[1].TargetKey}, "ordered by target")
		require.Equal(t, mustBinding(t, s, "alice", "t-a"), got[0], "the row BindingGet reads")
		require.True(t, got[0].Expired)
		require.Equal(t, "mine-b", got[1].OperationID)
		require.Equal(t, domain.BindingMRCreating, got[1].Status)

		none, err := s.BindingListBySubject(ctx, "nobody")
		require.NoError(t, err)
		require.Empty(t, none)
	})
}
