package workflow_test

import (
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/batch"
)

// ageBatch moves a batch's claim back by age on the database clock without
// a state write (its version stays), so the timeout sweep finds it due now
// rather than after a real batch.timeout.
func ageBatch(t testing.TB, st *store.Store, id int64, age time.Duration) {
	t.Helper()
	past, arg := st.Dialect().NowMinus(age)
	_, err := st.DB().ExecContext(t.Context(), "UPDATE merge_batch SET created_at = "+past+" WHERE id = ?", arg, id)
	require.NoError(t, err)
}

// mrCloses counts the close transitions GitLab made on MR !iid of project
// 1: the "close" merge-request hooks it emitted (a close of an MR that is
// already closed emits none, so this is how often the MR was closed, not
// how often someone asked).
func (w *batchWorld) mrCloses(iid int64) int {
	w.t.Helper()
	var events []struct {
		Event string          `json:"event"`
		Body  json.RawMessage `json:"body"`
	}
	w.simJSON(http.MethodGet, "/gitlab/_control/webhooks", nil, &events)
	n := 0
	for _, e := range events {
		if e.Event != "Merge Request Hook" {
			continue
		}
		var body struct {
			Project struct {
				ID int64 `json:"id"`
			} `json:"project"`
			Attrs struct {
				IID    int64  `json:"iid"`
				Action string `json:"action"`
			} `json:"object_attributes"`
		}
		require.NoError(w.t, json.Unmarshal(e.Body, &body))
		if body.Project.ID == 1 && body.Attrs.IID == iid && body.Attrs.Action == "close" {
			n++
		}
	}
	return n
}

// claimRound runs rounds until one claims a batch (re-admitted requests are
// claimable once the database clock passed their admission) and returns it.
func (w *batchWorld) claimRound() batch.RoundResult {
	w.t.Helper()
	var r batch.RoundResult
	require.Eventually(w.t, func() bool {
		var err error
		r, err = w.rounds.RunRound(w.t.Context(), 1)
		require.NoError(w.t, err)
		return r.Outcome == "CLAIMED"
	}, 10*time.Second, time.Millisecond, "no round claimed: %+v", r)
	return r
}

// raceSweepAndOperator releases two timeout sweeps (Rounds.Sweep, as two
// instances' ticks) and an operator's settlement (batch.Flow.SettleBatch, what
// POST /ops/batches/{id}/settle calls) together on one batch; it returns
// how many batches the sweeps settled between them and what the operator
// was answered.
func (w *batchWorld) raceSweepAndOperator(batchID int64) (swept int, op batch.SettleResult) {
	w.t.Helper()
	var (
		wg      sync.WaitGroup
		n       [2]int
		errs    [3]error
		release = make(chan struct{})
		ctx     = w.t.Context()
	)
	for i := range n {
		wg.Go(func() {
			<-release
			n[i], errs[i] = w.rounds.Sweep(ctx)
		})
	}
	wg.Go(func() {
		<-release
		op, errs[2] = batchFlow(w.deps).SettleBatch(ctx, batchID, "SETTLED_BY_OPERATOR", "settled by olivia", "olivia")
	})
	close(release)
	wg.Wait()
	for i, err := range errs {
		require.NoError(w.t, err, "racer %d", i)
	}
	return n[0] + n[1], op
}

