package store_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// TestNotifyPreferencesAreSavedPerAccountAndKind: a save replaces the
// kinds it names and keeps the others; another account's choices are its
// own; racing saves of one kind leave one row, with one of their values.
func TestNotifyPreferencesAreSavedPerAccountAndKind(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		none, err := s.NotifyPreferences(ctx, "alice")
		require.NoError(t, err)
		require.Empty(t, none)

		require.NoError(t, s.NotifyPreferencesSet(ctx, "alice", map[string]bool{"request.submitted": false, "request.approved": false}))
		require.NoError(t, s.NotifyPreferencesSet(ctx, "alice", map[string]bool{"request.approved": true, "request.withdrawn": false}))
		require.NoError(t, s.NotifyPreferencesSet(ctx, "bob", map[string]bool{"request.submitted": true}))
		require.NoError(t, s.NotifyPreferencesSet(ctx, "bob", nil), "nothing to save is no error")

		got, err := s.NotifyPreferences(ctx, "alice")
		require.NoError(t, err)
		require.Equal(t, map[string]bool{"request.submitted": false, "request.approved": true, "request.withdrawn": false}, got)
		got, err = s.NotifyPreferences(ctx, "bob")
		require.NoError(t, err)
		require.Equal(t, map[string]bool{"request.submitted": true}, got)

		require.Error(t, s.NotifyPreferencesSet(ctx, "", map[string]bool{"request.submitted": true}))
		require.Error(t, s.NotifyPreferencesSet(ctx, "alice", map[string]bool{strings.Repeat("k", 49): true}))

		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Go(func() {
				errs[i] = s.NotifyPreferencesSet(ctx, "carol", map[string]bool{"request.in_effect": i%2 == 0})
			})
		}
		wg.Wait()
		for i, err := range errs {
			require.NoError(t, err, "save %d", i)
		}
		var n int
		require.NoError(t, s.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM notify_preference WHERE account = 'carol'").Scan(&n))
		require.Equal(t, 1, n, fmt.Sprintf("one row for carol's one kind, %d found", n))
	})
}
