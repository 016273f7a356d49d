package workflow_test

import (
	"context"
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

// noResumeDelay is a batch.resumeAfter no test waits for: a batch these
// tests see resumed was resumed because its round is over, not because it
// aged (issue 12 item 5 — asserted by state, never by duration).
const noResumeDelay = time.Hour

// TestBatchRoundLostCreateMRAnswerFinishesInTheSameRound: GitLab creates
// the batch's MR and the answer is lost (the simulator drops the
// connection after applying the call). The round looks the MR up by the
// batch's deterministic branch and records it at once — the project's
// slot is not held until batch.resumeAfter; one MR, members VALIDATED.
func TestBatchRoundLostCreateMRAnswerFinishesInTheSameRound(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBatchWorld(t, st)
		w.rounds.ResumeAfter = noResumeDelay
		ids := []string{"op-lost-1", "op-lost-2"}
		w.admitted(ids...)
		w.simJSON(http.MethodPost, "/gitlab/_control/faults",
			map[string]any{"method": "POST", "path": "/projects/*/merge_requests", "kind": "drop"}, nil)

		r, err := w.rounds.RunRound(t.Context(), 1)
		require.NoError(t, err, "the lost answer is resolved in the round")
		require.Equal(t, "CLAIMED", r.Outcome)
		require.NotZero(t, r.MRIID)
		b, err := st.BatchGet(t.Context(), r.BatchID)
		require.NoError(t, err)
		require.Equal(t, r.MRIID, b.MRIID, "the MR is recorded on the batch by the same round")
		for _, id := range ids {
			w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
			w.validatedOnce(id)
		}
		require.Len(t, w.batchMRs(r.BatchID), 1, "the lost MR was adopted, not opened again")
		file := w.fileOnMain(tBatched)
		for _, id := range ids {
			require.Contains(t, file, id)
		}
	})
}

// TestBatchRoundThatGaveUpIsResumedByTheNextRound: the round's create-MR
// answer is lost in a way it cannot resolve (the error is not GitLab's),
// so it returns with the batch RUNNING and no MR recorded. Its round is
// over: the very next round resumes the batch without waiting for
// batch.resumeAfter, and adopts the MR by its branch.
func TestBatchRoundThatGaveUpIsResumedByTheNextRound(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		lost := &atomic.Bool{}
		w := newBatchWorld(t, st, func(g gitlab.GitLab) gitlab.GitLab { return lostMRAnswer{GitLab: g, lost: lost} })
		w.rounds.ResumeAfter = noResumeDelay
		ids := []string{"op-gave-1", "op-gave-2"}
		w.admitted(ids...)
		r, err := w.rounds.RunRound(t.Context(), 1)
		require.Error(t, err)
		require.Equal(t, "CLAIMED", r.Outcome)
		// The round released the batch: a round on any instance, not only
		// this one, resumes it at once.
		var builder string
		require.NoError(t, st.DB().QueryRowContext(t.Context(), "SELECT builder FROM merge_batch WHERE id = ?", r.BatchID).Scan(&builder))
		require.Empty(t, builder)
		other, err := st.BatchResumable(t.Context(), store.BatchResumableParams{ProjectID: 1, MinAge: noResumeDelay, Self: "another-instance", LiveAfter: time.Minute})
		require.NoError(t, err)
		require.Equal(t, r.BatchID, other.ID)

		again, err := w.rounds.RunRound(t.Context(), 1)
		require.NoError(t, err)
		require.True(t, again.Resumed, "a round that is over holds nothing")
		require.Equal(t, r.BatchID, again.BatchID)
		for _, id := range ids {
			w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
		}
		require.Len(t, w.batchMRs(r.BatchID), 1)
	})
}

