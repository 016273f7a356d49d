package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// viewOf is the part of a full read that OperationViewGet reads: the
// fields its documentation lists, every other one zero.
func viewOf(o store.Operation, b store.Binding, has bool) store.OperationWithBinding {
	out := store.OperationWithBinding{Operation: store.Operation{
		OperationID: o.OperationID, Subject: o.Subject, TargetKey: o.TargetKey, Flow: o.Flow, Kind: o.Kind,
		GrantOperationID: o.GrantOperationID, RevokeReason: o.RevokeReason, Step: o.Step,
		BatchID: o.BatchID, MRIID: o.MRIID, MRURL: o.MRURL, Reason: o.Reason, Days: o.Days,
		ExpiresAt: o.ExpiresAt, CreatedAt: o.CreatedAt, UpdatedAt: o.UpdatedAt,
	}}
	if has {
		out.HasBinding = true
		out.Binding = store.Binding{ID: b.ID, OperationID: b.OperationID, Status: b.Status,
			ExpiresAt: b.ExpiresAt, UpdatedAt: b.UpdatedAt, Expired: b.Expired}
	}
	return out
}

// mustView checks that OperationViewGet reads what the full read
// (OperationGetWithBinding) reads of the view's fields, and returns it.
func mustView(t *testing.T, s *store.Store, id string) store.OperationWithBinding {
	t.Helper()
	full, err := s.OperationGetWithBinding(t.Context(), id)
	require.NoError(t, err)
	got, err := s.OperationViewGet(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, viewOf(full.Operation, full.Binding, full.HasBinding), got)
	return got
}

func TestOperationViewGet(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		t.Run("reads the view's fields as the full read does", func(t *testing.T) {
			mustSubmit(t, s, "ov-1", "alice", "billing", domain.BindingApprovalSending)
			got := mustView(t, s, "ov-1")
			require.True(t, got.HasBinding)
			require.False(t, got.Operation.CreatedAt.IsZero())
			require.False(t, got.Binding.UpdatedAt.IsZero())
			require.Equal(t, time.UTC, got.Operation.UpdatedAt.Location())
		})
		t.Run("every optional column set, times at the dialect's precision", func(t *testing.T) {
			mustSubmit(t, s, "ov-full", "alice", "full", domain.BindingApprovalSending)
			at := time.Date(2031, 2, 3, 4, 5, 6, 789123456, time.UTC)
			mustExec(t, s.DB(), "UPDATE operation SET batch_id = 7, mr_iid = 42, mr_url = 'https://gitlab.example/mr/42', "+
				"kind = 'REVOKE', grant_operation_id = 'ov-grant', revoke_reason = 'GIVEN_BACK', days = 3, expires_at = ?, updated_at = ? "+
				"WHERE operation_id = 'ov-full'", s.Dialect().Time(at), s.Dialect().Time(at.Add(time.Second)))
			mustSetBinding(t, s, "alice", "full", domain.BindingValidated, at)
			got := mustView(t, s, "ov-full")
			o := got.Operation
			require.Equal(t, at.Truncate(s.Dialect().Precision()), o.ExpiresAt)
			require.Equal(t, at.Add(time.Second).Truncate(s.Dialect().Precision()), o.UpdatedAt)
			require.Equal(t, at.Truncate(s.Dialect().Precision()), got.Binding.ExpiresAt)
			require.Equal(t, []any{int64(7), int64(42), "https://gitlab.example/mr/42", domain.OperationRevoke, "ov-grant", domain.RevokeReason("GIVEN_BACK"), 3},
				[]any{o.BatchID, o.MRIID, o.MRURL, o.Kind, o.GrantOperationID, o.RevokeReason, o.Days})
			require.True(t, got.Binding.InEffect())
		})
		t.Run("the binding's expiry is judged by the database clock", func(t *testing.T) {
			mustSubmit(t, s, "ov-expired", "alice", "expired", domain.BindingApprovalSending)
			mustSetBinding(t, s, "alice", "expired", domain.BindingValidated, time.Now().Add(-time.Hour))
			require.True(t, mustView(t, s, "ov-expired").Binding.Expired)
		})
		t.Run("NULL times read as zero", func(t *testing.T) {
			mustSubmit(t, s, "ov-null", "alice", "null", domain.BindingApprovalSending)
			mustExec(t, s.DB(), "UPDATE operation SET expires_at = NULL, days = NULL WHERE operation_id = 'ov-null'")
			mustSetBinding(t, s, "alice", "null", domain.BindingValidated, time.Time{})
			got := mustView(t, s, "ov-null")
			require.True(t, got.Operation.ExpiresAt.IsZero())
			require.True(t, got.Binding.ExpiresAt.IsZero())
			require.False(t, got.Binding.Expired)
		})
		t.Run("a time written without Dialect.Time is read as the driver reads it", func(t *testing.T) {
			// The driver's own layout for a bound time.Time (on SQLite
			// "…05.999999999-07:00"), which only the general parser reads.
			mustSubmit(t, s, "ov-raw", "alice", "raw", domain.BindingApprovalSending)
			raw := time.Date(2032, 7, 8, 9, 10, 11, 120000000, time.FixedZone("X", 2*3600))
			mustExec(t, s.DB(), "UPDATE operation SET expires_at = ? WHERE operation_id = 'ov-raw'", raw)
			got := mustView(t, s, "ov-raw")
			require.True(t, raw.Equal(got.Operation.ExpiresAt), "%v read as %v", raw, got.Operation.ExpiresAt)
		})
		t.Run("an operation no binding names has none", func(t *testing.T) {
			_, err := s.OperationCreate(ctx, opParams("ov-bare", "alice", "bare"))
			require.NoError(t, err)
			insertBinding(t, s.DB(), "alice", "bare", string(domain.BindingApprovalSending), "ov-someone-else")
			got := mustView(t, s, "ov-bare")
			require.False(t, got.HasBinding)
			require.Zero(t, got.Binding)
		})
		t.Run("a missing operation is not found", func(t *testing.T) {
			_, err := s.OperationViewGet(ctx, "ov-missing")
			require.ErrorIs(t, err, domain.ErrNotFound)
		})
	})
}

// The database clock's own text — what every DB-clock default stores —
// is read by the fast parser on each dialect, as the instant the store's
// general read of the clock returns.
func TestParseDBTimeReadsTheDatabaseClock(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		// As text: on SQLite cast to BLOB, or the driver's _texttotime
		// would hand the expression over as a time.Time already.
		q := "SELECT CAST(strftime('%Y-%m-%d %H:%M:%f','now') AS BLOB)"
		if s.Dialect().IsMySQL() {
			q = "SELECT CAST(CURRENT_TIMESTAMP(6) AS CHAR)"
		}
		for range 20 {
			before, err := s.DatabaseNow(t.Context())
			require.NoError(t, err)
			var raw []byte
			require.NoError(t, s.DB().QueryRowContext(t.Context(), q).Scan(&raw))
			text := string(raw)
			got, ok := store.ParseDBTime(text)
			require.True(t, ok, "the database clock's text %q", text)
			want, err := time.ParseInLocation("2006-01-02 15:04:05.999999999", text, time.UTC)
			require.NoError(t, err)
			require.Equal(t, want, got, text)
			require.False(t, got.Before(before), "%q read as %v, before the clock read earlier (%v)", text, got, before)
		}
	})
}
