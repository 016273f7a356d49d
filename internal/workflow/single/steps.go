package single

import (
	"context"

	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/gitlab"
	"changeflow/internal/store"
	"changeflow/internal/workflow/callbacks"
	"changeflow/internal/workflow/flow"
)

// Steps are the single-request MR lifecycle's steps (both flows) over
// the shared Env and the flow's store. A batch MR reuses the handling
// steps (Approve, Merge, PollRebase, PollPipeline) once it is open.
type Steps struct {
	flow.Env
	Store Store
}

// Declarations of the business steps: the state the safety net
// leaves on an error or panic, and on a pool refusal.
var (
	CreateDecl = engine.Declaration{
		OnError:  engine.Failure{Step: domain.StepCreateFailed, Binding: domain.BindingCreateFailed},
		OnReject: engine.Failure{Step: domain.StepCreatePoolRejected, Binding: domain.BindingCreateFailed},
	}
	approvalDecl = engine.Declaration{
		OnError:  engine.Failure{Step: domain.StepCreateApprovalFailed, Binding: domain.BindingCreateFailed},
		OnReject: engine.Failure{Step: domain.StepCreatePoolRejected, Binding: domain.BindingCreateFailed},
	}
	ApproveDecl = engine.Declaration{
		OnError:  engine.Failure{Step: domain.StepHandleApproveFailed, Binding: domain.BindingHandleFailed},
		OnReject: engine.Failure{Step: domain.StepHandlePoolRejected, Binding: domain.BindingHandleFailed},
	}
	MergeDecl = engine.Declaration{
		OnError:  engine.Failure{Step: domain.StepHandleMergeFailed, Binding: domain.BindingHandleFailed},
		OnReject: engine.Failure{Step: domain.StepHandlePoolRejected, Binding: domain.BindingHandleFailed},
	}
	closeDecl = engine.Declaration{
		OnError: engine.Failure{Step: domain.StepCloseFailed},
	}
)

// Register registers every business step of the single-request MR
// lifecycle (both flows) on e.
func Register(e *engine.Engine, d Steps) {
	e.Register(flow.ActionCreateMR, engine.StepFunc{Decl: CreateDecl, Fn: d.createMR})
	e.Register(flow.ActionPollPipeline, engine.StepFunc{Decl: CreateDecl, Fn: d.PollPipeline})
	e.Register(flow.ActionSubmitApproval, engine.StepFunc{Decl: approvalDecl, Fn: d.submitApproval})
	e.Register(flow.ActionPollApproval, engine.StepFunc{Decl: pollApprovalDecl, Fn: d.pollApproval})
	e.Register(flow.ActionApprove, engine.StepFunc{Decl: ApproveDecl, Fn: d.Approve})
	e.Register(flow.ActionMerge, engine.StepFunc{Decl: MergeDecl, Fn: d.Merge})
	e.Register(flow.ActionPollRebase, engine.StepFunc{Decl: MergeDecl, Fn: d.PollRebase})
	e.Register(flow.ActionCloseMR, engine.StepFunc{Decl: closeDecl, Fn: d.closeMR})
	e.Register(flow.ActionRegenerate, engine.StepFunc{Decl: MergeDecl, Fn: d.regenerate})
	e.Register(flow.ActionRebuild, engine.StepFunc{Decl: MergeDecl, Fn: d.rebuild})
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
func (d Steps) applier() callbacks.Applier {
	return callbacks.Applier{Env: d.Env, Store: d.Store}
}

// readMR reads op's MR on op's project: the first reads of a step that
// works on the request's MR. A project that cannot be named ends the step
// with the error (the safety net's declared state); a failed read ends it
// as RetryOr says.
func (d Steps) readMR(ctx context.Context, op store.Operation) (string, gitlab.MR, *flow.StepEnd) {
	project, err := d.Project(op)
	if err != nil {
		return "", gitlab.MR{}, &flow.StepEnd{Err: err}
	}
	mr, err := d.GitLab.GetMR(ctx, project, op.MRIID)
	if err != nil {
		out, err := d.RetryOr(err, "read MR")
		return "", gitlab.MR{}, &flow.StepEnd{Out: out, Err: err}
	}
	return project, mr, nil
}
