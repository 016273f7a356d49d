package withdraw

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/approval"
	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/gitlab"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flow"
)

// fakeStore is a Store in memory for the withdrawal's unit tests: it
// records every call and answers what the test scripted. It decides
// nothing — where a request is withdrawn from and the guarded write are
// store.OperationWithdraw's, proven on both databases by the store's
// conformance suite, and the plan is domain.PlanWithdrawAction's, proven
// by its tables; these tests prove what the withdraw step and the
// Withdrawer do with each answer. A method nothing scripted panics on the
// nil embedded Store.
type fakeStore struct {
	Store

	calls []string

	bindings map[string]store.Binding // BindingGetByOperation
	bindErr  error
	history  []store.OperationStep
	histErr  error
	batch    store.Batch
	batchErr error

	withdraw    store.WithdrawResult
	withdrawErr error
	withdrawals []store.WithdrawParams
	ops         map[string]store.Operation
}

func (f *fakeStore) call(format string, args ...any) {
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
}

func (f *fakeStore) BindingGetByOperation(_ context.Context, id string) (store.Binding, error) {
	f.call("BindingGetByOperation %s", id)
	if f.bindErr != nil {
		return store.Binding{}, f.bindErr
	}
	b, ok := f.bindings[id]
	if !ok {
		return store.Binding{}, fmt.Errorf("binding of %s: %w", id, domain.ErrNotFound)
	}
	return b, nil
}

func (f *fakeStore) OperationStepList(_ context.Context, id string) ([]store.OperationStep, error) {
	f.call("OperationStepList %s", id)
	return f.history, f.histErr
}

func (f *fakeStore) BatchGet(_ context.Context, id int64) (store.Batch, error) {
	f.call("BatchGet %d", id)
	return f.batch, f.batchErr
}

func (f *fakeStore) OperationWithdraw(_ context.Context, p store.WithdrawParams) (store.WithdrawResult, error) {
	f.call("OperationWithdraw %s", p.OperationID)
	f.withdrawals = append(f.withdrawals, p)
	return f.withdraw, f.withdrawErr
}

func (f *fakeStore) OperationGet(_ context.Context, id string) (store.Operation, error) {
	f.call("OperationGet %s", id)
	op, ok := f.ops[id]
	if !ok {
		return store.Operation{}, fmt.Errorf("operation %s: %w", id, domain.ErrNotFound)
	}
	return op, nil
}

// fakeGitLab answers the three calls the withdraw step makes — find the
// MR by its branch, read it, close it — from what the test scripted, and
// records them. (The batch package's benchmark fake simulates a GitLab
// for rounds and keeps no errors; it lives in that package's tests, so
// it cannot be shared from here.) Any other call panics on the nil
// embedded port.
type fakeGitLab struct {
	gitlab.GitLab
	calls []string

	bySource map[string]gitlab.MR
	findErr  error
	mr       gitlab.MR
	getErr   error
	closed   gitlab.MR // CloseMR's answer
	closeErr error
}

func (g *fakeGitLab) FindMRBySourceBranch(_ context.Context, project, source string, _ gitlab.MRStateFilter) (gitlab.MR, bool, error) {
	g.calls = append(g.calls, fmt.Sprintf("FindMRBySourceBranch %s %s", project, source))
	mr, ok := g.bySource[source]
	return mr, ok, g.findErr
}

func (g *fakeGitLab) GetMR(_ context.Context, project string, iid int64) (gitlab.MR, error) {
	g.calls = append(g.calls, fmt.Sprintf("GetMR %s !%d", project, iid))
	return g.mr, g.getErr
}

func (g *fakeGitLab) CloseMR(_ context.Context, project string, iid int64) (gitlab.MR, error) {
	g.calls = append(g.calls, fmt.Sprintf("CloseMR %s !%d", project, iid))
	return g.closed, g.closeErr
}

// fakeApproval answers the approval system's two calls the withdraw
// step makes, from what the test scripted, and records them.
type fakeApproval struct {
	approval.Service
	calls []string

	found     *approval.Approval // FindByOperationID's answer; nil: none
	findErr   error
	withdrawn approval.Approval
	err       error
}

func (a *fakeApproval) FindByOperationID(_ context.Context, op string) (approval.Approval, bool, error) {
	a.calls = append(a.calls, "FindByOperationID "+op)
	if a.found == nil {
		return approval.Approval{}, false, a.findErr
	}
	return *a.found, true, a.findErr
}

func (a *fakeApproval) Withdraw(_ context.Context, id, _ string) (approval.Approval, error) {
	a.calls = append(a.calls, "Withdraw "+id)
	return a.withdrawn, a.err
}

// gitlabErr and approvalErr are the remote systems' answers with status.
func gitlabErr(status int) error {
	return &gitlab.Error{Op: "test", Status: status, Message: http.StatusText(status)}
}

func approvalErr(status int) error {
	return &approval.Error{Op: "test", Status: status, Message: http.StatusText(status)}
}

// observed records the withdrawals and renewal ends the observer was
// told of.
type observed struct {
	flow.NopObserver
	events []string
}

func (o *observed) Withdrawn(_ context.Context, place store.WithdrawPlace) {
	o.events = append(o.events, fmt.Sprintf("withdrawn from %s", place))
}

func (o *observed) RenewalEnded(_ context.Context, id string, outcome domain.RenewalOutcome) {
	o.events = append(o.events, fmt.Sprintf("renewal ended %s %s", id, outcome))
}

// testConfig is project 1 and the target "t" without batching.
func testConfig(t *testing.T) func() *config.Snapshot {
	t.Helper()
	mgr, err := config.Load(t.Context(), config.Options{Overlay: map[string]any{
		"gitlab.projects": []any{"1"},
		"targets":         map[string]any{"t": map[string]any{"accessMode": "OPEN", "batching": false, "maxDays": 30}},
	}})
	require.NoError(t, err)
	snap := mgr.Current()
	require.NoError(t, mgr.Close())
	return func() *config.Snapshot { return snap }
}
