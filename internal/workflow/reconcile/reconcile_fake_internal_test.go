package reconcile

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flow"
	"changeflow/internal/workflow/flowtest"
)

// fakeStore is a Store in memory for reconciliation's unit tests: it
// records every call and answers what the test scripted. It decides
// nothing — the window, the watermarks and the flip's guards are the
// store's, proven on both databases by its conformance suite; these tests
// prove what a run does with each answer and how it counts.
// flowtest.Store answers the operations and the bindings (by operation,
// and by subject/target for the inbox's waiting rows); a method nothing
// scripted panics on the nil Store of unscripted.
type fakeStore struct {
	flowtest.Store
	unscripted

	scan       store.ReconcileScan
	scanErr    error
	scanParams []store.ReconcileScanParams

	// flips answers BindingMarkValidated per operation (nil: no flip);
	// markErrs an error per operation instead.
	flips    map[string]*store.Flip
	markErrs map[string]error
	marked   []string // "operation step"
	applied  []string // DeployCallbackMarkApplied "project/mr"

	pending    []string
	pendingErr error
	minAges    []time.Duration
	latest     map[string]store.ApprovalCallbackRecord
	latestErrs map[string]error
	callbacks  []string // WorkCallbackApply operation
}

// unscripted is Store one level below fakeStore's own methods and
// flowtest.Store's, which therefore win over its nil value's.
type unscripted struct{ Store }

func (f *fakeStore) ReconcileScanWindow(_ context.Context, p store.ReconcileScanParams) (store.ReconcileScan, error) {
	f.Call("ReconcileScanWindow")
	f.scanParams = append(f.scanParams, p)
	return f.scan, f.scanErr
}

func (f *fakeStore) BindingMarkValidated(_ context.Context, p store.BindingMarkValidatedParams) (*store.Flip, error) {
	f.Call("BindingMarkValidated %s", p.OperationID)
	f.marked = append(f.marked, fmt.Sprintf("%s %s", p.OperationID, domain.StepStatus(p.CalledBackStep)))
	if err := f.markErrs[p.OperationID]; err != nil {
		return nil, err
	}
	return f.flips[p.OperationID], nil
}

func (f *fakeStore) DeployCallbackMarkApplied(_ context.Context, project, mr int64, _ string) error {
	f.Call("DeployCallbackMarkApplied %d/%d", project, mr)
	f.applied = append(f.applied, fmt.Sprintf("%d/%d", project, mr))
	return nil
}

func (f *fakeStore) ApprovalInboxPending(_ context.Context, minAge time.Duration, _ int) ([]string, error) {
	f.Call("ApprovalInboxPending")
	f.minAges = append(f.minAges, minAge)
	return f.pending, f.pendingErr
}

func (f *fakeStore) ApprovalCallbackLatest(_ context.Context, id string) (store.ApprovalCallbackRecord, bool, error) {
	f.Call("ApprovalCallbackLatest %s", id)
	rec, ok := f.latest[id]
	return rec, ok, f.latestErrs[id]
}

func (f *fakeStore) ApprovalCallbackDisposition(context.Context, string, string, string) error {
	return nil
}

// WorkCallbackApply applies every replayed decision, recording only its
// operation: the replay's tests count what was applied, not how.
func (f *fakeStore) WorkCallbackApply(_ context.Context, p store.WorkCallbackParams) (store.WorkCallbackResult, error) {
	f.Call("WorkCallbackApply %s", p.OperationID)
	f.callbacks = append(f.callbacks, p.OperationID)
	return store.WorkCallbackResult{Applied: true}, nil
}

// testEnv is an Env over reconcile.minAge 2m, maxAge 1h, inference as
// given and approval read-back off, telling each Validated to validated.
func testEnv(t *testing.T, inference bool, validated *[]string) flow.Env {
	t.Helper()
	snap := flowtest.Config(t, flowtest.Targets(map[string]bool{"t": false}), map[string]any{
		"reconcile.minAge":         "2m",
		"reconcile.maxAge":         "1h",
		"reconcile.inference":      inference,
		"approval.verifyDecisions": false,
	})
	obs := validatedObserver{fn: func(f store.Flip) {
		if validated != nil {
			*validated = append(*validated, f.OperationID)
		}
	}}
	return flow.Env{Config: snap, Observer: obs}
}

