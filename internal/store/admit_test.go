package store_test

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

func TestBatchAdmitIsIdempotent(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		admitted, err := s.BatchAdmit(ctx, "op-1", 1)
		require.NoError(t, err)
		require.True(t, admitted, "first admission")

		for range 3 {
			admitted, err = s.BatchAdmit(ctx, "op-1", 1)
			require.NoError(t, err, "a duplicate is an answer")
			require.False(t, admitted)
		}
		admitted, err = s.BatchAdmit(ctx, "op-1", 2)
		require.NoError(t, err)
		require.False(t, admitted, "an operationId is admitted once, whatever the project")
		require.Equal(t, 1, count(t, s.DB(), "SELECT COUNT(*) FROM merge_batch_request WHERE operation_id = ?", "op-1"))
	})
}

func TestBatchAdmitDoesNotOverwriteAClaimedRow(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		admitWaiting(t, s, 1, "op", 1)
		c := mustClaim(t, s, 1, 10)
		admitted, err := s.BatchAdmit(ctx, "op-0", 1)
		require.NoError(t, err)
		require.False(t, admitted)
		qp, err := s.BatchQueuePosition(ctx, "op-0")
		require.NoError(t, err)
		require.Equal(t, c.BatchID, qp.BatchID, "still claimed, not back in the queue")
	})
}

func TestBatchAdmitValidatesTheOperationID(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		for _, op := range []string{"", strings.Repeat("x", 65)} {
			_, err := s.BatchAdmit(t.Context(), op, 1)
			require.Error(t, err, "%q", op)
		}
		admitted, err := s.BatchAdmit(t.Context(), strings.Repeat("x", 64), 1)
		require.NoError(t, err)
		require.True(t, admitted)
	})
}

func TestBatchAdmitTxDuplicateLeavesTheTransactionUsable(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		_, err := s.BatchAdmit(ctx, "op-1", 1)
		require.NoError(t, err)
		err = s.InTx(ctx, nil, func(tx *sql.Tx) error {
			admitted, err := s.BatchAdmitTx(ctx, tx, "op-1", 1)
			require.NoError(t, err)
			require.False(t, admitted)
			admitted, err = s.BatchAdmitTx(ctx, tx, "op-2", 1)
			require.NoError(t, err)
			require.True(t, admitted)
			return nil
		})
		require.NoError(t, err, "commit after a duplicate")
		n, err := s.BatchWaitingCount(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, 2, n)

		// Rolled back with its transaction.
		err = s.InTx(ctx, nil, func(tx *sql.Tx) error {
			admitted, err := s.BatchAdmitTx(ctx, tx, "op-3", 1)
			require.NoError(t, err)
			require.True(t, admitted)
			return domain.ErrPreempted
		})
		require.ErrorIs(t, err, domain.ErrPreempted)
		_, err = s.BatchQueuePosition(ctx, "op-3")
		require.ErrorIs(t, err, domain.ErrNotFound)
	})
}
