package workflow_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/gitlab"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/flow"
)

// unavailableWhile answers GetMR with a 503 — a transient answer, which
// the steps retry — for as long as on is set and a row of that MR is
// running action (the store's state, not a count of calls): one batch
// step whose GitLab reads keep failing while every other step's pass.
type unavailableWhile struct {
	gitlab.GitLab
	st     *store.Store
	action string
	on     *atomic.Bool
	hits   *atomic.Int64
}

func (f unavailableWhile) GetMR(ctx context.Context, project string, iid int64) (gitlab.MR, error) {
	if f.on.Load() {
		var n int
		err := f.st.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM operation WHERE mr_iid = ? AND next_action = ? AND lease_owner IS NOT NULL",
			iid, f.action).Scan(&n)
		if err == nil && n > 0 {
			f.hits.Add(1)
			return gitlab.MR{}, &gitlab.Error{Op: "GetMR", Status: http.StatusServiceUnavailable, Message: "503 Service Unavailable"}
		}
	}
	return f.GitLab.GetMR(ctx, project, iid)
}

// TestBatchStepWhoseRetriesRunOutSettlesOrBlocksAtOnce: a batch step whose
// GitLab reads keep answering a transient error past workflow.maxRetries
// used to get the engine's declared failure — the driver stopped in it
// (or kept its state where the move is illegal) with its batch RUNNING,
// and the project's slot was held until batch.timeout. Now the batch path
// answers the exhausted retries itself, at once:
//
//   - batch_poll_pipeline cannot read the MR: batch_settle runs — the batch
//     FAILED (BATCH_STEP_FAILED), its MR closed, every member back in the
//     waiting set;
//   - batch_settle (the check pipeline failed) cannot read the MR: whether
//     it merged is unknown, so the batch is BLOCKED for a person, the
//     reason saying the settlement gave up; the person settles it once
//     GitLab answers, and the members are re-admitted.
//
// Both run with the GitLab fault still on (no retry of the step could have
// got through). Then GitLab answers again, the next rounds validate every
// member once, no MR is left open, and the files on main are exact.
func TestBatchStepWhoseRetriesRunOutSettlesOrBlocksAtOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		action string
		// failPipeline: the batch's first check pipeline fails (its
		// driver then settles the batch).
		failPipeline bool
	}{
		{"batch_poll_pipeline cannot read the MR", flow.ActionBatchPollPipeline, false},
		{"batch_settle cannot read the MR", flow.ActionBatchSettle, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			storetest.Each(t, func(t *testing.T, st *store.Store) {
				on, hits := &atomic.Bool{}, &atomic.Int64{}
				on.Store(true)
				w := newBatchWorld(t, st, func(g gitlab.GitLab) gitlab.GitLab {
					return unavailableWhile{GitLab: g, st: st, action: tc.action, on: on, hits: hits}
				})
				ids := []string{"op-ex-1", "op-ex-2"}
				w.admitted(ids...)
				if tc.failPipeline {
					w.simJSON(http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"outcome": "fail", "count": 1}, nil)
				}
				r, err := w.rounds.RunRound(t.Context(), 1)
				require.NoError(t, err)
				require.Equal(t, "CLAIMED", r.Outcome)

				driver := w.untilDriverAtRest(ids[0])
				// The world's engine runs with MaxRetries 20: every attempt
				// and the one past the bound read a 503.
				require.Greater(t, hits.Load(), int64(20), "the step's reads kept failing past workflow.maxRetries")
				b, err := st.BatchGet(t.Context(), r.BatchID)
				require.NoError(t, err)
				require.NotEqual(t, domain.BatchRunning, b.Status, "the batch does not wait for batch.timeout: driver at %s, %q",
					domain.StepStatus(driver.Step), driver.LastError)
				require.Empty(t, driver.NextAction, "the driver has nothing left to run: %q", driver.LastError)
				mrs := w.batchMRs(r.BatchID)
				require.Len(t, mrs, 1)
				if tc.failPipeline {
					require.Equal(t, domain.BatchBlocked, b.Status)
					require.Equal(t, "BATCH_NEEDS_A_PERSON", b.FailureCode)
					require.Contains(t, b.FailureMessage, "settling it gave up after", "the reason says what a person must look at")
					require.Equal(t, "opened", mrs[0]["state"], "the settlement could not read the MR, so it did not move it")
					n, err := st.BatchWaitingCount(t.Context(), 1)
					require.NoError(t, err)
					require.Zero(t, n, "the members stay in the blocked batch")

					on.Store(false) // GitLab answers again; the person settles
					res, err := batchFlow(w.deps).SettleBatch(t.Context(), b.ID, "OPERATOR", "GitLab is back", "olivia")
					require.NoError(t, err)
					require.Equal(t, len(ids), res.Readmitted, "%+v", res)
				} else {
					require.Equal(t, domain.BatchFailed, b.Status)
					require.Equal(t, "BATCH_STEP_FAILED", b.FailureCode)
					require.Equal(t, "closed", mrs[0]["state"], "the settlement closed the batch MR")
					n, err := st.BatchWaitingCount(t.Context(), 1)
					require.NoError(t, err)
					require.Equal(t, len(ids), n, "every member waits for the next round")
					states, err := st.BatchMemberStates(t.Context(), r.BatchID)
					require.NoError(t, err)
					for _, m := range states {
						require.Equal(t, domain.StepCreateAdmitted.String(), domain.StepStatus(m.Step).String(), m.OperationID)
						require.Equal(t, domain.BindingMRCreating, m.Binding, m.OperationID)
					}
					hist, err := st.OperationStepList(t.Context(), ids[0])
					require.NoError(t, err)
					gaveUp := false
					for _, h := range hist {
						gaveUp = gaveUp || strings.Contains(h.Note, "gave up after")
					}
					require.True(t, gaveUp, "the driver's history says the retries ran out")
					on.Store(false)
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
