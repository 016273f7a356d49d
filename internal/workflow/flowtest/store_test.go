package flowtest

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
)

// TestStoreAnswers: the shared fake answers a scripted row, the real
// store's not-found (wrapping domain.ErrNotFound, in its words) for a
// missing one, a scripted error before either, and records each call.
func TestStoreAnswers(t *testing.T) {
	ctx := t.Context()
	errDB := errors.New("database down")
	f := &Store{
		Ops:         map[string]store.Operation{"op": {OperationID: "op"}},
		ByKey:       map[string]store.Binding{"u/t": {OperationID: "op"}},
		ByOperation: map[string]store.Binding{"op": {OperationID: "op"}},
		Batch:       store.Batch{ID: 3},
		Apply:       store.WorkCallbackResult{Applied: true},
	}
	op, err := f.OperationGet(ctx, "op")
	require.NoError(t, err)
	require.Equal(t, "op", op.OperationID)
	_, err = f.OperationGet(ctx, "gone")
	require.ErrorIs(t, err, domain.ErrNotFound)
	require.EqualError(t, err, "operation gone: "+domain.ErrNotFound.Error())

	b, err := f.BindingGet(ctx, "u", "t")
	require.NoError(t, err)
	require.Equal(t, "op", b.OperationID)
	_, err = f.BindingGet(ctx, "u", "x")
	require.EqualError(t, err, "binding u/x: "+domain.ErrNotFound.Error())

	b, err = f.BindingGetByOperation(ctx, "op")
	require.NoError(t, err)
	require.Equal(t, "op", b.OperationID)
	_, err = f.BindingGetByOperation(ctx, "gone")
	require.EqualError(t, err, "binding of gone: "+domain.ErrNotFound.Error())

	batch, err := f.BatchGet(ctx, 3)
	require.NoError(t, err)
	require.Equal(t, int64(3), batch.ID)
	res, err := f.WorkCallbackApply(ctx, store.WorkCallbackParams{OperationID: "op"})
	require.NoError(t, err)
	require.True(t, res.Applied)
	require.Len(t, f.Applied, 1)

	f.OpErr, f.ByKeyErr, f.ByOperationErr = errDB, errDB, errDB
	_, err = f.OperationGet(ctx, "op")
	require.ErrorIs(t, err, errDB)
	_, err = f.BindingGet(ctx, "u", "t")
	require.ErrorIs(t, err, errDB)
	_, err = f.BindingGetByOperation(ctx, "op")
	require.ErrorIs(t, err, errDB)

	require.Equal(t, []string{
		"OperationGet op", "OperationGet gone", "BindingGet u/t", "BindingGet u/x",
		"BindingGetByOperation op", "BindingGetByOperation gone", "BatchGet 3", "WorkCallbackApply op",
		"OperationGet op", "BindingGet u/t", "BindingGetByOperation op",
	}, f.Calls)
}
