package workflow_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/gitlab"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/batch"
	"changeflow/internal/workflow/flow"
)

// batchWorld is the e2e world with the batch path registered and a round
// service the test drives with RunRound.
type batchWorld struct {
	*world
	deps   flowDeps
	rounds *batch.Rounds
}

func newBatchWorld(t *testing.T, st *store.Store, wrap ...func(gitlab.GitLab) gitlab.GitLab) *batchWorld {
	t.Helper()
	w := newWorld(t, st)
	deps := e2eDeps(st, w.cfg.Load, countingTransport{w}, func(_ context.Context, f store.Flip) {
		w.mu.Lock()
		w.validated[f.OperationID]++
		w.mu.Unlock()
	})
	for _, f := range wrap {
		deps.GitLab = f(deps.GitLab)
	}
	batch.Register(w.eng, batchFlow(deps))
	return &batchWorld{world: w, deps: deps, rounds: batch.NewRounds(batchFlow(deps), w.eng)}
}

// admitted submits approve-first requests for the batching target and
// approves them: each ends CREATE_ADMITTED in the waiting set.
func (w *batchWorld) admitted(ids ...string) {
	w.t.Helper()
	for i, id := range ids {
		w.submit(id, fmt.Sprintf("user-%s-%d", id, i), tBatched, true)
	}
	for _, id := range ids {
		w.until(id, "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
	}
	// One at a time: the waiting set's order (the claim order) is the
	// order of ids, which culprit isolation's tests rely on.
	for _, id := range ids {
		w.decide(id, "approve")
		w.until(id, "admitted", at(domain.StepCreateAdmitted, domain.BindingMRCreating))
	}
	// A claim takes the requests admitted before the database clock's
	// "now" (millisecond precision on SQLite): wait for the clock to pass
	// the last admission, so that a round right after this claims every
	// one of them rather than the ones admitted in an earlier millisecond.
	storetest.UntilAdmittedBeforeNow(w.t, w.st, ids...)
}

// batchMRs lists the MRs of a batch's branch, any state.
func (w *batchWorld) batchMRs(batchID int64) []map[string]any {
	w.t.Helper()
	var out []map[string]any
	w.simJSON(http.MethodGet, "/gitlab/api/v4/projects/1/merge_requests?state=all&source_branch="+
		urlQuery(flow.BatchBranchName(batchID)), nil, &out)
	return out
}

// TestBatchRoundOneMRForEveryMember: three approved requests of a batching
// target (approve-first) → two overlapping rounds claim one batch → ONE MR
// whose single commit adds all three entries to the one binding file →
// pipeline → two bot approvals → merge → every member VALIDATED by the
// deploy callback, one success side effect each.
func TestBatchRoundOneMRForEveryMember(t *testing.T) {
	t.Parallel()
	storetest.RaceOnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newBatchWorld(t, st)
		ids := []string{"op-b1", "op-b2", "op-b3"}
		w.admitted(ids...)

		var (
			wg      sync.WaitGroup
			results [2]batch.RoundResult
			errs    [2]error
		)
		for i := range results {
			wg.Go(func() { results[i], errs[i] = w.rounds.RunRound(t.Context(), 1) })
		}
		wg.Wait()
		var claimed []batch.RoundResult
		for i, r := range results {
			require.NoError(t, errs[i])
			if r.Outcome == "CLAIMED" {
				claimed = append(claimed, r)
			}
		}
		require.Len(t, claimed, 1, "two overlapping rounds claim one batch: %+v", results)
		batch := claimed[0]
		require.Equal(t, 3, batch.Members)
		require.NotZero(t, batch.MRIID)

		for _, id := range ids {
			o, _ := w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
			require.Equal(t, batch.BatchID, o.BatchID)
			require.Equal(t, batch.MRIID, o.MRIID)
			w.validatedOnce(id)
		}
		mrs := w.batchMRs(batch.BatchID)
		require.Len(t, mrs, 1, "one MR for the batch")
		require.Equal(t, "merged", mrs[0]["state"])
		file := w.fileOnMain(tBatched)
		for _, id := range ids {
			require.Contains(t, mrs[0]["description"], "Changeflow-Operation: "+id)
			require.Contains(t, file, `operationId: "`+id+`"`)
		}
		b, err := st.BatchGet(t.Context(), batch.BatchID)
		require.NoError(t, err)
		require.Equal(t, domain.BatchSucceeded, b.Status)
		require.Equal(t, batch.MRIID, b.MRIID)
		require.Equal(t, 2, w.approveCalls(), "two bot approvals for the whole batch")

		// The slot is free and nothing waits: the next round does nothing.
		r, err := w.rounds.RunRound(t.Context(), 1)
		require.NoError(t, err)
		require.Equal(t, "NOTHING_WAITING", r.Outcome)
	})
}

