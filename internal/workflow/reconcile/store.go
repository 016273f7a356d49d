package reconcile

import (
	"context"
	"time"

	"changeflow/internal/store"
	"changeflow/internal/workflow/callbacks"
	"changeflow/internal/workflow/flow"
)

// Store is what reconciliation reads and writes, with what applying a
// recorded decision or a confirmation needs (callbacks.Store);
// *store.Store is one.
type Store interface {
	callbacks.Store
	ApprovalInboxPending(ctx context.Context, minAge time.Duration, limit int) ([]string, error)
	BindingGetByOperation(ctx context.Context, operationID string) (store.Binding, error)
	ReconcileScanWindow(ctx context.Context, p store.ReconcileScanParams) (store.ReconcileScan, error)
}

// deps is what a run works with: the shared Env and the store.
type deps struct {
	flow.Env
	Store Store
}

// applier applies recorded decisions and confirmations through the
// callbacks' own guards.
func (d deps) applier() callbacks.Applier {
	return callbacks.Applier{Env: d.Env, Store: d.Store}
}
