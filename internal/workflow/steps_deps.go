package workflow

import (
	"context"

	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/store"
)

// Flow names stored in operation.flow.
const (
	FlowLegacy       = "LEGACY"
	FlowApproveFirst = "APPROVE_FIRST"
)

// DefaultTargetBranch is the config repo's branch MRs go to when
// Env.TargetBranch is empty.
const DefaultTargetBranch = "main"

// Deps is what the single-request steps and the flows still in this
// package need: the shared Env and the store.
type Deps struct {
	Env
	Store *store.Store
}

// renewalFlipped reports the end of a renewal that flip f records, if it
// records one (domain.RenewalEndOf). Every committed binding move passes
// through exactly one caller of it — the engine's commit hook for a
// step's own move (RegisterSteps), flipped for a confirmation, the
// approval callback for a decision — so a renewal's end is counted once,
// by the transaction that moved it, and never by a retried step or a
// duplicate callback, which move nothing.
func (d Deps) renewalFlipped(ctx context.Context, f store.Flip) {
	if o := domain.RenewalEndOf(f.From, f.To, f.EndedWithoutEffect, domain.StepStatus(f.ToStep)); o != "" {
		d.ObserverOrNop().RenewalEnded(ctx, f.OperationID, o)
	}
}

// flipped tells the observer of f's success: Revoked for a removal
// confirmed, Validated for a grant in effect.
func (d Deps) flipped(ctx context.Context, f store.Flip) {
	if f.To == domain.BindingRevoked {
		d.ObserverOrNop().Revoked(ctx, f)
		return
	}
	// A renewal in effect is a grant in effect too: both are counted.
	d.renewalFlipped(ctx, f)
	d.ObserverOrNop().Validated(ctx, f)
}

// revokedHook is the after-commit hook of an outcome that writes REVOKED.
func (d Deps) revokedHook() engine.FlipHook {
	return func(ctx context.Context, f store.Flip) { d.flipped(ctx, f) }
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
	e.Register(ActionCreateMR, engine.StepFunc{Decl: createDecl, Fn: d.createMR})
	e.Register(ActionPollPipeline, engine.StepFunc{Decl: createDecl, Fn: d.pollPipeline})
	e.Register(ActionSubmitApproval, engine.StepFunc{Decl: approvalDecl, Fn: d.submitApproval})
	e.Register(ActionPollApproval, engine.StepFunc{Decl: pollApprovalDecl, Fn: d.pollApproval})
	e.Register(ActionApprove, engine.StepFunc{Decl: approveDecl, Fn: d.approve})
	e.Register(ActionMerge, engine.StepFunc{Decl: mergeDecl, Fn: d.merge})
	e.Register(ActionPollRebase, engine.StepFunc{Decl: mergeDecl, Fn: d.pollRebase})
	e.Register(ActionCloseMR, engine.StepFunc{Decl: closeDecl, Fn: d.closeMR})
	e.Register(ActionRegenerate, engine.StepFunc{Decl: mergeDecl, Fn: d.regenerate})
	e.Register(ActionWithdraw, engine.StepFunc{Decl: withdrawDecl, Fn: d.withdraw})
	e.Register(ActionRebuild, engine.StepFunc{Decl: mergeDecl, Fn: d.rebuild})
	// A step's own binding move that ends a renewal without effect (a
	// polled rejection, its MR closed, a withdrawal); a renewal taking
	// effect is never a step's own move but its confirmation's, counted
	// in flipped — so no move is counted twice.
	e.OnCommit(func(ctx context.Context, c engine.Committed) {
		if c.Flip != nil && c.Flip.EndedWithoutEffect {
			d.renewalFlipped(ctx, *c.Flip)
		}
	})
}
