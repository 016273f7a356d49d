package batch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/flow"
	"changeflow/internal/workflow/flowtest"
	"changeflow/internal/workflow/single"
)

// TestBatchApproveErrorBeforeItsFirstWriteSettlesTheBatch: batch_approve
// fails with an error (not a busy database) before it wrote anything, so
// the driver still stands at CREATE_SUCCEEDED — from where the step's
// declared failure, HANDLE_APPROVE_FAILED, is not a legal move. Before,
// the engine tried that move, the table refused it, and the action stopped
// with the state kept: the batch stayed RUNNING and held the project's
// slot until batch.timeout. Now the driver keeps its state (no illegal
// write is attempted) and batch_settle runs at once: the batch FAILED
// (BATCH_STEP_FAILED), every member back in the waiting set, and the next
// round claims them again.
func TestBatchApproveErrorBeforeItsFirstWriteSettlesTheBatch(t *testing.T) {
	t.Parallel()
	storetest.RaceOnSQLite(t, func(t *testing.T, st *store.Store) {
		ctx := t.Context()
		ids := []string{"op-e0", "op-e1", "op-e2"}
		d := admittedBatchWorld(t, st, ids...)

		e, err := engine.New(engine.Options{Store: st, Owner: "t", Workers: 2, QueueSize: 2, Lease: 30 * time.Second, PollInterval: time.Hour, MaxRetries: 3})
		require.NoError(t, err)
		t.Cleanup(e.Stop)
		// The pipeline passed; then approve fails before its first write
		// (the driver is still at CREATE_SUCCEEDED).
		passed := func(context.Context, engine.Work) (engine.Outcome, error) {
			return engine.Done(flow.ActionApprove, engine.Transition{Step: domain.StepCreateSucceeded, Binding: domain.BindingMRCreated, Note: "passed"}), nil
		}
		broken := func(context.Context, engine.Work) (engine.Outcome, error) {
			return engine.Outcome{}, errors.New("the approver could not be built")
		}
		e.Register(flow.ActionBatchPollPipeline, engine.StepFunc{Decl: single.CreateDecl, Fn: d.batchStep(single.CreateDecl.OnError, passed)})
		e.Register(flow.ActionBatchApprove, engine.StepFunc{Decl: single.ApproveDecl, Fn: d.batchStep(single.ApproveDecl.OnError, broken)})
		e.Register(flow.ActionBatchSettle, engine.StepFunc{Decl: single.MergeDecl, Fn: d.batchSettle})

		require.NoError(t, e.Start(ctx))

		r, err := NewRounds(d, nil).RunRound(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, "CLAIMED", r.Outcome)
		// Drive the engine until the driver has nothing running or due:
		// its batch settled, or (before) the action stopped.
		deadline := time.Now().Add(time.Minute)
		for {
			_, err := e.RunDue(ctx)
			require.NoError(t, err)
			o, err := st.OperationGet(ctx, ids[0])
			require.NoError(t, err)
			if o.LeaseOwner == "" && o.DueAt.IsZero() && domain.StepStatus(o.Step) != domain.StepCreateMRCreated {
				break
			}
			require.True(t, time.Now().Before(deadline), "the driver never came to rest: %+v", o)
			time.Sleep(5 * time.Millisecond)
		}

		b, err := st.BatchGet(ctx, r.BatchID)
		require.NoError(t, err)
		require.Equal(t, domain.BatchFailed, b.Status, "the batch is settled, not left RUNNING with its slot held")
		require.Equal(t, "BATCH_STEP_FAILED", b.FailureCode)
		hist, err := st.OperationStepList(ctx, ids[0])
		require.NoError(t, err)
		for _, h := range hist {
			require.NotEqual(t, domain.StepHandleApproveFailed, domain.StepStatus(h.ToStep), "no move the table refuses: %s", h.Note)
		}
		states, err := st.BatchMemberStates(ctx, r.BatchID)
		require.NoError(t, err)
		for _, m := range states {
			require.Equal(t, domain.StepCreateAdmitted.String(), domain.StepStatus(m.Step).String(), m.OperationID)
			require.Equal(t, domain.BindingMRCreating, m.Binding, m.OperationID)
		}
		n, err := st.BatchWaitingCount(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, len(ids), n, "every member waits for the next round")
		o, err := st.OperationGet(ctx, ids[0])
		require.NoError(t, err)
		require.Empty(t, o.NextAction, "the driver has nothing left to run: %q", o.LastError)
	})
}

// admittedBatchWorld is the world of the batch path's internal tests: a
// configuration with project 1 and its batching target "t", a Flow over st
// with the GitLab fake of the benchmarks (retries after a millisecond),
// and one approve-first request per id admitted to the waiting set
// (CREATE_ADMITTED, MR_CREATING), in the order of ids and before the
// database clock's "now", so a round right after claims them all.
func admittedBatchWorld(t *testing.T, st *store.Store, ids ...string) Flow {
	t.Helper()
	snap := flowtest.Config(t, flowtest.Targets(map[string]bool{"t": true}))
	d := Flow{Env: flow.Env{GitLab: newBenchGitLab(), Config: snap, RetryDelay: time.Millisecond}, Store: st}
	storetest.AdmitWaiting(t, st, "t", "test", ids...)
	storetest.UntilAdmittedBeforeNow(t, st, ids...) // the claim takes admissions before the DB's "now"
	return d
}
