package workflow_test

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/gitlab"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/batch"
)

// The stray sweep (docs/flows/batch.md, "A round whose batch moved on"):
// an MR a round opened on its batch's branch after the batch moved on,
// and never closed because the round died right after opening it, is
// closed by any instance's sweep with no person; an MR its active batch
// records, or may still record, is never closed.

// createdThenStuck creates MRs, then — for the first creation only —
// signals created and keeps the answer until the caller's context ends:
// the round stays right after its creation, as a round killed there.
type createdThenStuck struct {
	gitlab.GitLab
	once    *sync.Once
	created chan gitlab.MR
	release chan struct{} // nil: until the context ends
}

func newCreatedThenStuck(g gitlab.GitLab, release chan struct{}) createdThenStuck {
	return createdThenStuck{GitLab: g, once: &sync.Once{}, created: make(chan gitlab.MR, 1), release: release}
}

func (c createdThenStuck) CreateMR(ctx context.Context, project string, r gitlab.CreateMRRequest) (gitlab.MR, error) {
	mr, err := c.GitLab.CreateMR(ctx, project, r)
	first := false
	c.once.Do(func() { first = true })
	if !first || err != nil {
		return mr, err
	}
	c.created <- mr
	select {
	case <-c.release:
		return mr, nil
	case <-ctx.Done():
		return gitlab.MR{}, ctx.Err()
	}
}