// TestRunOnceCounts: each MERGED row of the window is validated by its
// exact callback, by the watermark when inference is on, or left waiting;
// a flip another writer made first counts nowhere, a step the table does
// not repair waits for a person, and only this run's flips tell the
// observer.
func TestRunOnceCounts(t *testing.T) {
	flip := func(id string) *store.Flip {
		return &store.Flip{OperationID: id, From: domain.BindingMerged, To: domain.BindingValidated}
	}
	illegal := fmt.Errorf("step: %w", domain.ErrIllegalTransition)
	scan := store.ReconcileScan{
		Rows: []store.ReconcileRow{
			{OperationID: "no-mr", ProjectID: 1},
			{OperationID: "exact", ProjectID: 1, MRIID: 5, CalledBack: true},
			{OperationID: "below", ProjectID: 1, MRIID: 3},
			{OperationID: "above", ProjectID: 1, MRIID: 12},
			{OperationID: "at-the-mark", ProjectID: 1, MRIID: 10},
			{OperationID: "other-project", ProjectID: 2, MRIID: 3},
			{OperationID: "raced", ProjectID: 1, MRIID: 6, CalledBack: true},
			{OperationID: "unrepairable", ProjectID: 1, MRIID: 7, CalledBack: true},
			{OperationID: "moved-on", ProjectID: 1, MRIID: 8, CalledBack: true},
		},
		Watermarks: map[int64]int64{1: 10},
	}
	world := func() *fakeStore {
		return &fakeStore{
			scan:     scan,
			flips:    map[string]*store.Flip{"exact": flip("exact"), "below": flip("below")},
			markErrs: map[string]error{"unrepairable": illegal, "moved-on": illegal},
			Store: flowtest.Store{ByOperation: map[string]store.Binding{
				"unrepairable": {OperationID: "unrepairable", Status: domain.BindingMerged},
				"moved-on":     {OperationID: "moved-on", Status: domain.BindingValidated},
			}},
		}
	}
	t.Run("with inference", func(t *testing.T) {
		var validated []string
		st := world()
		res, err := New(testEnv(t, true, &validated), st).RunOnce(t.Context())
		require.NoError(t, err)
		require.Equal(t, Result{Scanned: 9, Validated: 2, Waiting: 5}, res)
		require.Equal(t, []string{"exact", "below"}, validated)
		require.Equal(t, []string{
			"exact CALLED_BACK", "below RECONCILED", "raced CALLED_BACK", "unrepairable CALLED_BACK", "moved-on CALLED_BACK",
		}, st.marked)
		require.Equal(t, []string{"1/5"}, st.applied, "only an exact match marks its callbacks applied")
		require.Equal(t, []store.ReconcileScanParams{{MinAge: 2 * time.Minute, MaxAge: time.Hour}}, st.scanParams)
	})
	t.Run("without inference only exact matches validate", func(t *testing.T) {
		var validated []string
		st := world()
		st.scan.Watermarks = nil
		res, err := New(testEnv(t, false, &validated), st).RunOnce(t.Context())
		require.NoError(t, err)
		require.Equal(t, Result{Scanned: 9, Validated: 1, Waiting: 6}, res)
		require.Equal(t, []string{"exact"}, validated)
		require.True(t, st.scanParams[0].NoWatermarks)
	})
	t.Run("a watermark is not used without inference", func(t *testing.T) {
		st := world()
		res, err := New(testEnv(t, false, nil), st).RunOnce(t.Context())
		require.NoError(t, err)
		require.Equal(t, 1, res.Validated)
	})
	t.Run("an error stops the run after the rows before it", func(t *testing.T) {
		st := world()
		st.markErrs["below"] = errors.New("database down")
		res, err := New(testEnv(t, true, nil), st).RunOnce(t.Context())
		require.ErrorIs(t, err, st.markErrs["below"])
		require.ErrorContains(t, err, "reconcile below")
		require.Equal(t, Result{Scanned: 9, Validated: 1, Waiting: 1}, res)
	})
	// One row at a time, so a miscount in one case cannot be hidden by
	// another's.
	for _, c := range []struct {
		row  string
		want Result
	}{
		{"no-mr", Result{Scanned: 1, Waiting: 1}},
		{"exact", Result{Scanned: 1, Validated: 1}},
		{"below", Result{Scanned: 1, Validated: 1}},
		{"above", Result{Scanned: 1, Waiting: 1}},
		{"at-the-mark", Result{Scanned: 1, Waiting: 1}},
		{"other-project", Result{Scanned: 1, Waiting: 1}},
		{"raced", Result{Scanned: 1}},
		{"unrepairable", Result{Scanned: 1, Waiting: 1}},
		{"moved-on", Result{Scanned: 1}},
	} {
		t.Run("the row "+c.row, func(t *testing.T) {
			st := world()
			for _, r := range scan.Rows {
				if r.OperationID == c.row {
					st.scan.Rows = []store.ReconcileRow{r}
				}
			}
			res, err := New(testEnv(t, true, nil), st).RunOnce(t.Context())
			require.NoError(t, err)
			require.Equal(t, c.want, res)
		})
	}
	t.Run("the scan fails", func(t *testing.T) {
		st := &fakeStore{scanErr: errors.New("database down")}
		res, err := New(testEnv(t, true, nil), st).RunOnce(t.Context())
		require.ErrorIs(t, err, st.scanErr)
		require.Equal(t, Result{}, res)
	})
}

