package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// TestAStepThatRunsOutOfItsLeaseDeadlineIsRetried: a step whose dependency
// kept it waiting until its lease's deadline (seen under a 60-request burst:
// create_mr's progress write could not begin a transaction in time) is
// retried, not failed — the timeout says nothing about the request. The
// first run waits on its context until the deadline and returns the
// context's error wrapped, as a store or HTTP call does; the second run
// succeeds.
func TestAStepThatRunsOutOfItsLeaseDeadlineIsRetried(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		runs := newCounter()
		slow := engine.StepFunc{Decl: createDecl, Fn: func(ctx context.Context, w engine.Work) (engine.Outcome, error) {
			runs.add(w.Operation.OperationID)
			if w.Attempt <= 1 {
				<-ctx.Done()
				return engine.Outcome{}, fmt.Errorf("complete work of %s: begin transaction: %w", w.Operation.OperationID, ctx.Err())
			}
			return engine.Done("", engine.Transition{Step: domain.StepCreateMRCreated}), nil
		}}
		e := newEngine(t, s, "i1", engine.Options{MaxRetries: 3, Lease: 300 * time.Millisecond},
			map[string]engine.Step{"slow": slow})
		submit(t, s, "op-slow", "slow")
		require.NoError(t, e.Start(t.Context()))
		o := waitOp(t, s, "op-slow", func(o store.Operation) bool {
			return o.LeaseOwner == "" && (o.DueAt.IsZero() || o.NextAction == "")
		})
		require.Equal(t, domain.StepCreateMRCreated.String(), domain.StepStatus(o.Step).String(),
			"a step that ran out of its deadline is retried, not failed: %s", o.LastError)
		b, err := s.BindingGetByOperation(t.Context(), "op-slow")
		require.NoError(t, err)
		require.Equal(t, domain.BindingMRCreating, b.Status)
	})
}