// mrState reads MR !iid of project 1 from the simulator.
func (w *batchWorld) mrState(iid int64) string {
	w.t.Helper()
	var mr map[string]any
	w.simJSON(http.MethodGet, "/gitlab/api/v4/projects/1/merge_requests/"+itoa(iid), nil, &mr)
	s, _ := mr["state"].(string)
	return s
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestBatchMRLeftOpenByAKilledRoundIsClosedByTheStraySweep: a round is
// held before its CreateMR while another instance's round resumes the
// batch, opens and records its MR, and the batch merges (every member
// VALIDATED); then the held round's creation goes through — a second,
// late MR on the merged batch's branch — and the round dies right there,
// before it can close it (its answer never comes back). Before the sweep
// that MR stayed open for good (closed by hand). Now three overlapping
// stray sweeps (three instances' ticks) close it — merged wins for the
// batch's own MR, which stays merged —, a later sweep finds nothing, and
// every member is VALIDATED once with the files on main exact.
func TestBatchMRLeftOpenByAKilledRoundIsClosedByTheStraySweep(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBatchWorld(t, st)
		ids := []string{"op-stray-1", "op-stray-2"}
		w.admitted(ids...)

		stuck := newCreatedThenStuck(w.deps.GitLab, nil)
		held := newHeldCall(stuck, "CreateMR")
		slow := w.roundsOf("slow-builder", held)
		roundCtx, kill := context.WithCancel(context.WithoutCancel(t.Context()))
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = slow.RunRound(roundCtx, 1) // it dies: whatever it answers
		}()
		killSlow := sync.OnceFunc(func() { kill(); <-done })
		t.Cleanup(killSlow)
		select {
		case <-held.reached:
		case <-time.After(time.Minute):
			t.Fatal("the slow round never reached CreateMR")
		}

		// Another instance resumes the batch and merges it.
		r, err := w.rounds.RunRound(t.Context(), 1)
		require.NoError(t, err)
		require.True(t, r.Resumed, "%+v", r)
		for _, id := range ids {
			w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
		}
		b := w.untilBatch(r.BatchID, domain.BatchSucceeded)

		// The held creation goes through; the round dies before its close.
		close(held.release)
		var late gitlab.MR
		select {
		case late = <-stuck.created:
		case <-time.After(time.Minute):
			t.Fatal("the late MR was never created")
		}
		require.NotEqual(t, b.MRIID, late.IID)
		require.Equal(t, "opened", w.mrState(late.IID), "a late MR on the merged batch's branch, nobody's")

		var (
			wg     sync.WaitGroup
			closed atomic.Int64
		)
		errs := make(chan error, 3)
		for i := range 3 {
			sweeper := w.roundsOf("sweeper-"+itoa(int64(i)), w.deps.GitLab)
			wg.Go(func() {
				n, err := sweeper.SweepStrays(t.Context())
				errs <- err
				closed.Add(int64(n))
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.GreaterOrEqual(t, closed.Load(), int64(1), "some sweep closed it")
		require.Equal(t, "closed", w.mrState(late.IID))
		require.Equal(t, 1, w.mrCloses(late.IID), "closed once, however many sweeps overlapped")
		require.Equal(t, "merged", w.mrState(b.MRIID), "the batch's own MR is left as it is")
		n, err := w.rounds.SweepStrays(t.Context())
		require.NoError(t, err)
		require.Zero(t, n, "nothing left to close")

		killSlow()
		w.noMROpenForEndedBatches()
		require.Len(t, w.batchMRs(b.ID), 2)
		for _, id := range ids {
			w.validatedOnce(id)
		}
		w.filesExact(ids...)
	})
}

// TestStraySweepNeverClosesAnMRItsBatchMayStillRecord: the window between
// a round's CreateMR and its recording of the MR (BatchApply) is where an
// open MR on an active batch's branch is recorded nowhere yet. A round is
// held there (the MR created, the answer held) while sweeps run over and
// over on three "instances"; then the round goes on and records the MR
// while they keep running, and the batch is driven to merged under them.
// No sweep ever closes the MR: the batch records it once, merges it, and
// every member is VALIDATED once with the files on main exact.
func TestStraySweepNeverClosesAnMRItsBatchMayStillRecord(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBatchWorld(t, st)
		ids := []string{"op-window-1", "op-window-2"}
		w.admitted(ids...)

		release := make(chan struct{})
		stuck := newCreatedThenStuck(w.deps.GitLab, release)
		builder := w.roundsOf("builder", stuck)
		type result struct {
			r   batch.RoundResult
			err error
		}
		done := make(chan result, 1)
		go func() {
			r, err := builder.RunRound(context.WithoutCancel(t.Context()), 1)
			done <- result{r, err}
		}()
		var mr gitlab.MR
		select {
		case mr = <-stuck.created:
		case <-time.After(time.Minute):
			t.Fatal("the round never created its MR")
		}

		stop := make(chan struct{})
		var (
			wg       sync.WaitGroup
			sweeps   atomic.Int64
			closed   atomic.Int64
			sweepErr atomic.Pointer[error]
		)
		for i := range 3 {
			sweeper := w.roundsOf("sweeper-"+itoa(int64(i)), w.deps.GitLab)
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					n, err := sweeper.SweepStrays(t.Context())
					if err != nil {
						sweepErr.CompareAndSwap(nil, &err)
					}
					sweeps.Add(1)
					closed.Add(int64(n))
				}
			})
		}
		// Sweeps while the MR is recorded nowhere.
		require.Eventually(t, func() bool { return sweeps.Load() >= 6 }, time.Minute, time.Millisecond)
		require.Equal(t, "opened", w.mrState(mr.IID))
		before := sweeps.Load()
		close(release) // the round records the MR, racing the sweeps
		res := <-done
		require.NoError(t, res.err)
		require.Equal(t, mr.IID, res.r.MRIID, "the round recorded the MR it created: %+v", res.r)
		for _, id := range ids {
			w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
		}
		require.Eventually(t, func() bool { return sweeps.Load() >= before+6 }, time.Minute, time.Millisecond)
		close(stop)
		wg.Wait()
		if p := sweepErr.Load(); p != nil {
			require.NoError(t, *p)
		}

		require.Zero(t, closed.Load(), "no sweep closed anything")
		require.Zero(t, w.mrCloses(mr.IID), "the batch's MR was never closed")
		b, err := st.BatchGet(t.Context(), res.r.BatchID)
		require.NoError(t, err)
		require.Equal(t, domain.BatchSucceeded, b.Status)
		require.Equal(t, mr.IID, b.MRIID)
		require.Equal(t, "merged", w.mrState(mr.IID))
		require.Len(t, w.batchMRs(b.ID), 1)
		w.noMROpenForEndedBatches()
		for _, id := range ids {
			w.validatedOnce(id)
		}
		w.filesExact(ids...)
	})
}
