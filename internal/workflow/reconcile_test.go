package workflow_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/callbacks"
	"changeflow/internal/workflow/flow"
	"changeflow/internal/workflow/reconcile"
)

// reconcileWorld is a store, a configuration with the window (1m, 1h) and
// a count of Observer.Validated per operation.
type reconcileWorld struct {
	t   *testing.T
	st  *store.Store
	cfg atomic.Pointer[config.Snapshot]

	mu        sync.Mutex
	validated map[string]int
}

func newReconcileWorld(t *testing.T, st *store.Store, ov map[string]any) *reconcileWorld {
	t.Helper()
	w := &reconcileWorld{t: t, st: st, validated: map[string]int{}}
	base := map[string]any{"reconcile.minAge": "1m", "reconcile.maxAge": "1h", "reconcile.interval": "1h"}
	for k, v := range ov {
		base[k] = v
	}
	mgr, err := config.Load(t.Context(), config.Options{Overlay: base})
	require.NoError(t, err)
	w.cfg.Store(mgr.Current())
	_ = mgr.Close()
	return w
}

func (w *reconcileWorld) deps() flowDeps {
	return flowDeps{Store: w.st, Env: flow.Env{
		Config: w.cfg.Load,
		Observer: &testObserver{validated: func(_ context.Context, f store.Flip) {
			w.mu.Lock()
			w.validated[f.OperationID]++
			w.mu.Unlock()
		}},
	}}
}

func (w *reconcileWorld) count(opID string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.validated[opID]
}

func (w *reconcileWorld) total() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, c := range w.validated {
		n += c
	}
	return n
}

// merged inserts operations with their bindings MERGED (step
// HANDLE_MERGED) whose last change was age ago by the database clock,
// with multi-row statements so hundreds of rows stay fast.
func (w *reconcileWorld) merged(project int64, age time.Duration, iids map[string]int64) {
	w.t.Helper()
	if len(iids) == 0 {
		return
	}
	var ops, binds []string
	var opArgs, bindArgs []any
	past, arg := w.st.Dialect().NowMinus(age)
	for id, iid := range iids {
		ops = append(ops, "(?, ?, ?, ?, ?, ?, ?)")
		var mr any = iid
		if iid == 0 {
			mr = nil
		}
		opArgs = append(opArgs, id, "u-"+id, "t-rec", project, flow.FlowLegacy, int(domain.StepHandleMerged), mr)
		binds = append(binds, "(?, ?, ?, ?, "+past+")")
		bindArgs = append(bindArgs, "u-"+id, "t-rec", string(domain.BindingMerged), id, arg)
	}
	ctx := w.t.Context()
	_, err := w.st.DB().ExecContext(ctx,
		"INSERT INTO operation (operation_id, subject, target_key, project_id, flow, step_status, mr_iid) VALUES "+
			strings.Join(ops, ", "), opArgs...)
	require.NoError(w.t, err)
	_, err = w.st.DB().ExecContext(ctx,
		"INSERT INTO binding (subject_id, target_key, status, operation_id, updated_at) VALUES "+
			strings.Join(binds, ", "), bindArgs...)
	require.NoError(w.t, err)
	w.mergeHistory(iids)
}

// mergeHistory writes the step-history row changeflow's merge writes
// (MERGING → MERGED) for each operation: what makes its MR one
// changeflow merged.
func (w *reconcileWorld) mergeHistory(iids map[string]int64) {
	w.t.Helper()
	var rows []string
	var args []any
	for id := range iids {
		rows = append(rows, "(?, ?, ?, 'MERGING', 'MERGED', 'merge', 'merged')")
		args = append(args, id, int(domain.StepHandleStarted), int(domain.StepHandleMerged))
	}
	_, err := w.st.DB().ExecContext(w.t.Context(),
		"INSERT INTO operation_step (operation_id, from_step, to_step, from_binding_status, to_binding_status, actor, note) VALUES "+
			strings.Join(rows, ", "), args...)
	require.NoError(w.t, err)
}

