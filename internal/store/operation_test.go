package store_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

func TestOperationCreate(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		t.Run("creates at version 1 with its first history row", func(t *testing.T) {
			p := opParams("op-create", "alice", "billing-dashboard")
			o, err := s.OperationCreate(ctx, p)
			require.NoError(t, err)
			require.Equal(t, "op-create", o.OperationID)
			require.Equal(t, stepCreateStarted, o.Step)
			require.Equal(t, int64(1), o.Version)
			require.Equal(t, 7, o.Days)
			require.True(t, p.ExpiresAt.Equal(o.ExpiresAt))
			require.False(t, o.CreatedAt.IsZero())
			require.Equal(t, o, mustOperation(t, s, "op-create"))

			steps := mustSteps(t, s, "op-create")
			require.Len(t, steps, 1)
			require.Equal(t, 0, steps[0].FromStep)
			require.Equal(t, stepCreateStarted, steps[0].ToStep)
			require.Empty(t, steps[0].ToBinding, "no binding named")
		})
		t.Run("optional columns are NULL and read as zero", func(t *testing.T) {
			p := opParams("op-bare", "alice", "billing-dashboard")
			p.Days, p.ExpiresAt = 0, time.Time{}
			o, err := s.OperationCreate(ctx, p)
			require.NoError(t, err)
			require.Zero(t, o.Days)
			require.True(t, o.ExpiresAt.IsZero())
			require.Zero(t, o.BatchID)
			require.Zero(t, o.MRIID)
			require.Empty(t, o.LastError)
			require.Equal(t, 1, count(t, s.DB(), "SELECT COUNT(*) FROM operation WHERE operation_id = ? AND days IS NULL AND expires_at IS NULL", "op-bare"))
		})
		t.Run("an existing operationId is a duplicate and writes nothing", func(t *testing.T) {
			_, err := s.OperationCreate(ctx, opParams("op-twice", "alice", "t"))
			require.NoError(t, err)
			_, err = s.OperationCreate(ctx, opParams("op-twice", "bob", "t"))
			require.ErrorIs(t, err, domain.ErrDuplicate)
			require.Len(t, mustSteps(t, s, "op-twice"), 1, "the loser's history row rolled back")
		})
		t.Run("a long reason is clipped to its column", func(t *testing.T) {
			p := opParams("op-long-reason", "alice", "t")
			p.Reason = strings.Repeat("é", 2000)
			o, err := s.OperationCreate(ctx, p)
			require.NoError(t, err)
			require.Equal(t, strings.Repeat("é", 1024), o.Reason)
		})
		for _, tt := range []struct {
			name   string
			mutate func(*store.OperationCreateParams)
		}{
			{"missing operationId is refused", func(p *store.OperationCreateParams) { p.OperationID = "" }},
			{"missing subject is refused", func(p *store.OperationCreateParams) { p.Subject = "" }},
			{"an operationId longer than its column is refused", func(p *store.OperationCreateParams) { p.OperationID = strings.Repeat("x", 65) }},
			{"a step code of 0 is refused", func(p *store.OperationCreateParams) { p.Step = 0 }},
		} {
			t.Run(tt.name, func(t *testing.T) {
				p := opParams("op-invalid", "alice", "t")
				tt.mutate(&p)
				_, err := s.OperationCreate(ctx, p)
				require.Error(t, err)
				require.Zero(t, count(t, s.DB(), "SELECT COUNT(*) FROM operation WHERE operation_id = ?", p.OperationID))
			})
		}
	})
}

func TestOperationGetUnknownIsNotFound(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		_, err := s.OperationGet(t.Context(), "nope")
		require.ErrorIs(t, err, domain.ErrNotFound)
		steps, err := s.OperationStepList(t.Context(), "nope")
		require.NoError(t, err)
		require.Empty(t, steps)
	})
}

func TestOperationSubmit(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		t.Run("creates the operation and its binding together", func(t *testing.T) {
			res := mustSubmit(t, s, "op-1", "alice", "billing-dashboard", domain.BindingApprovalSending)
			require.Equal(t, int64(1), res.Operation.Version)
			require.True(t, res.Application.First)
			b := res.Application.Binding
			require.Equal(t, domain.BindingApprovalSending, b.Status)
			require.Equal(t, "op-1", b.OperationID)
			require.True(t, res.Operation.ExpiresAt.Equal(b.ExpiresAt), "the binding lapses with the request")
			require.Equal(t, b, mustBinding(t, s, "alice", "billing-dashboard"))

			steps := mustSteps(t, s, "op-1")
			require.Len(t, steps, 1)
			require.Equal(t, domain.BindingApprovalSending, steps[0].ToBinding)
			require.Empty(t, steps[0].FromBinding)
		})
		t.Run("a refused application leaves no operation behind", func(t *testing.T) {
			_, err := s.OperationSubmit(ctx, store.OperationSubmitParams{
				Operation: opParams("op-2", "alice", "billing-dashboard"), BindingStatus: domain.BindingApprovalSending,
			})
			var refused *store.BindingRefusedError
			require.ErrorAs(t, err, &refused)
			require.Equal(t, domain.CodeRequestInProgress, refused.Code())
			require.Equal(t, "op-1", refused.Current.OperationID)
			_, err = s.OperationGet(ctx, "op-2")
			require.ErrorIs(t, err, domain.ErrNotFound)
			require.Empty(t, mustSteps(t, s, "op-2"))
		})
		t.Run("a duplicate operationId leaves the binding alone", func(t *testing.T) {
			mustSetBinding(t, s, "alice", "billing-dashboard", domain.BindingRejected, time.Time{})
			before := mustBinding(t, s, "alice", "billing-dashboard")
			_, err := s.OperationSubmit(ctx, store.OperationSubmitParams{
				Operation: opParams("op-1", "alice", "billing-dashboard"), BindingStatus: domain.BindingApprovalSending,
			})
			require.ErrorIs(t, err, domain.ErrDuplicate)
			require.Equal(t, before, mustBinding(t, s, "alice", "billing-dashboard"))
		})
		t.Run("a re-application resets the row and records both", func(t *testing.T) {
			res := mustSubmit(t, s, "op-3", "alice", "billing-dashboard", domain.BindingApprovalSending)
			require.False(t, res.Application.First)
			require.Equal(t, domain.BindingRejected, res.Application.Previous.Status)
			require.Equal(t, "op-3", res.Application.Binding.OperationID)
			hist, err := s.BindingHistoryList(ctx, "alice", "billing-dashboard")
			require.NoError(t, err)
			require.Len(t, hist, 2)
			require.Equal(t, []string{"op-1", "op-3"}, []string{hist[0].OperationID, hist[1].OperationID})
		})
		t.Run("invalid parameters are refused before any write", func(t *testing.T) {
			_, err := s.OperationSubmit(ctx, store.OperationSubmitParams{
				Operation: opParams("op-4", "bob", "t"), BindingStatus: "PENDING",
			})
			require.Error(t, err)
			_, err = s.OperationGet(ctx, "op-4")
			require.ErrorIs(t, err, domain.ErrNotFound)
		})
	})
}
