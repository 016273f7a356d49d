package workflow_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/gitlab"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/flow"
)

// notFoundOnceAt answers GetMR with a 404 once, when a row of that MR is
// running action at step (the store's state, not a count of calls): a
// non-transient GitLab answer inside one chosen batch step.
type notFoundOnceAt struct {
	gitlab.GitLab
	st     *store.Store
	step   domain.StepStatus
	action string
	fired  *atomic.Bool
}

func (f notFoundOnceAt) GetMR(ctx context.Context, project string, iid int64) (gitlab.MR, error) {
	var n int
	err := f.st.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM operation WHERE mr_iid = ? AND step_status = ? AND next_action = ? AND lease_owner IS NOT NULL",
		iid, int(f.step), f.action).Scan(&n)
	if err == nil && n > 0 && f.fired.CompareAndSwap(false, true) {
		return gitlab.MR{}, &gitlab.Error{Op: "GetMR", Status: http.StatusNotFound, Message: "404 Not found"}
	}
	return f.GitLab.GetMR(ctx, project, iid)
}

// untilDriverAtRest drives the engine until the batch's driver has nothing
// running or due (its batch settled or blocked — or, before the fix, its
// action stopped with the batch still RUNNING).
func (w *batchWorld) untilDriverAtRest(driver string) store.Operation {
	w.t.Helper()
	o, _ := w.until(driver, "at rest", func(o store.Operation, _ store.Binding) bool {
		return o.LeaseOwner == "" && o.DueAt.IsZero()
	})
	return o
}

// TestBatchStepErrorSettlesOrBlocksTheBatch: a batch step's error that is
// not a busy database no longer stops the driver with its batch RUNNING
// (the project's slot held until batch.timeout):
//
//   - batch_approve reads a 404 after it moved to HANDLE_STARTED: the driver
//     shows HANDLE_APPROVE_FAILED (legal from there) and batch_settle runs
//     at once — FAILED (BATCH_STEP_FAILED), every member re-admitted;
//     before, the driver stopped in HANDLE_APPROVE_FAILED and the batch
//     stayed RUNNING;
//   - batch_settle of a batch whose check pipeline failed reads a 404:
//     its declared failure (HANDLE_MERGE_FAILED) is not a legal move from
//     CREATE_PIPELINE_FAILED, and no retry fixes a 4xx, so the batch is
//     BLOCKED for a person with the error as its reason; before, the engine
//     tried the illegal move, stopped the action, and the batch stayed
//     RUNNING. An operator's settlement then re-admits the members.
//
// Either way the next rounds validate every member once, no MR is left
// open, and the files on main are exact.
func TestBatchStepErrorSettlesOrBlocksTheBatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		step   domain.StepStatus
		action string
		// failPipeline: the batch's first check pipeline fails.
		failPipeline bool
	}{
		{"batch_approve reads a 404", domain.StepHandleStarted, flow.ActionBatchApprove, false},
		{"batch_settle of a failed pipeline reads a 404", domain.StepCreatePipelineFailed, flow.ActionBatchSettle, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
				fired := &atomic.Bool{}
				w := newBatchWorld(t, st, func(g gitlab.GitLab) gitlab.GitLab {
					return notFoundOnceAt{GitLab: g, st: st, step: tc.step, action: tc.action, fired: fired}
				})
				ids := []string{"op-err-1", "op-err-2"}
				w.admitted(ids...)
				if tc.failPipeline {
					w.simJSON(http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"outcome": "fail", "count": 1}, nil)
				}
				r, err := w.rounds.RunRound(t.Context(), 1)
				require.NoError(t, err)
				require.Equal(t, "CLAIMED", r.Outcome)

				driver := w.untilDriverAtRest(ids[0])
				require.True(t, fired.Load(), "the 404 was answered inside %s", tc.action)
				b, err := st.BatchGet(t.Context(), r.BatchID)
				require.NoError(t, err)
				require.NotEqual(t, domain.BatchRunning, b.Status, "the batch does not wait for batch.timeout: driver at %s, %q",
					domain.StepStatus(driver.Step), driver.LastError)
				if tc.failPipeline {
					require.Equal(t, domain.BatchBlocked, b.Status)
					require.Equal(t, "BATCH_NEEDS_A_PERSON", b.FailureCode)
					require.Contains(t, b.FailureMessage, "settling it failed")
					require.Equal(t, domain.StepCreatePipelineFailed, domain.StepStatus(driver.Step), "the driver keeps its state")
					res, err := batchFlow(w.deps).SettleBatch(t.Context(), b.ID, "OPERATOR", "the MR is back", "olivia")
					require.NoError(t, err)
					require.Equal(t, len(ids), res.Readmitted, "%+v", res)
				} else {
					require.Equal(t, domain.BatchFailed, b.Status)
					require.Equal(t, "BATCH_STEP_FAILED", b.FailureCode)
					hist, err := st.OperationStepList(t.Context(), ids[0])
					require.NoError(t, err)
					seen := false
					for _, h := range hist {
						seen = seen || domain.StepStatus(h.ToStep) == domain.StepHandleApproveFailed
					}
					require.True(t, seen, "the driver showed its declared failure before the settlement")
				}

				w.roundsUntilIdle()
				for _, id := range ids {
					w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
					w.validatedOnce(id)
				}
				w.noMROpenForEndedBatches()
				w.filesExact(ids...)
			})
		})
	}
}