// validatedBefore records a request whose MR iid changeflow merged and
// whose deployment was confirmed long ago (binding VALIDATED, outside
// every window): the MR a later deploy callback reports when it raises a
// project's watermark.
func (w *reconcileWorld) validatedBefore(project, iid int64) {
	w.t.Helper()
	id := fmt.Sprintf("earlier-%d-%d", project, iid)
	ctx := w.t.Context()
	_, err := w.st.DB().ExecContext(ctx,
		"INSERT INTO operation (operation_id, subject, target_key, project_id, flow, step_status, mr_iid) VALUES (?, ?, ?, ?, ?, ?, ?)",
		id, "u-"+id, "t-rec", project, flow.FlowLegacy, int(domain.StepCalledBack), iid)
	require.NoError(w.t, err)
	_, err = w.st.DB().ExecContext(ctx,
		"INSERT INTO binding (subject_id, target_key, status, operation_id) VALUES (?, ?, ?, ?)",
		"u-"+id, "t-rec", string(domain.BindingValidated), id)
	require.NoError(w.t, err)
	w.mergeHistory(map[string]int64{id: iid})
}

func (w *reconcileWorld) deployed(project, iid int64, status string) {
	w.t.Helper()
	_, err := w.st.DeployCallbackInsert(w.t.Context(), store.DeployCallbackParams{ProjectID: project, MRIID: iid, Status: status})
	require.NoError(w.t, err)
}

func (w *reconcileWorld) state(opID string) (domain.BindingStatus, domain.StepStatus) {
	w.t.Helper()
	b, err := w.st.BindingGetByOperation(w.t.Context(), opID)
	require.NoError(w.t, err)
	op, err := w.st.OperationGet(w.t.Context(), opID)
	require.NoError(w.t, err)
	return b.Status, domain.StepStatus(op.Step)
}

// TestReconcileWindowExactMatchAndWatermark: the window's edges, the
// exact match, the watermark inference, an MR above the watermark, a
// failed deployment that raises no watermark, and per-project watermarks.
func TestReconcileWindowExactMatchAndWatermark(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newReconcileWorld(t, st, nil)
		w.merged(1, 10*time.Minute, map[string]int64{"below": 5, "exact": 10, "above": 12, "no-mr": 0})
		w.merged(1, 10*time.Second, map[string]int64{"too-young": 3})
		w.merged(1, 2*time.Hour, map[string]int64{"too-old": 4})
		w.merged(2, 10*time.Minute, map[string]int64{"p2-above": 5, "p2-below": 2})
		w.merged(3, 10*time.Minute, map[string]int64{"p3-none": 1})
		w.deployed(1, 10, "SUCCESS")
		w.deployed(1, 50, "FAILED") // a failed deployment is no evidence
		w.validatedBefore(2, 3)
		w.deployed(2, 3, "success")

		r := reconcile.New(w.deps().Env, w.deps().Store)
		res, err := r.RunOnce(t.Context())
		require.NoError(t, err)
		require.Equal(t, reconcile.Result{Scanned: 7, Validated: 3, Waiting: 4}, res)

		for id, want := range map[string]domain.StepStatus{
			"below": domain.StepReconciled, "exact": domain.StepCalledBack, "p2-below": domain.StepReconciled,
		} {
			b, step := w.state(id)
			require.Equal(t, domain.BindingValidated, b, id)
			require.Equal(t, want, step, id)
			require.Equal(t, 1, w.count(id), id)
		}
		for _, id := range []string{"above", "no-mr", "too-young", "too-old", "p2-above", "p3-none"} {
			b, step := w.state(id)
			require.Equal(t, domain.BindingMerged, b, id)
			require.Equal(t, domain.StepHandleMerged, step, id)
			require.Zero(t, w.count(id), id)
		}
		steps, err := st.OperationStepList(t.Context(), "below")
		require.NoError(t, err)
		last := steps[len(steps)-1]
		require.Equal(t, reconcile.Actor, last.Actor)
		require.Contains(t, last.Note, "watermark !10")

		// A second run finds only what still waits; nothing flips twice.
		res, err = r.RunOnce(t.Context())
		require.NoError(t, err)
		require.Equal(t, reconcile.Result{Scanned: 4, Validated: 0, Waiting: 4}, res)
		require.Equal(t, 3, w.total())

		// The deployment of a later MR reaches project 2 only.
		w.validatedBefore(2, 6)
		w.deployed(2, 6, "SUCCESS")
		res, err = r.RunOnce(t.Context())
		require.NoError(t, err)
		require.Equal(t, reconcile.Result{Scanned: 4, Validated: 1, Waiting: 3}, res)
		b, _ := w.state("p2-above")
		require.Equal(t, domain.BindingValidated, b)
		b, _ = w.state("above")
		require.Equal(t, domain.BindingMerged, b)
	})
}