// TestBatchPipelineFailureSettlesAndReadmits: the batch's check pipeline
// fails → batch_settle closes the MR, re-reads it (closed) → the batch
// FAILED, every member back at CREATE_ADMITTED in the waiting set (history
// kept); the next rounds (halved: one member each) go through.
func TestBatchPipelineFailureSettlesAndReadmits(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newBatchWorld(t, st)
		ids := []string{"op-bf1", "op-bf2"}
		w.admitted(ids...)
		w.simJSON(http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"outcome": "fail", "count": 1}, nil)
		first, err := w.rounds.RunRound(t.Context(), 1)
		require.NoError(t, err)
		require.Equal(t, "CLAIMED", first.Outcome)

		require.Eventually(t, func() bool {
			_, _ = w.eng.RunDue(t.Context())
			b, err := st.BatchGet(t.Context(), first.BatchID)
			return err == nil && b.Status == domain.BatchFailed
		}, 20e9, 5e6)
		for _, id := range ids {
			w.until(id, "re-admitted", at(domain.StepCreateAdmitted, domain.BindingMRCreating))
		}
		n, err := st.BatchWaitingCount(t.Context(), 1)
		require.NoError(t, err)
		require.Equal(t, 2, n, "both members wait again")
		mrs := w.batchMRs(first.BatchID)
		require.Len(t, mrs, 1)
		require.Equal(t, "closed", mrs[0]["state"])

		// The next claims are halved (culprit isolation): one member each.
		later := w.roundsUntilIdle()
		require.Len(t, later, 2)
		for _, id := range ids {
			o, _ := w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
			require.NotEqual(t, first.BatchID, o.BatchID)
			hist, err := st.OperationStepList(t.Context(), id)
			require.NoError(t, err)
			require.True(t, strings.Contains(fmt.Sprint(hist), "back to the waiting set"), "history keeps the failed batch")
		}
	})
}

// TestBatchSettleRacingTheMergeMergedWins: the batch MR is merged by hand
// while an operator settles the batch: settlement closes nothing, reads
// merged, and every member ends MERGED, the batch SUCCEEDED. A second
// settlement racing it is a no-op.
func TestBatchSettleRacingTheMergeMergedWins(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBatchWorld(t, st)
		ids := []string{"op-bm1", "op-bm2"}
		w.admitted(ids...)
		w.simJSON(http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"outcome": "never", "count": 1}, nil)
		r, err := w.rounds.RunRound(t.Context(), 1)
		require.NoError(t, err)
		require.Equal(t, "CLAIMED", r.Outcome)
		// The close loses to a merge that lands at the same moment.
		w.simJSON(http.MethodPost, "/gitlab/_control/close_merge_race", map[string]any{"count": 1}, nil)

		var (
			wg   sync.WaitGroup
			res  [2]batch.SettleResult
			errs [2]error
		)
		for i := range res {
			wg.Go(func() {
				res[i], errs[i] = batchFlow(w.deps).SettleBatch(t.Context(), r.BatchID, "OPS", "settled by an operator", "ops")
			})
		}
		wg.Wait()
		settled := 0
		for i := range res {
			require.NoError(t, errs[i])
			if !res[i].AlreadySettled {
				settled++
				require.True(t, res[i].Merged, "merged wins")
			}
		}
		require.Equal(t, 1, settled, "one settlement wins: %+v", res)
		b, err := st.BatchGet(t.Context(), r.BatchID)
		require.NoError(t, err)
		require.Equal(t, domain.BatchSucceeded, b.Status)
		for _, id := range ids {
			w.until(id, "merged or validated", func(o store.Operation, bd store.Binding) bool {
				return bd.Status == domain.BindingMerged || bd.Status == domain.BindingValidated
			})
		}
	})
}

// culpritGitLab makes the check pipeline of every MR whose description
// names the culprit's operationId fail: the culprit's change breaks the
// checks, in whichever batch it is.
type culpritGitLab struct {
	gitlab.GitLab
	culprit string
}

func (c culpritGitLab) GetMR(ctx context.Context, project string, iid int64) (gitlab.MR, error) {
	mr, err := c.GitLab.GetMR(ctx, project, iid)
	if err == nil && mr.HeadPipeline != nil && flow.HasTrailer(mr.Description, c.culprit) {
		p := *mr.HeadPipeline
		p.Status = "failed"
		mr.HeadPipeline = &p
	}
	return mr, err
}

