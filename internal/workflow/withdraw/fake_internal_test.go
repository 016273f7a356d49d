package withdraw

import (
	"context"
	"testing"

	"changeflow/internal/config"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flowtest"
)

// fakeStore is a Store in memory for the withdrawal's unit tests: it
// records every call and answers what the test scripted. It decides
// nothing — where a request is withdrawn from and the guarded write are
// store.OperationWithdraw's, proven on both databases by the store's
// conformance suite, and the plan is domain.PlanWithdrawAction's, proven
// by its tables; these tests prove what the withdraw step and the
// Withdrawer do with each answer. flowtest.Store answers the operations,
// the bindings by operation and BatchGet; a method nothing scripted
// panics on the nil Store of unscripted.
type fakeStore struct {
	flowtest.Store
	unscripted

	history []store.OperationStep
	histErr error

	withdraw    store.WithdrawResult
	withdrawErr error
	withdrawals []store.WithdrawParams
}

// unscripted is Store one level below fakeStore's own methods and
// flowtest.Store's, which therefore win over its nil value's.
type unscripted struct{ Store }

func (f *fakeStore) OperationStepList(_ context.Context, id string) ([]store.OperationStep, error) {
	f.Call("OperationStepList %s", id)
	return f.history, f.histErr
}

func (f *fakeStore) OperationWithdraw(_ context.Context, p store.WithdrawParams) (store.WithdrawResult, error) {
	f.Call("OperationWithdraw %s", p.OperationID)
	f.withdrawals = append(f.withdrawals, p)
	return f.withdraw, f.withdrawErr
}

// testConfig is project 1 and the target "t" without batching.
func testConfig(t *testing.T) func() *config.Snapshot {
	t.Helper()
	return flowtest.Config(t, flowtest.Targets(map[string]bool{"t": false}))
}