// TestReconcileInferenceOff: with reconcile.inference false (a deployment
// pipeline that deploys out of order) only rows whose own deploy callback
// was recorded are validated; a row below the watermark stays MERGED —
// until the switch is turned back on (a reload applies to the next run),
// or its own callback is recorded.
func TestReconcileInferenceOff(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newReconcileWorld(t, st, map[string]any{"reconcile.inference": false})
		w.merged(1, 10*time.Minute, map[string]int64{"below": 5, "exact": 10, "below-2": 7})
		w.deployed(1, 10, "SUCCESS")

		r := reconcile.New(w.deps().Env, w.deps().Store)
		res, err := r.RunOnce(t.Context())
		require.NoError(t, err)
		require.Equal(t, reconcile.Result{Scanned: 3, Validated: 1, Waiting: 2}, res)
		b, step := w.state("exact")
		require.Equal(t, domain.BindingValidated, b)
		require.Equal(t, domain.StepCalledBack, step)
		for _, id := range []string{"below", "below-2"} {
			b, step := w.state(id)
			require.Equal(t, domain.BindingMerged, b, id)
			require.Equal(t, domain.StepHandleMerged, step, id)
			require.Zero(t, w.count(id), id)
		}

		// Its own callback, recorded later: an exact match.
		w.deployed(1, 7, "SUCCESS")
		res, err = r.RunOnce(t.Context())
		require.NoError(t, err)
		require.Equal(t, reconcile.Result{Scanned: 2, Validated: 1, Waiting: 1}, res)
		b, step = w.state("below-2")
		require.Equal(t, domain.BindingValidated, b)
		require.Equal(t, domain.StepCalledBack, step)

		// Inference back on (a reload): the watermark validates the rest.
		mgr, err := config.Load(t.Context(), config.Options{Overlay: map[string]any{
			"reconcile.minAge": "1m", "reconcile.maxAge": "1h", "reconcile.interval": "1h", "reconcile.inference": true}})
		require.NoError(t, err)
		w.cfg.Store(mgr.Current())
		_ = mgr.Close()
		res, err = r.RunOnce(t.Context())
		require.NoError(t, err)
		require.Equal(t, reconcile.Result{Scanned: 1, Validated: 1}, res)
		b, step = w.state("below")
		require.Equal(t, domain.BindingValidated, b)
		require.Equal(t, domain.StepReconciled, step)
		require.Equal(t, 3, w.total(), "each flipped once")
	})
}

