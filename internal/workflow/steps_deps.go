package workflow

import (
	"context"

	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/store"
	"changeflow/internal/workflow/callbacks"
	"changeflow/internal/workflow/flow"
)

// Deps is what the single-request steps and the flows still in this
// package need: the shared Env and the store.
type Deps struct {
	flow.Env
	Store *store.Store
}

// Declarations of the business steps: the state the safety net
// leaves on an error or panic, and on a pool refusal.
var (
	createDecl = engine.Declaration{
		OnError:  engine.Failure{Step: domain.StepCreateFailed, Binding: domain.BindingCreateFailed},
		OnReject: engine.Failure{Step: domain.StepCreatePoolRejected, Binding: domain.BindingCreateFailed},
	}
	approvalDecl = engine.Declaration{
		OnError:  engine.Failure{Step: domain.StepCreateApprovalFailed, Binding: domain.BindingCreateFailed},
		OnReject: engine.Failure{Step: domain.StepCreatePoolRejected, Binding: domain.BindingCreateFailed},
	}
	approveDecl = engine.Declaration{
		OnError:  engine.Failure{Step: domain.StepHandleApproveFailed, Binding: domain.BindingHandleFailed},
		OnReject: engine.Failure{Step: domain.StepHandlePoolRejected, Binding: domain.BindingHandleFailed},
	}
	mergeDecl = engine.Declaration{
		OnError:  engine.Failure{Step: domain.StepHandleMergeFailed, Binding: domain.BindingHandleFailed},
		OnReject: engine.Failure{Step: domain.StepHandlePoolRejected, Binding: domain.BindingHandleFailed},
	}
	closeDecl = engine.Declaration{
		OnError: engine.Failure{Step: domain.StepCloseFailed},
	}
	// withdrawDecl: the upstream half of a withdrawal that kept failing
	// stops in CLOSE_FAILED with the action kept, for an operator's
	// retrigger; the binding stays where the withdrawal left it.
	withdrawDecl = engine.Declaration{
		OnError: engine.Failure{Step: domain.StepCloseFailed},
	}
)

// RegisterSteps registers every business step of the single-request MR
// lifecycle (both flows) on e.
func RegisterSteps(e *engine.Engine, d Deps) {
	e.Register(flow.ActionCreateMR, engine.StepFunc{Decl: createDecl, Fn: d.createMR})
	e.Register(flow.ActionPollPipeline, engine.StepFunc{Decl: createDecl, Fn: d.pollPipeline})
	e.Register(flow.ActionSubmitApproval, engine.StepFunc{Decl: approvalDecl, Fn: d.submitApproval})
	e.Register(flow.ActionPollApproval, engine.StepFunc{Decl: pollApprovalDecl, Fn: d.pollApproval})
	e.Register(flow.ActionApprove, engine.StepFunc{Decl: approveDecl, Fn: d.approve})
	e.Register(flow.ActionMerge, engine.StepFunc{Decl: mergeDecl, Fn: d.merge})
	e.Register(flow.ActionPollRebase, engine.StepFunc{Decl: mergeDecl, Fn: d.pollRebase})
	e.Register(flow.ActionCloseMR, engine.StepFunc{Decl: closeDecl, Fn: d.closeMR})
	e.Register(flow.ActionRegenerate, engine.StepFunc{Decl: mergeDecl, Fn: d.regenerate})
	e.Register(flow.ActionWithdraw, engine.StepFunc{Decl: withdrawDecl, Fn: d.withdraw})
	e.Register(flow.ActionRebuild, engine.StepFunc{Decl: mergeDecl, Fn: d.rebuild})
	// A step's own binding move that ends a renewal without effect (a
	// polled rejection, its MR closed, a withdrawal); a renewal taking
	// effect is never a step's own move but its confirmation's, counted
	// in flipped — so no move is counted twice.
	e.OnCommit(func(ctx context.Context, c engine.Committed) {
		if c.Flip != nil && c.Flip.EndedWithoutEffect {
			d.RenewalFlipped(ctx, *c.Flip)
		}
	})
}

// applier applies approval decisions and deploy confirmations through the
// callbacks' own guards.
func (d Deps) applier() callbacks.Applier {
	return callbacks.Applier{Env: d.Env, Store: d.Store}
}