// TestBatchRoundKilledAfterItsClaim: a batch claimed by a round that is
// gone — its instance no longer heartbeats (kill -9), or it is this very
// instance restarted under the same id — is resumed by the next round at
// once; only a builder that is alive elsewhere is given batch.resumeAfter.
func TestBatchRoundKilledAfterItsClaim(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		ctx := t.Context()
		w := newBatchWorld(t, st)
		w.rounds.ResumeAfter = noResumeDelay
		self := w.deps.Config().Instance().ID
		liveAfter := w.deps.Config().Instance().LiveAfter

		claimBy := func(builder string, ids ...string) int64 {
			t.Helper()
			w.admitted(ids...)
			c, err := st.BatchClaim(ctx, store.BatchClaimParams{ProjectID: 1, MaxRequests: 10, Builder: builder})
			require.NoError(t, err)
			require.Equal(t, store.ClaimClaimed, c.Outcome)
			return c.BatchID
		}
		finish := func(batchID int64, ids ...string) {
			t.Helper()
			r, err := w.rounds.RunRound(ctx, 1)
			require.NoError(t, err)
			require.True(t, r.Resumed, "resumed at once")
			require.Equal(t, batchID, r.BatchID)
			for _, id := range ids {
				w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
			}
			require.Len(t, w.batchMRs(batchID), 1)
		}

		// A live builder elsewhere may still be building: left alone.
		require.NoError(t, st.InstanceHeartbeat(ctx, "instance-b"))
		live := claimBy("instance-b", "op-k-1")
		r, err := w.rounds.RunRound(ctx, 1)
		require.NoError(t, err)
		require.False(t, r.Resumed, "its builder is alive")
		// Then instance-b is killed: its heartbeat ages past instance.liveAfter.
		old, arg := st.Dialect().NowMinus(liveAfter + time.Second)
		_, err = st.DB().ExecContext(ctx, "UPDATE instance_heartbeat SET heartbeat_at = "+old+" WHERE instance_id = 'instance-b'", arg)
		require.NoError(t, err)
		finish(live, "op-k-1")

		// A builder that never heartbeat at all (gone before its first beat).
		finish(claimBy("instance-never-seen", "op-k-2"), "op-k-2")

		// This instance, restarted under the same instance.id: no round of
		// this process is on it.
		finish(claimBy(self, "op-k-3"), "op-k-3")
	})
}

// TestBatchRoundDoesNotResumeWhatItsOwnProcessIsBuilding: rounds of one
// process overlap (the scheduler and POST /ops/rounds). While one round is
// inside CreateMR for its batch, another round of the same instance finds
// the batch recorded as built by itself — and must leave it to the round
// that is on it.
func TestBatchRoundDoesNotResumeWhatItsOwnProcessIsBuilding(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		held := heldCreateMR{entered: make(chan struct{}), release: make(chan struct{})}
		w := newBatchWorld(t, st, func(g gitlab.GitLab) gitlab.GitLab { held.GitLab = g; return &held })
		w.rounds.ResumeAfter = noResumeDelay
		w.admitted("op-h-1")
		done := make(chan error, 1)
		go func() {
			_, err := w.rounds.RunRound(context.WithoutCancel(t.Context()), 1)
			done <- err
		}()
		<-held.entered
		r, err := w.rounds.RunRound(t.Context(), 1)
		require.NoError(t, err)
		require.False(t, r.Resumed, "the first round is still on it")
		close(held.release)
		require.NoError(t, <-done)
		w.until("op-h-1", "validated", at(domain.StepCalledBack, domain.BindingValidated))
	})
}

// heldCreateMR holds the first CreateMR until release.
type heldCreateMR struct {
	gitlab.GitLab
	once             atomic.Bool
	entered, release chan struct{}
}

func (h *heldCreateMR) CreateMR(ctx context.Context, project string, r gitlab.CreateMRRequest) (gitlab.MR, error) {
	if h.once.CompareAndSwap(false, true) {
		close(h.entered)
		<-h.release
	}
	return h.GitLab.CreateMR(ctx, project, r)
}
