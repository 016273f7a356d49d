package reconcile

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/flow"
)

// TestReconcileLosesToACallbackBetweenScanAndFlip: the deploy callback
// flipped the binding (step CALLED_BACK) after the scan saw it MERGED;
// the reconciler's RECONCILED is then not a legal repair of CALLED_BACK,
// which is the trace of the lost race: no flip, no error, no side effect.
// The other order (RECONCILED, then the callback's CALLED_BACK) is legal
// and only repairs the step.
func TestReconcileLosesToACallbackBetweenScanAndFlip(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		ctx := t.Context()
		for _, id := range []string{"cb-first", "rec-first"} {
			_, err := st.DB().ExecContext(ctx,
				"INSERT INTO operation (operation_id, subject, target_key, project_id, flow, step_status, mr_iid) VALUES (?, ?, 't', 1, 'LEGACY', ?, 3)",
				id, "u-"+id, int(domain.StepHandleMerged))
			require.NoError(t, err)
			_, err = st.DB().ExecContext(ctx,
				"INSERT INTO binding (subject_id, target_key, status, operation_id) VALUES (?, 't', 'MERGED', ?)", "u-"+id, id)
			require.NoError(t, err)
		}
		var fired []string
		d := deps{Env: flow.Env{Observer: validatedObserver{fn: func(f store.Flip) { fired = append(fired, f.OperationID) }}}, Store: st}

		flipped, err := d.applier().MarkValidated(ctx, "cb-first", "deploy-callback", "test")
		require.NoError(t, err)
		require.True(t, flipped)
		flipped, err = d.reconcileValidate(ctx, "cb-first", domain.StepReconciled, "test")
		require.NoError(t, err)
		require.False(t, flipped)

		flipped, err = d.reconcileValidate(ctx, "rec-first", domain.StepReconciled, "test")
		require.NoError(t, err)
		require.True(t, flipped)
		flipped, err = d.applier().MarkValidated(ctx, "rec-first", "deploy-callback", "test")
		require.NoError(t, err)
		require.False(t, flipped)

		require.Equal(t, []string{"cb-first", "rec-first"}, fired)
		op, err := st.OperationGet(ctx, "rec-first")
		require.NoError(t, err)
		require.Equal(t, int(domain.StepCalledBack), op.Step, "the callback repairs RECONCILED to CALLED_BACK")
	})
}

// validatedObserver calls fn for each Validated event and ignores the
// others.
type validatedObserver struct {
	flow.NopObserver
	fn func(f store.Flip)
}

func (o validatedObserver) Validated(_ context.Context, f store.Flip) { o.fn(f) }
