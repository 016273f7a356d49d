package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

func TestOperationListBySubject(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		// Eight of alice's requests, the middle four created in the same
		// instant (the id breaks the tie), and two of bob's.
		var want []string
		for i := range 8 {
			id := fmt.Sprintf("alice-%d", i)
			_, err := s.OperationCreate(ctx, opParams(id, "alice", fmt.Sprintf("t%d", i)))
			require.NoError(t, err)
			want = append([]string{id}, want...) // newest first
		}
		for i := range 2 {
			_, err := s.OperationCreate(ctx, opParams(fmt.Sprintf("bob-%d", i), "bob", "t"))
			require.NoError(t, err)
		}
		same := s.Dialect().Time(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
		mustExec(t, s.DB(), "UPDATE operation SET created_at = ? WHERE operation_id IN ('alice-2', 'alice-3', 'alice-4', 'alice-5')", same)
		// created_at order is now 0, 1, 6, 7 < 2..5 (the far future), so
		// newest first: 5, 4, 3, 2 (by id) then 7, 6, 1, 0.
		want = []string{"alice-5", "alice-4", "alice-3", "alice-2", "alice-7", "alice-6", "alice-1", "alice-0"}

		for _, limit := range []int{1, 3, 4, 8, 50} {
			t.Run(fmt.Sprintf("pages of %d", limit), func(t *testing.T) {
				var (
					got   []string
					after store.OperationCursor
					pages int
				)
				for {
					page, err := s.OperationListBySubject(ctx, store.OperationListBySubjectParams{Subject: "alice", Limit: limit, After: after})
					require.NoError(t, err)
					pages++
					require.LessOrEqual(t, len(page.Items), limit)
					for _, o := range page.Items {
						require.Equal(t, "alice", o.Subject)
						got = append(got, o.OperationID)
					}
					if page.Next.IsZero() {
						break
					}
					// The cursor survives the API's round trip.
					after, err = store.ParseOperationCursor(page.Next.Encode())
					require.NoError(t, err)
					require.Equal(t, page.Next.ID, after.ID)
					require.True(t, page.Next.CreatedAt.Equal(after.CreatedAt))
				}
				require.Equal(t, want, got, "every row once, newest first")
				require.Equal(t, (len(want)+limit-1)/limit, pages, "no empty trailing page")
			})
		}
		t.Run("a subject without requests has an empty page", func(t *testing.T) {
			page, err := s.OperationListBySubject(ctx, store.OperationListBySubjectParams{Subject: "carol", Limit: 10})
			require.NoError(t, err)
			require.Empty(t, page.Items)
			require.True(t, page.Next.IsZero())
		})
		t.Run("the limit is clamped", func(t *testing.T) {
			page, err := s.OperationListBySubject(ctx, store.OperationListBySubjectParams{Subject: "alice", Limit: 0})
			require.NoError(t, err)
			require.Len(t, page.Items, 1)
		})
	})
}

func TestOperationCursorEncoding(t *testing.T) {
	t.Parallel()
	c := store.OperationCursor{CreatedAt: time.Date(2030, 5, 6, 7, 8, 9, 123456000, time.UTC), ID: 42}
	got, err := store.ParseOperationCursor(c.Encode())
	require.NoError(t, err)
	require.Equal(t, c, got)

	zero, err := store.ParseOperationCursor("")
	require.NoError(t, err)
	require.True(t, zero.IsZero())
	require.Empty(t, store.OperationCursor{}.Encode())

	for _, bad := range []string{"%%%", "bm9kb3Q", "MTIzLmFiYw", "MTIzLjA"} { // not base64, "nodot", "123.abc", "123.0"
		_, err := store.ParseOperationCursor(bad)
		require.Error(t, err, bad)
	}
}
