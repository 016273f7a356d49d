package workflow

import (
	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/store"
	"changeflow/internal/workflow/batch"
	"changeflow/internal/workflow/callbacks"
	"changeflow/internal/workflow/flow"
	"changeflow/internal/workflow/single"
)

// Deps is what the flows still in this package need: the shared Env and
// the store.
type Deps struct {
	flow.Env
	Store *store.Store
}

var (
	// withdrawDecl: the upstream half of a withdrawal that kept failing
	// stops in CLOSE_FAILED with the action kept, for an operator's
	// retrigger; the binding stays where the withdrawal left it.
	withdrawDecl = engine.Declaration{
		OnError: engine.Failure{Step: domain.StepCloseFailed},
	}
)

// RegisterWithdrawStep registers the withdraw step (the upstream half of
// a requester's withdrawal) on e.
func RegisterWithdrawStep(e *engine.Engine, d Deps) {
	e.Register(flow.ActionWithdraw, engine.StepFunc{Decl: withdrawDecl, Fn: d.withdraw})
}

// applier applies approval decisions and deploy confirmations through the
// callbacks' own guards.
func (d Deps) applier() callbacks.Applier {
	return callbacks.Applier{Env: d.Env, Store: d.Store}
}

// single is the single-request steps over d, which batch MRs reuse.
func (d Deps) single() single.Steps {
	return single.Steps{Env: d.Env, Store: d.Store}
}

// batches is the batch path over d: a withdrawn member's batch is
// settled without it.
func (d Deps) batches() batch.Flow {
	return batch.Flow{Env: d.Env, Store: d.Store}
}
