package callbacks

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flow"
)

// fakeStore is a Store in memory for the callbacks' unit tests: it records
// every call and answers what the test scripted. It decides nothing and
// enforces no invariant — the guards under the row locks are the store's,
// proven on both databases by its conformance suite; these tests prove
// what the callbacks do with each answer. A method nothing scripted
// panics on the nil embedded Store, so a test that reaches further than it
// meant to fails loudly.
type fakeStore struct {
	Store

	calls []string

	ops      map[string]store.Operation
	opErr    error
	bindings map[string]store.Binding // by subject/target
	bindErr  error

	byMR    []store.Operation
	byMRErr error

	// flips answers BindingMarkValidated per operation (nil: no flip).
	flips   map[string]*store.Flip
	markErr error
	marked  []store.BindingMarkValidatedParams

	merge    store.MRMergeState
	mergeErr error

	classified  []string // "row disposition: reason"
	classifyErr error

	seen        bool
	seenErr     error
	markApplied []string // "project/mr: reason"

	// expedite answers WorkExpedite per operation.
	expedite    map[string]bool
	expediteErr error
	expedited   []string // "operation action"

	latest    map[string]store.ApprovalCallbackRecord
	latestErr error
	inserted  []store.ApprovalCallbackParams
	insertErr error
	noted     []string // "delivery disposition: reason"
	apply     store.WorkCallbackResult
	applyErr  error
	applied   []store.WorkCallbackParams
	noteErr   error
}

func (f *fakeStore) call(format string, args ...any) {
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
}

func (f *fakeStore) OperationGet(_ context.Context, id string) (store.Operation, error) {
	f.call("OperationGet %s", id)
	if f.opErr != nil {
		return store.Operation{}, f.opErr
	}
	op, ok := f.ops[id]
	if !ok {
		return store.Operation{}, fmt.Errorf("operation %s: %w", id, domain.ErrNotFound)
	}
	return op, nil
}

func (f *fakeStore) BindingGet(_ context.Context, subject, target string) (store.Binding, error) {
	f.call("BindingGet %s/%s", subject, target)
	if f.bindErr != nil {
		return store.Binding{}, f.bindErr
	}
	b, ok := f.bindings[subject+"/"+target]
	if !ok {
		return store.Binding{}, fmt.Errorf("binding %s/%s: %w", subject, target, domain.ErrNotFound)
	}
	return b, nil
}

func (f *fakeStore) OperationListByMR(_ context.Context, project, mr int64) ([]store.Operation, error) {
	f.call("OperationListByMR %d/%d", project, mr)
	return f.byMR, f.byMRErr
}

func (f *fakeStore) BindingMarkValidated(_ context.Context, p store.BindingMarkValidatedParams) (*store.Flip, error) {
	f.call("BindingMarkValidated %s", p.OperationID)
	f.marked = append(f.marked, p)
	if f.markErr != nil {
		return nil, f.markErr
	}
	return f.flips[p.OperationID], nil
}

func (f *fakeStore) MRMergeStateGet(_ context.Context, project, mr int64) (store.MRMergeState, error) {
	f.call("MRMergeStateGet %d/%d", project, mr)
	return f.merge, f.mergeErr
}

func (f *fakeStore) DeployCallbackClassify(_ context.Context, id int64, disposition, reason string) error {
	f.call("DeployCallbackClassify %d", id)
	f.classified = append(f.classified, fmt.Sprintf("%d %s: %s", id, disposition, reason))
	return f.classifyErr
}

func (f *fakeStore) DeployCallbackSeen(_ context.Context, project, mr int64) (bool, error) {
	f.call("DeployCallbackSeen %d/%d", project, mr)
	return f.seen, f.seenErr
}

func (f *fakeStore) DeployCallbackMarkApplied(_ context.Context, project, mr int64, reason string) error {
	f.call("DeployCallbackMarkApplied %d/%d", project, mr)
	f.markApplied = append(f.markApplied, fmt.Sprintf("%d/%d: %s", project, mr, reason))
	return nil
}

func (f *fakeStore) WorkExpedite(_ context.Context, id, action string) (bool, error) {
	f.call("WorkExpedite %s %s", id, action)
	f.expedited = append(f.expedited, id+" "+action)
	return f.expedite[id], f.expediteErr
}

func (f *fakeStore) ApprovalCallbackLatest(_ context.Context, id string) (store.ApprovalCallbackRecord, bool, error) {
	f.call("ApprovalCallbackLatest %s", id)
	rec, ok := f.latest[id]
	return rec, ok, f.latestErr
}

func (f *fakeStore) ApprovalCallbackInsert(_ context.Context, p store.ApprovalCallbackParams) (bool, error) {
	f.call("ApprovalCallbackInsert %s", p.DeliveryKey)
	f.inserted = append(f.inserted, p)
	return f.insertErr == nil, f.insertErr
}

func (f *fakeStore) ApprovalCallbackDisposition(_ context.Context, key, disposition, reason string) error {
	f.call("ApprovalCallbackDisposition %s", key)
	f.noted = append(f.noted, fmt.Sprintf("%s %s: %s", key, disposition, reason))
	return f.noteErr
}

func (f *fakeStore) WorkCallbackApply(_ context.Context, p store.WorkCallbackParams) (store.WorkCallbackResult, error) {
	f.call("WorkCallbackApply %s", p.OperationID)
	f.applied = append(f.applied, p)
	return f.apply, f.applyErr
}

// observed records what the callbacks told the observer, in order.
type observed struct {
	flow.NopObserver
	events []string
}

func (o *observed) Validated(_ context.Context, f store.Flip) {
	o.events = append(o.events, "validated "+f.OperationID)
}

func (o *observed) Revoked(_ context.Context, f store.Flip) {
	o.events = append(o.events, "revoked "+f.OperationID)
}

func (o *observed) RenewalEnded(_ context.Context, id string, outcome domain.RenewalOutcome) {
	o.events = append(o.events, fmt.Sprintf("renewal ended %s %s", id, outcome))
}

// snapshot is a configuration with overlay over the defaults: project 1,
// the target "t" without batching and "tb" with it.
func snapshot(t *testing.T, overlay map[string]any) func() *config.Snapshot {
	t.Helper()
	o := map[string]any{
		"gitlab.projects": []any{"1"},
		"targets": map[string]any{
			"t":  map[string]any{"accessMode": "OPEN", "batching": false, "maxDays": 30},
			"tb": map[string]any{"accessMode": "OPEN", "batching": true, "maxDays": 30},
		},
	}
	for k, v := range overlay {
		o[k] = v
	}
	mgr, err := config.Load(t.Context(), config.Options{Overlay: o})
	require.NoError(t, err)
	snap := mgr.Current()
	require.NoError(t, mgr.Close())
	return func() *config.Snapshot { return snap }
}