// TestReconcileMoreRowsThanOneINList: 620 rows need two IN chunks; all
// are found and flipped once.
func TestReconcileMoreRowsThanOneINList(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newReconcileWorld(t, st, nil)
		const n = store.InChunkSize + 120
		iids := make(map[string]int64, n)
		for i := range n {
			iids[fmt.Sprintf("op-%04d", i)] = int64(i + 1)
		}
		w.merged(7, 5*time.Minute, iids)
		w.validatedBefore(7, n+1)
		w.deployed(7, n+1, "SUCCESS")
		res, err := reconcile.New(w.deps().Env, w.deps().Store).RunOnce(t.Context())
		require.NoError(t, err)
		require.Equal(t, reconcile.Result{Scanned: n, Validated: n}, res)
		require.Equal(t, n, w.total())
		var merged int
		require.NoError(t, st.DB().QueryRowContext(t.Context(),
			"SELECT COUNT(*) FROM binding WHERE status = 'MERGED'").Scan(&merged))
		require.Zero(t, merged)
	})
}

// TestReconcileRacingDeployCallbacks: runs of reconciliation on several
// goroutines while deploy callbacks (duplicated) arrive for the same
// operations and a later MR's deployment raises the watermark midway:
// every operation flips exactly once and Observer.Validated fires exactly once
// per operation.
func TestReconcileRacingDeployCallbacks(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newReconcileWorld(t, st, nil)
		const n = 40
		iids := make(map[string]int64, n)
		for i := range n {
			iids[fmt.Sprintf("race-%02d", i)] = int64(i + 1)
		}
		w.merged(1, 5*time.Minute, iids)
		w.validatedBefore(1, 1000)
		d := w.deps()
		cbs := callbacks.New(d.Env, d.Store, nil)
		ctx := t.Context()

		var wg sync.WaitGroup
		errs := make(chan error, 64)
		start := make(chan struct{})
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				r := reconcile.New(d.Env, d.Store)
				for range 3 {
					if _, err := r.RunOnce(ctx); err != nil {
						errs <- fmt.Errorf("reconciler %d: %w", g, err)
						return
					}
				}
			}()
		}
		for g := range 2 { // two deliveries of every callback
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for i := range n {
					iid := int64(i + 1)
					if g == 0 && i == n/2 {
						w.deployed(1, 1000, "SUCCESS") // the watermark jumps
					}
					if _, err := st.DeployCallbackInsert(ctx, store.DeployCallbackParams{ProjectID: 1, MRIID: iid, Status: "SUCCESS"}); err != nil {
						errs <- err
						return
					}
					if _, err := cbs.Deploy(ctx, callbacks.DeployEvent{ProjectID: 1, MRIID: iid, Status: "SUCCESS"}); err != nil {
						errs <- fmt.Errorf("callback %d: %w", iid, err)
						return
					}
				}
			}()
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		for id := range iids {
			b, step := w.state(id)
			require.Equal(t, domain.BindingValidated, b, id)
			require.Contains(t, []domain.StepStatus{domain.StepCalledBack, domain.StepReconciled}, step, id)
			require.Equal(t, 1, w.count(id), id)
		}
		require.Equal(t, n, w.total())
	})
}

// TestReconcilerStartStop: the scheduled loop reconciles on its interval;
// Start and Stop are safe twice, and Stop before Start.
func TestReconcilerStartStop(t *testing.T) {
	t.Parallel()
	storetest.RaceOnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newReconcileWorld(t, st, map[string]any{"reconcile.interval": "20ms"})
		reconcile.New(w.deps().Env, w.deps().Store).Stop()

		w.merged(1, 5*time.Minute, map[string]int64{"sched": 1})
		w.deployed(1, 1, "SUCCESS")
		r := reconcile.New(w.deps().Env, w.deps().Store)
		require.NoError(t, r.Start(t.Context()))
		require.NoError(t, r.Start(t.Context()))
		require.Eventually(t, func() bool { return w.count("sched") == 1 }, 10*time.Second, 10*time.Millisecond)
		r.Stop()
		r.Stop()
		require.NoError(t, r.Start(t.Context())) // after Stop: nothing
		require.Equal(t, 1, w.total())
	})
}
