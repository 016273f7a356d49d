package store_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// instanceBackdate moves an instance's last heartbeat ago into the past, by the
// database clock.
func instanceBackdate(t *testing.T, s *store.Store, id string, ago time.Duration) {
	t.Helper()
	expr, arg := s.Dialect().NowMinus(ago)
	require.EqualValues(t, 1, mustExec(t, s.DB(),
		"UPDATE instance_heartbeat SET heartbeat_at = "+expr+" WHERE instance_id = ?", arg, id))
}

func TestInstanceHeartbeatAndLiveCount(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		live := func() int {
			t.Helper()
			n, err := s.InstanceCountLive(ctx, 30*time.Second)
			require.NoError(t, err)
			return n
		}
		require.Zero(t, live(), "no instance has beaten yet")

		require.NoError(t, s.InstanceHeartbeat(ctx, "host-a-1"))
		require.Equal(t, 1, live())

		t.Run("a repeated beat is an update, not a second instance", func(t *testing.T) {
			started := mustTime(t, s.DB(), "SELECT started_at FROM instance_heartbeat WHERE instance_id = ?", "host-a-1")
			instanceBackdate(t, s, "host-a-1", 10*time.Second)
			before := mustTime(t, s.DB(), "SELECT heartbeat_at FROM instance_heartbeat WHERE instance_id = ?", "host-a-1")
			require.NoError(t, s.InstanceHeartbeat(ctx, "host-a-1"))
			after := mustTime(t, s.DB(), "SELECT heartbeat_at FROM instance_heartbeat WHERE instance_id = ?", "host-a-1")
			require.True(t, after.After(before), "heartbeat_at moved from %v to %v", before, after)
			require.Equal(t, started, mustTime(t, s.DB(), "SELECT started_at FROM instance_heartbeat WHERE instance_id = ?", "host-a-1"))
			require.Equal(t, 1, count(t, s.DB(), "SELECT COUNT(*) FROM instance_heartbeat"))
		})

		t.Run("every instance that beat within liveAfter counts", func(t *testing.T) {
			require.NoError(t, s.InstanceHeartbeat(ctx, "host-b-2"))
			require.NoError(t, s.InstanceHeartbeat(ctx, "host-c-3"))
			require.Equal(t, 3, live())
		})

		t.Run("an instance silent past liveAfter is not live until it beats again", func(t *testing.T) {
			instanceBackdate(t, s, "host-c-3", time.Minute)
			require.Equal(t, 2, live())
			n, err := s.InstanceCountLive(ctx, 2*time.Minute)
			require.NoError(t, err)
			require.Equal(t, 3, n, "a longer liveAfter still counts it")
			require.NoError(t, s.InstanceHeartbeat(ctx, "host-c-3"))
			require.Equal(t, 3, live())
		})

		t.Run("prune removes only long-dead instances", func(t *testing.T) {
			instanceBackdate(t, s, "host-b-2", 2*time.Hour)
			n, err := s.InstancePrune(ctx, time.Hour)
			require.NoError(t, err)
			require.EqualValues(t, 1, n)
			require.Equal(t, 2, count(t, s.DB(), "SELECT COUNT(*) FROM instance_heartbeat"))
			require.Equal(t, 2, live())
		})
	})
}

func TestInstanceHeartbeatConcurrentFirstBeats(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		// Two goroutines of one instance (or a restart racing the old
		// process's last beat) insert the same id at once: the upsert
		// must absorb the duplicate key rather than fail.
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for range 8 {
			wg.Go(func() {
				for range 2 {
					errs <- s.InstanceHeartbeat(t.Context(), "same-id")
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		n, err := s.InstanceCountLive(t.Context(), time.Minute)
		require.NoError(t, err)
		require.Equal(t, 1, n)
	})
}

func TestInstanceHeartbeatRejectsUnusableIDs(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		for _, id := range []string{"", strings.Repeat("x", 129), "bad\xff"} {
			require.Error(t, s.InstanceHeartbeat(t.Context(), id), "id %q", id)
		}
		require.NoError(t, s.InstanceHeartbeat(t.Context(), strings.Repeat("é", 128)), "128 characters fit")
	})
}
