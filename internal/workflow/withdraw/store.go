package withdraw

import (
	"context"

	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/store"
	"changeflow/internal/workflow/batch"
	"changeflow/internal/workflow/callbacks"
	"changeflow/internal/workflow/flow"
)

// Store is what a withdrawal reads and writes beyond the engine's own
// writes, with what settling a member's batch needs (batch.Store);
// *store.Store is one.
type Store interface {
	batch.Store
	BindingGetByOperation(ctx context.Context, operationID string) (store.Binding, error)
	OperationWithdraw(ctx context.Context, p store.WithdrawParams) (store.WithdrawResult, error)
}

// Flow is the withdrawal's upstream half (the withdraw step) over the
// shared Env and its store.
type Flow struct {
	flow.Env
	Store Store
}

var (
	// withdrawDecl: the upstream half of a withdrawal that kept failing
	// stops in CLOSE_FAILED with the action kept, for an operator's
	// retrigger; the binding stays where the withdrawal left it.
	withdrawDecl = engine.Declaration{
		OnError: engine.Failure{Step: domain.StepCloseFailed},
	}
)

// Register registers the withdraw step (the upstream half of a
// requester's withdrawal or an operator's close) on e.
func Register(e *engine.Engine, d Flow) {
	e.Register(flow.ActionWithdraw, engine.StepFunc{Decl: withdrawDecl, Fn: d.withdraw})
}

// applier applies approval decisions and deploy confirmations through the
// callbacks' own guards.
func (d Flow) applier() callbacks.Applier {
	return callbacks.Applier{Env: d.Env, Store: d.Store}
}

// batches is the batch path over d: a withdrawn member's batch is
// settled without it.
func (d Flow) batches() batch.Flow {
	return batch.Flow{Env: d.Env, Store: d.Store}
}