// TestReplayApprovalInboxCounts: the inbox replay applies each pending
// decision through the callbacks' guard, counts only those applied, wakes
// the engine once when any was, and stops at the first error.
func TestReplayApprovalInboxCounts(t *testing.T) {
	world := func() *fakeStore {
		st := &fakeStore{
			pending: []string{"waits", "none-recorded", "moved-on", "unrecorded"},
			latest: map[string]store.ApprovalCallbackRecord{
				"waits":      {DeliveryKey: "k1", ApprovalID: "ap-waits", Result: "APPROVED"},
				"moved-on":   {DeliveryKey: "k3", ApprovalID: "ap-moved-on", Result: "APPROVED"},
				"unrecorded": {DeliveryKey: "k4", ApprovalID: "ap-unrecorded", Result: "APPROVED"},
			},
			Store: flowtest.Store{Ops: map[string]store.Operation{}, ByKey: map[string]store.Binding{}},
		}
		for _, id := range []string{"waits", "moved-on", "unrecorded"} {
			st.Ops[id] = store.Operation{OperationID: id, Subject: "u-" + id, TargetKey: "t", ProjectID: 1, ApprovalID: "ap-" + id}
			if id == "unrecorded" {
				// Deferred until submit_approval records the id: not applied.
				st.Ops[id] = store.Operation{OperationID: id, Subject: "u-" + id, TargetKey: "t", ProjectID: 1}
			}
			status := domain.BindingApprovalSent
			if id == "moved-on" {
				status = domain.BindingMRCreating
			}
			st.ByKey["u-"+id+"/t"] = store.Binding{OperationID: id, Status: status}
		}
		return st
	}
	t.Run("one applied of four", func(t *testing.T) {
		st := world()
		r := New(testEnv(t, true, nil), st)
		woke := 0
		r.Wake = func() { woke++ }
		n, err := r.ReplayApprovalInbox(t.Context())
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, 1, woke)
		require.Equal(t, []string{"waits"}, st.callbacks)
		require.Equal(t, []time.Duration{2 * time.Minute}, st.minAges, "decisions older than reconcile.minAge")
	})
	t.Run("nothing applied: no wake", func(t *testing.T) {
		st := world()
		st.pending = []string{"none-recorded", "moved-on", "unrecorded"}
		r := New(testEnv(t, true, nil), st)
		woke := 0
		r.Wake = func() { woke++ }
		n, err := r.ReplayApprovalInbox(t.Context())
		require.NoError(t, err)
		require.Zero(t, n)
		require.Zero(t, woke)
	})
	t.Run("an error stops the replay with what was applied", func(t *testing.T) {
		st := world()
		st.latestErrs = map[string]error{"none-recorded": errors.New("database down")}
		r := New(testEnv(t, true, nil), st)
		woke := 0
		r.Wake = func() { woke++ }
		n, err := r.ReplayApprovalInbox(t.Context())
		require.ErrorIs(t, err, st.latestErrs["none-recorded"])
		require.ErrorContains(t, err, "replay the approval decision of none-recorded")
		require.Equal(t, 1, n)
		require.Zero(t, woke, "a replay that failed wakes nothing")
		require.NotContains(t, st.Calls, "ApprovalCallbackLatest moved-on")
	})
	t.Run("the pending list fails", func(t *testing.T) {
		st := &fakeStore{pendingErr: errors.New("database down")}
		n, err := New(testEnv(t, true, nil), st).ReplayApprovalInbox(t.Context())
		require.ErrorIs(t, err, st.pendingErr)
		require.Zero(t, n)
	})
}
