package single

import (
	"context"
	"fmt"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/workflow/flow"
)

// Pipeline statuses as GitLab names them.
const (
	pipelineSuccess  = "success"
	pipelineFailed   = "failed"
	pipelineCanceled = "canceled"
	pipelineSkipped  = "skipped"
)

// PollPipeline is poll_pipeline: one look at the MR's head pipeline, in
// tiers (polling.pipeline.*) — passed, failed or timed out:
//
//   - success → legacy: submit_approval (CREATE_SUCCEEDED, MR_CREATED);
//     approve-first: approve (same state; approve moves it on);
//   - failed or canceled → CREATE_PIPELINE_FAILED, CREATE_FAILED: the same
//     MR would fail again, so the hint is CONTACT_MAINTAINERS;
//   - anything else → poll again, CREATE_PIPELINE_RUNNING; once the tier's
//     budget is spent → CREATE_PIPELINE_PENDING with the binding left as
//     it is: the outcome is unknown, not failed (KEEP_WAITING).
//
// It only reads, so it is safe to run any number of times.
func (d Steps) PollPipeline(ctx context.Context, w engine.Work) (engine.Outcome, error) {
	op := w.Operation
	_, mr, end := d.readMR(ctx, op)
	if end != nil {
		return end.Out, end.Err
	}
	status := ""
	if mr.HeadPipeline != nil {
		status = mr.HeadPipeline.Status
	}
	switch status {
	case pipelineSuccess, pipelineSkipped:
		next := flow.ActionSubmitApproval
		if op.Flow == flow.FlowApproveFirst {
			next = flow.ActionApprove
		}
		return engine.Done(next, engine.Transition{Step: domain.StepCreateSucceeded, Binding: domain.BindingMRCreated,
			Note: fmt.Sprintf("check pipeline of MR !%d passed", mr.IID)}), nil
	case pipelineFailed, pipelineCanceled:
		return engine.Fail(domain.StepCreatePipelineFailed, domain.BindingCreateFailed,
			fmt.Sprintf("check pipeline of MR !%d %s", mr.IID, status)), nil
	}
	return engine.PollAgain(engine.PollTier(d.Config().Polling(config.PollingPipeline)), w,
		engine.Transition{Step: domain.StepCreatePipelineRunning},
		engine.Failure{Step: domain.StepCreatePipelinePending},
		fmt.Sprintf("check pipeline of MR !%d did not finish in time (last status %q)", mr.IID, status)), nil
}