// TestBatchSweepRacingAnOperatorSettlesOnce (issue 7: "settlement racing
// the timeout sweep → one settles, the other is a no-op"), through the
// product's sweep path (store.BatchTimedOut, close and re-read the MR, one
// transaction with the members) — twice, as two instances — and the
// operator's settlement, released together on one timed-out batch with an open MR, round after round with
// the same members (each failure re-admits them for the next round):
//
//   - exactly one of the three settles: either one sweep counts the batch
//     and the operator gets AlreadySettled, or the operator's settlement
//     is the one (FAILED, 3 re-admitted) and the sweeps count none;
//   - the batch is FAILED with the winner's code, the MR closed once;
//   - every member back at CREATE_ADMITTED / MR_CREATING with exactly one
//     waiting row (none doubled by a second re-admission), and the batch
//     history of every earlier round kept.
//
// The merged-wins variant follows: the close loses to a merge that lands
// at the same moment; whichever settles finds the MR merged, the batch
// SUCCEEDED, the members MERGED and then validated once each, and the
// other is a no-op.
func TestBatchSweepRacingAnOperatorSettlesOnce(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBatchWorld(t, st)
		// The sweep is due only for the batches this test ages, and the
		// driver's pipeline poll never gives up (settling the batch itself)
		// however slow the machine is between the round and the race.
		w.reload(map[string]any{"batch.timeout": "1h", "polling.pipeline.timeout": "1h"})
		ids := []string{"op-sw1", "op-sw2", "op-sw3"}
		w.admitted(ids...)

		const rounds = 8
		won := map[string]int{}
		for i := range rounds {
			w.simJSON(http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"outcome": "never", "count": 1}, nil)
			r := w.claimRound()
			require.Equal(t, len(ids), r.Members, "round %d", i)
			mrs := w.batchMRs(r.BatchID)
			require.Len(t, mrs, 1, "round %d", i)
			require.Equal(t, "opened", mrs[0]["state"], "round %d", i)
			iid := int64(mrs[0]["iid"].(float64))
			ageBatch(t, st, r.BatchID, 2*time.Hour)

			swept, op := w.raceSweepAndOperator(r.BatchID)
			b, err := st.BatchGet(t.Context(), r.BatchID)
			require.NoError(t, err)
			require.Equal(t, domain.BatchFailed, b.Status, "round %d", i)
			require.Equal(t, "FAILED", op.Status, "round %d: %+v", i, op)
			require.False(t, op.Merged, "round %d", i)
			if op.AlreadySettled {
				require.Equal(t, 1, swept, "round %d: the operator was a no-op, so the sweep settled it", i)
				require.Equal(t, store.BatchFailureTimeout, b.FailureCode, "round %d", i)
				won["sweep"]++
			} else {
				require.Equal(t, 0, swept, "round %d: the operator settled it, so the sweep was a no-op", i)
				require.Equal(t, len(ids), op.Readmitted, "round %d", i)
				require.Equal(t, "SETTLED_BY_OPERATOR", b.FailureCode, "round %d", i)
				won["operator"]++
			}
			require.Equal(t, "closed", w.batchMRs(r.BatchID)[0]["state"], "round %d", i)
			require.Equal(t, 1, w.mrCloses(iid), "round %d: the MR closed once", i)

			for _, id := range ids {
				w.until(id, "re-admitted", at(domain.StepCreateAdmitted, domain.BindingMRCreating))
			}
			n, err := st.BatchWaitingCount(t.Context(), 1)
			require.NoError(t, err)
			require.Equal(t, len(ids), n, "round %d: one waiting row per member", i)
			var doubled int
			require.NoError(t, st.DB().QueryRowContext(t.Context(),
				"SELECT COUNT(*) FROM (SELECT operation_id FROM merge_batch_request GROUP BY operation_id HAVING COUNT(*) > 1) d").Scan(&doubled))
			require.Zero(t, doubled, "round %d: no member re-admitted twice", i)
			var history int
			require.NoError(t, st.DB().QueryRowContext(t.Context(),
				"SELECT COUNT(*) FROM merge_batch_history").Scan(&history))
			require.Equal(t, (i+1)*len(ids), history, "round %d: every round's membership kept", i)
		}
		t.Logf("%d races: %v", rounds, won)

		// Merged wins: the close the winner sends is answered by a merge.
		w.simJSON(http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"outcome": "never", "count": 1}, nil)
		r := w.claimRound()
		iid := int64(w.batchMRs(r.BatchID)[0]["iid"].(float64))
		ageBatch(t, st, r.BatchID, 2*time.Hour)
		w.simJSON(http.MethodPost, "/gitlab/_control/close_merge_race", map[string]any{"count": 1}, nil)
		swept, op := w.raceSweepAndOperator(r.BatchID)
		require.Equal(t, "SUCCEEDED", op.Status, "%+v", op)
		if op.AlreadySettled {
			require.Equal(t, 1, swept)
		} else {
			require.True(t, op.Merged, "merged wins")
			require.Equal(t, 0, swept)
		}
		b, err := st.BatchGet(t.Context(), r.BatchID)
		require.NoError(t, err)
		require.Equal(t, domain.BatchSucceeded, b.Status)
		require.Equal(t, "merged", w.batchMRs(r.BatchID)[0]["state"])
		require.Zero(t, w.mrCloses(iid), "a merged MR is not closed")
		for _, id := range ids {
			w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
			w.validatedOnce(id)
		}
		n, err := st.BatchWaitingCount(t.Context(), 1)
		require.NoError(t, err)
		require.Zero(t, n, "merged members are not re-admitted")
	})
}