// mrsOpened counts the MRs GitLab holds for the batches of rounds (any
// state): what the project's maintainers saw opened.
func (w *batchWorld) mrsOpened(rounds []batch.RoundResult) int {
	w.t.Helper()
	n := 0
	for _, r := range rounds {
		n += len(w.batchMRs(r.BatchID))
	}
	return n
}

// roundsUntilIdle runs rounds, each driven until its batch settled, until
// nothing waits; it returns the batches claimed.
func (w *batchWorld) roundsUntilIdle() []batch.RoundResult {
	w.t.Helper()
	var out []batch.RoundResult
	// Liveness bounds only: what the tests assert is the rounds' sizes and
	// counts, and 20 rounds bound the loop. A 20 s deadline over seven
	// rounds failed on a 2-core machine at load 25 (32 s) although every
	// round was right, so the bound is two minutes, and a minute per batch.
	deadline := time.Now().Add(2 * time.Minute)
	for len(out) < 20 && time.Now().Before(deadline) {
		r, err := w.rounds.RunRound(w.t.Context(), 1)
		require.NoError(w.t, err)
		if r.Outcome == "NOTHING_WAITING" {
			// Requests re-admitted within the DB clock's current
			// millisecond are not claimable yet: wait for them.
			n, err := w.st.BatchWaitingCount(w.t.Context(), 1)
			require.NoError(w.t, err)
			if n == 0 {
				return out
			}
			time.Sleep(time.Millisecond)
			continue
		}
		require.Equal(w.t, "CLAIMED", r.Outcome, "%+v", r)
		out = append(out, r)
		require.Eventually(w.t, func() bool {
			_, _ = w.eng.RunDue(w.t.Context())
			b, err := w.st.BatchGet(w.t.Context(), r.BatchID)
			return err == nil && !b.Status.Active()
		}, time.Minute, 5*time.Millisecond)
	}
	w.t.Fatalf("still waiting after %d rounds: %+v", len(out), out)
	return nil
}

// TestBatchCulpritIsolation: one member's change breaks the check pipeline
// of every batch it is in. The failed batch's members are re-admitted and
// the next claims halve (bounded by batch.maxSplitDepth) until the culprit
// fails alone: it ends CREATE_PIPELINE_FAILED with CONTACT_MAINTAINERS and
// is not re-admitted; every other member is VALIDATED.
func TestBatchCulpritIsolation(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newBatchWorld(t, st, func(g gitlab.GitLab) gitlab.GitLab { return culpritGitLab{GitLab: g, culprit: "op-i2"} })
		ids := []string{"op-i0", "op-i1", "op-i2", "op-i3"}
		w.admitted(ids...)
		rounds := w.roundsUntilIdle()
		sizes := make([]int, len(rounds))
		for i, r := range rounds {
			sizes[i] = r.Members
		}
		require.LessOrEqual(t, len(rounds), 6, "MRs opened: %v", sizes)
		require.Equal(t, 4, sizes[0])
		// Rounds run one after the other and the bisection is decided
		// from the database alone, so the sizes are exact: the batch of 4
		// fails, its first half passes, the rest's first half (the
		// culprit) fails alone, the last member passes.
		require.Equal(t, []int{4, 2, 1, 1}, sizes)
		require.Equal(t, len(rounds), w.mrsOpened(rounds), "one MR per batch")
		o, b := w.until("op-i2", "culprit failed", at(domain.StepCreatePipelineFailed, domain.BindingCreateFailed))
		require.Equal(t, domain.HintContactMaintainers, hint(o, b))
		require.Equal(t, flow.ActionCreateMR, o.NextAction, "stopped where a retrigger opens its own MR")
		require.True(t, o.DueAt.IsZero())
		n, err := st.BatchWaitingCount(t.Context(), 1)
		require.NoError(t, err)
		require.Zero(t, n, "the culprit is not re-admitted")
		for _, id := range []string{"op-i0", "op-i1", "op-i3"} {
			w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
			w.validatedOnce(id)
		}
		t.Logf("batch sizes: %v", sizes)
	})
}

