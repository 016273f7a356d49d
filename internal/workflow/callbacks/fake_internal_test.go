package callbacks

import (
	"context"
	"fmt"
	"testing"

	"changeflow/internal/config"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flowtest"
)

var _ Store = (*fakeStore)(nil)

// fakeStore is a Store in memory for the callbacks' unit tests: it records
// every call and answers what the test scripted. It decides nothing and
// enforces no invariant — the guards under the row locks are the store's,
// proven on both databases by its conformance suite; these tests prove
// what the callbacks do with each answer. flowtest.Store answers the
// operations it shares with the other flows (the operations, the bindings
// by subject/target, WorkCallbackApply); fakeStore answers the rest of
// Store, every method of it, so the compiler checks that none is left
// to a nil embedded Store.
type fakeStore struct {
	flowtest.Store

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
	noteErr   error
}

func (f *fakeStore) OperationListByMR(_ context.Context, project, mr int64) ([]store.Operation, error) {
	f.Call("OperationListByMR %d/%d", project, mr)
	return f.byMR, f.byMRErr
}

func (f *fakeStore) BindingMarkValidated(_ context.Context, p store.BindingMarkValidatedParams) (*store.Flip, error) {
	f.Call("BindingMarkValidated %s", p.OperationID)
	f.marked = append(f.marked, p)
	if f.markErr != nil {
		return nil, f.markErr
	}
	return f.flips[p.OperationID], nil
}

func (f *fakeStore) MRMergeStateGet(_ context.Context, project, mr int64) (store.MRMergeState, error) {
	f.Call("MRMergeStateGet %d/%d", project, mr)
	return f.merge, f.mergeErr
}

func (f *fakeStore) DeployCallbackClassify(_ context.Context, id int64, disposition, reason string) error {
	f.Call("DeployCallbackClassify %d", id)
	f.classified = append(f.classified, fmt.Sprintf("%d %s: %s", id, disposition, reason))
	return f.classifyErr
}

func (f *fakeStore) DeployCallbackSeen(_ context.Context, project, mr int64) (bool, error) {
	f.Call("DeployCallbackSeen %d/%d", project, mr)
	return f.seen, f.seenErr
}

func (f *fakeStore) DeployCallbackMarkApplied(_ context.Context, project, mr int64, reason string) error {
	f.Call("DeployCallbackMarkApplied %d/%d", project, mr)
	f.markApplied = append(f.markApplied, fmt.Sprintf("%d/%d: %s", project, mr, reason))
	return nil
}

func (f *fakeStore) WorkExpedite(_ context.Context, id, action string) (bool, error) {
	f.Call("WorkExpedite %s %s", id, action)
	f.expedited = append(f.expedited, id+" "+action)
	return f.expedite[id], f.expediteErr
}

func (f *fakeStore) ApprovalCallbackLatest(_ context.Context, id string) (store.ApprovalCallbackRecord, bool, error) {
	f.Call("ApprovalCallbackLatest %s", id)
	rec, ok := f.latest[id]
	return rec, ok, f.latestErr
}

func (f *fakeStore) ApprovalCallbackInsert(_ context.Context, p store.ApprovalCallbackParams) (bool, error) {
	f.Call("ApprovalCallbackInsert %s", p.DeliveryKey)
	f.inserted = append(f.inserted, p)
	return f.insertErr == nil, f.insertErr
}

func (f *fakeStore) ApprovalCallbackDisposition(_ context.Context, key, disposition, reason string) error {
	f.Call("ApprovalCallbackDisposition %s", key)
	f.noted = append(f.noted, fmt.Sprintf("%s %s: %s", key, disposition, reason))
	return f.noteErr
}

// snapshot is a configuration with overlay over the defaults: project 1,
// the target "t" without batching and "tb" with it.
func snapshot(t *testing.T, overlay map[string]any) func() *config.Snapshot {
	t.Helper()
	return flowtest.Config(t, flowtest.Targets(map[string]bool{"t": false, "tb": true}), overlay)
}
