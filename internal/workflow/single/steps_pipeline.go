package single

import (
	"context"
	"fmt"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/gitlab"
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
//   - no pipeline at all for the head after
//     gitlab.rateLimit.missedPipelineAfter of polling → create it
//     (missedPipeline) and poll again;
//   - anything else → poll again, CREATE_PIPELINE_RUNNING; once the tier's
//     budget is spent → CREATE_PIPELINE_PENDING with the binding left as
//     it is: the outcome is unknown, not failed (KEEP_WAITING).
//
// It only reads, so it is safe to run any number of times.
func (d Steps) PollPipeline(ctx context.Context, w engine.Work) (engine.Outcome, error) {
	op := w.Operation
	project, mr, end := d.readMR(ctx, op)
	if end != nil {
		return end.Out, end.Err
	}
	tier := engine.PollTier(d.Config().Polling(config.PollingPipeline))
	if mr.HeadPipeline == nil {
		if out, ok := d.missedPipeline(ctx, w, tier, project, mr, domain.StepCreatePipelineRunning); ok {
			return out, nil
		}
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
	return engine.PollAgain(tier, w,
		engine.Transition{Step: domain.StepCreatePipelineRunning},
		engine.Failure{Step: domain.StepCreatePipelinePending},
		fmt.Sprintf("check pipeline of MR !%d did not finish in time (last status %q)", mr.IID, status)), nil
}

// missedPipeline handles an MR head GitLab created no pipeline for — on
// gitlab.com a push over the project's pipeline rate lands without one,
// and nothing would ever start it, so the poll would wait out its whole
// budget and end pending. Once the poll has waited
// gitlab.rateLimit.missedPipelineAfter (longer than GitLab takes to create
// a pipeline after a push, so this never races GitLab's own), it creates
// the pipeline for the head and polls again. ok is false when it is too
// early, or when the creation was refused for good (the poll goes on as
// before and still ends in its pending state if nothing comes); a 429 or
// another transient failure is waited out (RetryLater). running is the
// step the creation writes.
func (d Steps) missedPipeline(ctx context.Context, w engine.Work, tier engine.PollTier, project string, mr gitlab.MR, running domain.StepStatus) (engine.Outcome, bool) {
	if engine.Waited(tier, w.Attempt) < d.Config().GitLabRateLimit().MissedPipelineAfter {
		return engine.Outcome{}, false
	}
	pl, err := d.GitLab.CreateMRPipeline(ctx, project, mr.IID)
	switch {
	case err == nil:
		wait, _ := engine.NextPoll(tier, w.Attempt)
		return engine.WaitUntil(w.Now.Add(wait), engine.Transition{Step: running,
			Note: fmt.Sprintf("GitLab created no pipeline for the head %s of MR !%d (its pipeline rate): created pipeline %d", flow.Short(mr.SHA), mr.IID, pl.ID)}), true
	case flow.Transient(err):
		return d.RetryLater(err, "create the missing pipeline: "+err.Error()), true
	}
	d.Log().Warn("creating the missing pipeline was refused", "mr", mr.IID, "err", err)
	return engine.Outcome{}, false
}
