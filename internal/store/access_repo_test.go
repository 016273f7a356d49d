package store_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// TestAccessRepoApply: the repo periods a pass writes — opened at the
// adding commit's time with its sha, ended at the removing one's with
// end_sha — and the "at" answers around them; the cursor moves with
// them; a stale cursor is preempted and writes nothing.
func TestAccessRepoApply(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
		t1 := t0.Add(time.Hour)
		c0, err := s.AccessRepoCursor(ctx, "t", "bindings/t.yaml")
		require.NoError(t, err)
		require.Equal(t, store.RepoCursor{}, c0, "never read")

		first := store.RepoCursor{SHA: "sha-add", At: t0}
		require.NoError(t, s.AccessRepoApply(ctx, "t", "bindings/t.yaml", c0, first, []store.RepoAccessWrite{
			{Subject: "mallory", OperationID: "hand-1", Opens: true, SHA: "sha-add", At: t0},
			{Subject: "nobody", SHA: "sha-add", At: t0}, // an end with none open: nothing
		}))
		got, err := s.AccessRepoCursor(ctx, "t", "bindings/t.yaml")
		require.NoError(t, err)
		require.Equal(t, "sha-add", got.SHA)
		require.True(t, got.At.Equal(t0), "cursor time %v", got.At)

		require.Empty(t, accessAt(t, s, "t", t0.Add(-time.Second)))
		at := accessAt(t, s, "t", t0.Add(time.Second))
		require.Len(t, at, 1)
		require.Equal(t, store.AccessSourceRepo, at[0].Source)
		require.Equal(t, "mallory", at[0].Subject)
		require.Equal(t, "hand-1", at[0].OperationID)
		require.Equal(t, "sha-add", at[0].MergeSHA)
		require.True(t, at[0].Open())

		// A second opening while open changes nothing.
		second := store.RepoCursor{SHA: "sha-del", At: t1}
		require.NoError(t, s.AccessRepoApply(ctx, "t", "bindings/t.yaml", first, second, []store.RepoAccessWrite{
			{Subject: "mallory", OperationID: "hand-1", Opens: true, SHA: "sha-x", At: t0.Add(time.Minute)},
			{Subject: "mallory", SHA: "sha-del", At: t1},
		}))
		require.Empty(t, accessAt(t, s, "t", t1.Add(time.Second)))
		hist, _, err := s.AccessHistory(ctx, "t", t0.Add(-time.Hour), t1.Add(time.Hour), 10)
		require.NoError(t, err)
		require.Len(t, hist, 1)
		require.True(t, hist[0].From.Equal(t0) && hist[0].Until.Equal(t1), "period %v–%v", hist[0].From, hist[0].Until)
		require.Equal(t, "sha-add", hist[0].MergeSHA)
		require.Equal(t, "sha-del", hist[0].EndSHA)

		// A pass from a cursor that has moved on is preempted, whole.
		err = s.AccessRepoApply(ctx, "t", "bindings/t.yaml", first, store.RepoCursor{SHA: "sha-late", At: t1}, []store.RepoAccessWrite{
			{Subject: "trent", Opens: true, SHA: "sha-late", At: t1},
		})
		require.ErrorIs(t, err, domain.ErrPreempted)
		require.Empty(t, accessAt(t, s, "t", t1.Add(time.Second)), "the preempted pass wrote nothing")
		// So is a first read of a file another reader has started.
		err = s.AccessRepoApply(ctx, "t", "bindings/t.yaml", store.RepoCursor{}, first, nil)
		require.ErrorIs(t, err, domain.ErrPreempted)
	})
}

// TestAccessRepoCursorRace: readers racing from the same cursor with the
// same commits — the first read of a file, then a move — exactly one
// applies each pass, and the period it writes exists once.
func TestAccessRepoCursorRace(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		t0 := time.Date(2026, 5, 2, 9, 0, 0, 0, time.UTC)
		race := func(from, to store.RepoCursor, w store.RepoAccessWrite) int {
			const readers = 4
			var (
				wg   sync.WaitGroup
				mu   sync.Mutex
				wins int
			)
			for range readers {
				wg.Go(func() {
					err := s.AccessRepoApply(ctx, "r", "bindings/r.yaml", from, to, []store.RepoAccessWrite{w})
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						wins++
					case !errors.Is(err, domain.ErrPreempted):
						t.Errorf("a losing reader: %v, want ErrPreempted", err)
					}
				})
			}
			wg.Wait()
			return wins
		}
		a := store.RepoCursor{SHA: "a", At: t0}
		require.Equal(t, 1, race(store.RepoCursor{}, a, store.RepoAccessWrite{Subject: "eve", Opens: true, SHA: "a", At: t0}))
		b := store.RepoCursor{SHA: "b", At: t0.Add(time.Minute)}
		require.Equal(t, 1, race(a, b, store.RepoAccessWrite{Subject: "eve", SHA: "b", At: b.At}))
		hist, _, err := s.AccessHistory(ctx, "r", t0.Add(-time.Hour), t0.Add(time.Hour), 10)
		require.NoError(t, err)
		require.Len(t, hist, 1)
		require.Equal(t, "b", hist[0].EndSHA)
	})
}
