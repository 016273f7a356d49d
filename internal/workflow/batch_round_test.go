package workflow_test

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/gitlab"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// reload applies extra configuration keys on top of the world's overlay.
func (w *batchWorld) reload(kv map[string]any) {
	w.t.Helper()
	ov := e2eOverlay(w.simTS.URL)
	maps.Copy(ov, kv)
	w.load(ov)
}

// TestBatchRoundDiedAfterTheClaimIsResumed: a round that died right after
// its claim (a RUNNING batch, no MR recorded, members still admitted) is
// finished by a later round once it is older than ResumeAfter, and the
// batch goes through with one MR.
func TestBatchRoundDiedAfterTheClaimIsResumed(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBatchWorld(t, st)
		ids := []string{"op-r1", "op-r2"}
		w.admitted(ids...)
		claim, err := st.BatchClaim(t.Context(), store.BatchClaimParams{ProjectID: 1, MaxRequests: 10})
		require.NoError(t, err)
		require.Equal(t, store.ClaimClaimed, claim.Outcome)

		r, err := w.rounds.RunRound(t.Context(), 1)
		require.NoError(t, err)
		require.Contains(t, []string{"SLOT_OCCUPIED", "NOTHING_WAITING"}, r.Outcome)
		require.False(t, r.Resumed, "a young batch is left to its own round")

		w.rounds.ResumeAfter = time.Millisecond
		storetest.UntilBatchOlder(t, st, claim.BatchID, w.rounds.ResumeAfter)
		r, err = w.rounds.RunRound(t.Context(), 1)
		require.NoError(t, err)
		require.True(t, r.Resumed)
		require.Equal(t, claim.BatchID, r.BatchID)
		for _, id := range ids {
			w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
		}
		require.Len(t, w.batchMRs(claim.BatchID), 1)
	})
}

// TestBatchSweepSettlesATimedOutBatch: a batch whose pipeline never
// finishes outlives batch.timeout; the sweep fails it, closes its MR and
// re-admits its members (none merged).
func TestBatchSweepSettlesATimedOutBatch(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBatchWorld(t, st)
		w.reload(map[string]any{"batch.timeout": "1s"})
		ids := []string{"op-s1", "op-s2"}
		w.admitted(ids...)
		w.simJSON(http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"outcome": "never", "count": 1}, nil)
		r, err := w.rounds.RunRound(t.Context(), 1)
		require.NoError(t, err)
		require.Equal(t, "CLAIMED", r.Outcome)
		require.Eventually(t, func() bool {
			n, err := w.rounds.Sweep(t.Context())
			require.NoError(t, err)
			return n == 1
		}, 10*time.Second, 50*time.Millisecond)
		b, err := st.BatchGet(t.Context(), r.BatchID)
		require.NoError(t, err)
		require.Equal(t, domain.BatchFailed, b.Status)
		require.Equal(t, "BATCH_TIMEOUT", b.FailureCode)
		require.Equal(t, "closed", w.batchMRs(r.BatchID)[0]["state"])
		for _, id := range ids {
			w.until(id, "re-admitted", at(domain.StepCreateAdmitted, domain.BindingMRCreating))
		}
		n, err := st.BatchWaitingCount(t.Context(), 1)
		require.NoError(t, err)
		require.Equal(t, 2, n)
	})
}

// TestBatchRoundServiceRunsRoundsOnItsOwn: Start (twice) runs rounds every
// batch.interval; admitted requests end VALIDATED without a manual round;
// Stop is safe twice.
func TestBatchRoundServiceRunsRoundsOnItsOwn(t *testing.T) {
	t.Parallel()
	storetest.RaceOnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newBatchWorld(t, st)
		w.reload(map[string]any{"batch.interval": "20ms"})
		w.rounds.Start(t.Context())
		w.rounds.Start(t.Context())
		defer w.rounds.Stop()
		ids := []string{"op-svc1", "op-svc2"}
		w.admitted(ids...)
		for _, id := range ids {
			w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
		}
		w.rounds.Stop()
		w.rounds.Stop()
	})
}

// TestBatchBlockedUntilAPersonSettlesIt: a bot may not approve the batch MR
// (403) — every next batch would fail the same way, so the batch becomes
// BLOCKED and keeps the slot (rounds answer SLOT_OCCUPIED, new requests
// wait); once the bot is fixed an operator settles it: FAILED, members
// re-admitted, and the next round validates them.
func TestBatchBlockedUntilAPersonSettlesIt(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newBatchWorld(t, st)
		ids := []string{"op-k1", "op-k2"}
		r := w.blockedOnAForbiddenBot(ids...)

		w.admitted("op-k3")
		again, err := w.rounds.RunRound(t.Context(), 1)
		require.NoError(t, err)
		require.Equal(t, "SLOT_OCCUPIED", again.Outcome, "a blocked batch keeps the slot")

		w.reload(nil)
		res, err := batchFlow(w.deps).SettleBatch(t.Context(), r.BatchID, "OPS", "bot fixed", "olivia")
		require.NoError(t, err)
		require.Equal(t, "FAILED", res.Status)
		require.Equal(t, 2, res.Readmitted)
		w.roundsUntilIdle()
		for _, id := range append(ids, "op-k3") {
			w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
		}
	})
}

// lostMRAnswer opens the MR in GitLab and then loses the answer, once: what
// a round that died right after CreateMR leaves behind.
type lostMRAnswer struct {
	gitlab.GitLab
	lost *atomic.Bool
}

func (l lostMRAnswer) CreateMR(ctx context.Context, project string, r gitlab.CreateMRRequest) (gitlab.MR, error) {
	mr, err := l.GitLab.CreateMR(ctx, project, r)
	if err == nil && l.lost.CompareAndSwap(false, true) {
		return gitlab.MR{}, errors.New("connection reset after the MR was created")
	}
	return mr, err
}

// TestBatchRoundThatDiedAfterOpeningTheMRIsAdopted: the round's MR exists
// in GitLab but was never recorded (the round died); the round that
// resumes the batch adopts it by its branch — one MR, one commit, every
// member VALIDATED.
func TestBatchRoundThatDiedAfterOpeningTheMRIsAdopted(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		lost := &atomic.Bool{}
		w := newBatchWorld(t, st, func(g gitlab.GitLab) gitlab.GitLab { return lostMRAnswer{GitLab: g, lost: lost} })
		ids := []string{"op-l1", "op-l2"}
		w.admitted(ids...)
		r, err := w.rounds.RunRound(t.Context(), 1)
		require.Error(t, err, "the round died after CreateMR")
		require.Equal(t, "CLAIMED", r.Outcome)
		w.rounds.ResumeAfter = time.Millisecond
		storetest.UntilBatchOlder(t, st, r.BatchID, w.rounds.ResumeAfter)
		again, err := w.rounds.RunRound(t.Context(), 1)
		require.NoError(t, err)
		require.True(t, again.Resumed)
		for _, id := range ids {
			w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
		}
		mrs := w.batchMRs(r.BatchID)
		require.Len(t, mrs, 1, "the lost MR was adopted, not opened again")
	})
}