// TestBatchCulpritIsolationSixteen: a batch of 16 where one member's change
// breaks the check pipeline, the culprit in the first half and then last:
// the bisection (planRound) finds it with no more than 2·log₂16 = 8 extra
// MRs; it ends CREATE_PIPELINE_FAILED (CONTACT_MAINTAINERS), not
// re-admitted, and the other 15 are validated once.
func TestBatchCulpritIsolationSixteen(t *testing.T) {
	t.Parallel()
	// The exact sizes: the sixth — 16 fails, its first half fails, that
	// half's first half passes, the rest's first half fails, its first
	// member passes, the culprit fails alone, and the other 10 pass in
	// rounds of the adaptive bound, halved to 8 by the failed round of 16
	// (domain.AdaptiveBatchBound): 8, then 2; the last — every first half
	// passes down to the culprit.
	want := map[int][]int{5: {16, 8, 4, 2, 1, 1, 8, 2}, 15: {16, 8, 4, 2, 1, 1}}
	for _, pos := range []int{5, 15} {
		t.Run(fmt.Sprintf("culprit=%d", pos), func(t *testing.T) {
			t.Parallel()
			storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
				ids := make([]string, 16)
				for i := range ids {
					ids[i] = fmt.Sprintf("op-x%d-%02d", pos, i)
				}
				culprit := ids[pos]
				w := newBatchWorld(t, st, func(g gitlab.GitLab) gitlab.GitLab { return culpritGitLab{GitLab: g, culprit: culprit} })
				w.reload(map[string]any{"batch.maxRequests": 16})
				w.admitted(ids...)
				rounds := w.roundsUntilIdle()
				sizes := make([]int, len(rounds))
				for i, r := range rounds {
					sizes[i] = r.Members
				}
				t.Logf("batch sizes: %v", sizes)
				require.Equal(t, 16, sizes[0])
				require.LessOrEqual(t, len(rounds)-1, 8, "extra MRs: %v", sizes)
				opened := w.mrsOpened(rounds)
				require.Equal(t, len(rounds), opened, "one MR per batch, counted in GitLab")
				require.LessOrEqual(t, opened-1, 8, "extra MRs opened in GitLab: %v", sizes)
				require.Equal(t, want[pos], sizes)
				o, b := w.until(culprit, "culprit failed", at(domain.StepCreatePipelineFailed, domain.BindingCreateFailed))
				require.Equal(t, domain.HintContactMaintainers, hint(o, b))
				for _, id := range ids {
					if id == culprit {
						continue
					}
					w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
					w.validatedOnce(id)
				}
				n, err := st.BatchWaitingCount(t.Context(), 1)
				require.NoError(t, err)
				require.Zero(t, n)
			})
		})
	}
}

// TestBatchRoundsShrinkAfterFailedChecksAndGrowBack: the adaptive bound
// (domain.AdaptiveBatchBound) in a real run. With batch.maxRequests 8,
// a round of 8 whose checks fail (the culprit last) halves the bound to
// 4; the 30 requests admitted afterwards go in rounds that grow by one
// with each merge, 4, 5, 6, 7, then the ceiling 8 — where before every
// round took 8.
func TestBatchRoundsShrinkAfterFailedChecksAndGrowBack(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		first := make([]string, 8)
		for i := range first {
			first[i] = fmt.Sprintf("op-g-%02d", i)
		}
		culprit := first[7]
		w := newBatchWorld(t, st, func(g gitlab.GitLab) gitlab.GitLab { return culpritGitLab{GitLab: g, culprit: culprit} })
		w.reload(map[string]any{"batch.maxRequests": 8})
		w.admitted(first...)
		bisect := w.roundsUntilIdle()
		require.Equal(t, 8, bisect[0].Members, "the first round takes the ceiling")
		w.until(culprit, "culprit failed", at(domain.StepCreatePipelineFailed, domain.BindingCreateFailed))

		later := make([]string, 30)
		for i := range later {
			later[i] = fmt.Sprintf("op-g-later-%02d", i)
		}
		w.admitted(later...)
		rounds := w.roundsUntilIdle()
		sizes := make([]int, len(rounds))
		for i, r := range rounds {
			sizes[i] = r.Members
		}
		require.Equal(t, []int{4, 5, 6, 7, 8}, sizes, "halved by the failed round, then one more per merge up to the ceiling")
		good := append(first[:7:7], later...)
		for _, id := range good {
			w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
			w.validatedOnce(id)
		}
		w.filesExact(append(good, culprit)...)
	})
}

// blockedOnAForbiddenBot admits ids, makes the first bot one that may not
// approve (403), runs a round and waits until its batch is BLOCKED —
// every next batch would fail the same way, so the batch needs a person.
// It returns the round.
func (w *batchWorld) blockedOnAForbiddenBot(ids ...string) batch.RoundResult {
	w.t.Helper()
	w.admitted(ids...)
	w.reload(map[string]any{"gitlab.tokens.approver1": "local-observer-token"})
	r, err := w.rounds.RunRound(w.t.Context(), 1)
	require.NoError(w.t, err)
	require.Equal(w.t, "CLAIMED", r.Outcome)
	require.Eventually(w.t, func() bool {
		_, _ = w.eng.RunDue(w.t.Context())
		b, err := w.st.BatchGet(w.t.Context(), r.BatchID)
		return err == nil && b.Status == domain.BatchBlocked
	}, 20*time.Second, 5*time.Millisecond)
	return r
}
