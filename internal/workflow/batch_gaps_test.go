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

// crashAfterClose closes the MR in GitLab and then fails like a process
// that died right after the remote close: the settlement's transaction
// never runs. Armed by arm; once.
type crashAfterClose struct {
	gitlab.GitLab
	armed, fired *atomic.Bool
}

func (c crashAfterClose) CloseMR(ctx context.Context, project string, iid int64) (gitlab.MR, error) {
	mr, err := c.GitLab.CloseMR(ctx, project, iid)
	if err == nil && c.armed.Load() && c.fired.CompareAndSwap(false, true) {
		return gitlab.MR{}, &gitlab.Error{Op: "CloseMR", Message: "the process died after the close", Unknown: true}
	}
	return mr, err
}

// TestBatchSweepCrashAfterTheCloseLeavesMembersReadmittable: the sweep of a
// timed-out batch closes its MR and then "crashes" before its transaction.
// Nothing is stranded: the batch is still RUNNING (its slot visibly held,
// its members where they were), so the next sweep finds it again, reads
// the MR closed and settles it — batch FAILED and every member back in the
// waiting set in one transaction — and the next round validates them.
func TestBatchSweepCrashAfterTheCloseLeavesMembersReadmittable(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		armed, fired := &atomic.Bool{}, &atomic.Bool{}
		w := newBatchWorld(t, st, func(g gitlab.GitLab) gitlab.GitLab {
			return crashAfterClose{GitLab: g, armed: armed, fired: fired}
		})
		w.reload(map[string]any{"batch.timeout": "1s"})
		ids := []string{"op-cs1", "op-cs2"}
		w.admitted(ids...)
		w.simJSON(http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"outcome": "never", "count": 1}, nil)
		r, err := w.rounds.RunRound(t.Context(), 1)
		require.NoError(t, err)
		require.Equal(t, "CLAIMED", r.Outcome)
		require.Equal(t, 2, r.Members)

		armed.Store(true)
		require.Eventually(t, func() bool {
			_, err := w.rounds.Sweep(t.Context())
			return err != nil && fired.Load()
		}, 10*time.Second, 50*time.Millisecond, "the sweep reaches the close and dies after it")
		require.Equal(t, "closed", w.batchMRs(r.BatchID)[0]["state"])
		b, err := st.BatchGet(t.Context(), r.BatchID)
		require.NoError(t, err)
		require.Equal(t, domain.BatchRunning, b.Status, "nothing committed: the batch is found again")
		for _, id := range ids {
			o, bd := w.state(id)
			require.Equal(t, domain.BindingMRCreating, bd.Status, "%s", id)
			require.NotEqual(t, domain.StepCreateAdmitted.String(), domain.StepStatus(o.Step).String())
		}

		n, err := w.rounds.Sweep(t.Context())
		require.NoError(t, err)
		require.Equal(t, 1, n)
		b, err = st.BatchGet(t.Context(), r.BatchID)
		require.NoError(t, err)
		require.Equal(t, domain.BatchFailed, b.Status)
		require.Equal(t, store.BatchFailureTimeout, b.FailureCode)
		for _, id := range ids {
			w.until(id, "re-admitted", at(domain.StepCreateAdmitted, domain.BindingMRCreating))
		}
		waiting, err := st.BatchWaitingCount(t.Context(), 1)
		require.NoError(t, err)
		require.Equal(t, 2, waiting)
		n, err = w.rounds.Sweep(t.Context())
		require.NoError(t, err)
		require.Zero(t, n, "a settled batch is not swept again")

		w.roundsUntilIdle()
		for _, id := range ids {
			w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
			require.Equal(t, 1, w.validations(id))
		}
	})
}

// state reads a request's operation row and its binding.
func (w *batchWorld) state(id string) (store.Operation, store.Binding) {
	w.t.Helper()
	o, err := w.st.OperationGet(w.t.Context(), id)
	require.NoError(w.t, err)
	b, err := w.st.BindingGet(w.t.Context(), o.Subject, o.TargetKey)
	require.NoError(w.t, err)
	return o, b
}
