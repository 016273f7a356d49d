package store_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

func TestAuditInsertRecordsOnceAndNeverOverwrites(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		first := store.AuditInsertParams{Key: "settle:7:1", Actor: "olivia", Action: "batch.settle", Resource: "batch:7", Params: `{"id":7}`, Outcome: "SUCCEEDED"}
		inserted, err := s.AuditInsert(ctx, first)
		require.NoError(t, err)
		require.True(t, inserted)

		retry := first
		retry.Outcome = "FAILED"
		inserted, err = s.AuditInsert(ctx, retry)
		require.NoError(t, err, "a duplicate is an answer, not an error")
		require.False(t, inserted)

		got, err := s.AuditListByResource(ctx, "batch:7", 10)
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, "SUCCEEDED", got[0].Outcome, "the first record stays")
		require.Equal(t, `{"id":7}`, got[0].Params)

		inserted, err = s.AuditInsert(ctx, store.AuditInsertParams{Key: "settle:7:2", Actor: "adam", Action: "batch.settle", Resource: "batch:7", Outcome: "OK"})
		require.NoError(t, err)
		require.True(t, inserted)
		got, err = s.AuditListByResource(ctx, "batch:7", 10)
		require.NoError(t, err)
		require.Equal(t, []string{"settle:7:1", "settle:7:2"}, []string{got[0].Key, got[1].Key}, "oldest first")
		require.Empty(t, got[1].Params)
	})
}

func TestAuditInsertRefusesBadKeys(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		for _, tt := range []struct {
			name string
			p    store.AuditInsertParams
		}{
			{"empty key", store.AuditInsertParams{Actor: "a", Action: "b", Outcome: "c"}},
			{"key longer than its column", store.AuditInsertParams{Key: strings.Repeat("k", 129), Actor: "a", Action: "b", Outcome: "c"}},
			{"no actor", store.AuditInsertParams{Key: "k", Action: "b", Outcome: "c"}},
		} {
			t.Run(tt.name, func(t *testing.T) {
				_, err := s.AuditInsert(t.Context(), tt.p)
				require.Error(t, err)
			})
		}
		require.Zero(t, count(t, s.DB(), "SELECT COUNT(*) FROM audit_log"))
	})
}
