package single

import (
	"context"
	"errors"
	"fmt"

	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/gitlab"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flow"
)

// ErrNotStopped is Retrigger's refusal for a request that is not stopped:
// it is due, running, or finished.
var ErrNotStopped = errors.New("workflow: the request is not stopped")

// resume is the state a retrigger of an action writes before the action
// runs again: the state the action normally starts from, as the table's
// retrigger rows list (a failed or pending step → the action's start).
// close_mr keeps its state (CLOSE_FAILED may only become CLOSE_MR_CLOSED).
var resume = map[string]engine.Failure{
	flow.ActionCreateMR:       {Step: domain.StepCreateStarted, Binding: domain.BindingMRCreating},
	flow.ActionPollPipeline:   {Step: domain.StepCreatePipelineRunning, Binding: domain.BindingMRCreating},
	flow.ActionSubmitApproval: {Step: domain.StepCreateApprovalSubmitting, Binding: domain.BindingApprovalSending},
	flow.ActionApprove:        {Step: domain.StepHandleStarted, Binding: domain.BindingMerging},
	flow.ActionMerge:          {Step: domain.StepHandleApproved, Binding: domain.BindingMerging},
	// The batch actions run the single-request steps on the driver, from
	// the same states.
	flow.ActionBatchPollPipeline: {Step: domain.StepCreatePipelineRunning, Binding: domain.BindingMRCreating},
	flow.ActionBatchApprove:      {Step: domain.StepHandleStarted, Binding: domain.BindingMerging},
	flow.ActionBatchMerge:        {Step: domain.StepHandleApproved, Binding: domain.BindingMerging},
	// poll_approval only runs while the request waits for its approval:
	// it keeps that state (the write is checked against the table, so a
	// row kept elsewhere is refused rather than moved).
	flow.ActionPollApproval: {Step: domain.StepCreateApprovalSubmitted, Binding: domain.BindingApprovalSent},
}

// waitingAction is the action a retrigger schedules for a row that keeps
// none, nothing due and no lease, while it waits in a state one step
// serves: a request waiting in CREATE_APPROVAL_SUBMITTED / APPROVAL_SENT
// from before poll_approval existed (submit_approval did not schedule it
// then) has no action, and only its callback — lost, perhaps — would move
// it; a retrigger polls its approval (a fresh budget), so a decision the
// approval system holds is applied through the callback's guard. Any
// other row without an action is finished or claimed by a batch:
// ErrNotStopped.
func waitingAction(step domain.StepStatus, binding domain.BindingStatus) (string, bool) {
	if step == domain.StepCreateApprovalSubmitted && binding == domain.BindingApprovalSent {
		return flow.ActionPollApproval, true
	}
	return "", false
}

// resumeAs is the action a retrigger runs instead of the kept one: a
// stopped rebase poll resumes at merge, which reads the MR first (merged
// by hand → MERGED; a rebase still running → poll it) and asks for a
// fresh rebase when needed — polling again would only find the old
// rebase's merge_error.
var resumeAs = map[string]string{flow.ActionPollRebase: flow.ActionMerge, flow.ActionBatchPollRebase: flow.ActionBatchMerge}

// Retrigger re-runs a stopped request from where it stopped (the ops
// endpoint POST /ops/requests/{id}/retrigger): the action kept in
// next_action (for a request waiting for its approval with none kept:
// poll_approval, waitingAction) is made due now, and the row moves back to the state that
// action starts from — in one transaction, checked against the table and
// guarded by the binding's owner and its current status
// (store.WorkCallbackApply). It is safe because every step reads remote
// state before it writes: a retriggered approve skips a bot that already
// approved, a retriggered merge finishes a merged MR as merged.
//
// It returns the action scheduled; ErrNotStopped when the row is due,
// running or finished; an error wrapping domain.ErrNotFound for an
// unknown operation, domain.ErrPreempted when another writer moved it
// meanwhile, domain.ErrIllegalTransition when the table has no way back.
//
// A member of an active batch (RUNNING or BLOCKED) is retriggered through
// its batch: retriggerBatch re-drives the batch's driver.
func Retrigger(ctx context.Context, st RetriggerStore, operationID, actor string) (string, error) {
	op, err := st.OperationGet(ctx, operationID)
	if err != nil {
		return "", err
	}
	if op.BatchID != 0 {
		b, err := st.BatchGet(ctx, op.BatchID)
		if err != nil {
			return "", fmt.Errorf("retrigger %s: %w", operationID, err)
		}
		if b.Status.Active() {
			return retriggerBatch(ctx, st, b, operationID, actor)
		}
	}
	if op.NextAction == "" {
		// Claimed by a batch that has no MR yet (its members are linked
		// with the MR): nothing to re-run; a blocked one is settled.
		if qp, err := st.BatchQueuePosition(ctx, operationID); err == nil && qp.BatchID != 0 {
			if b, err := st.BatchGet(ctx, qp.BatchID); err == nil && b.Status.Active() && b.MRIID == 0 {
				return "", fmt.Errorf("retrigger %s: claimed by batch %d (%s), which has no MR to drive; settle it (POST /ops/batches/%d/settle) so its members are admitted again: %w",
					operationID, b.ID, b.Status, b.ID, domain.ErrIllegalTransition)
			}
		}
	}
	return retriggerOne(ctx, st, op, actor)
}

// retriggerOne is Retrigger of a request on its own (no active batch).
func retriggerOne(ctx context.Context, st RetriggerStore, op store.Operation, actor string) (string, error) {
	operationID := op.OperationID
	notStopped := fmt.Errorf("retrigger %s (action %q, at %s): %w", operationID, op.NextAction, domain.StepStatus(op.Step), ErrNotStopped)
	if !op.DueAt.IsZero() || op.LeaseOwner != "" {
		return "", notStopped
	}
	b, err := st.BindingGetByOperation(ctx, operationID)
	if err != nil {
		if op.NextAction == "" && errors.Is(err, domain.ErrNotFound) {
			return "", notStopped // finished, and its binding re-applied by another operation
		}
		return "", fmt.Errorf("retrigger %s: %w", operationID, err)
	}
	action := op.NextAction
	if action == "" {
		bs := b.Status
		if op.Kind == domain.OperationRenew {
			// A renewal's RENEWING reads as the grant status of its step.
			bs = op.Kind.GrantView(b.Status, domain.StepStatus(op.Step))
		}
		a, ok := waitingAction(domain.StepStatus(op.Step), bs)
		if !ok {
			return "", notStopped
		}
		action = a
	}
	if a, ok := resumeAs[action]; ok {
		action = a
	}
	to, ok := resume[action]
	if !ok {
		to = engine.Failure{Step: domain.StepStatus(op.Step), Binding: b.Status}
	}
	res, err := st.WorkCallbackApply(ctx, store.WorkCallbackParams{
		OperationID: operationID, Waiting: []domain.BindingStatus{b.Status},
		Step: int(to.Step), Binding: to.Binding, NextAction: action,
		Actor: actor, Note: retriggerNote + action + " from " + domain.StepStatus(op.Step).String(),
	})
	if err != nil {
		return "", fmt.Errorf("retrigger %s: %w", operationID, err)
	}
	if !res.Applied {
		return "", fmt.Errorf("retrigger %s: the binding moved meanwhile: %w", operationID, domain.ErrPreempted)
	}
	return action, nil
}

// retriggerNote starts the step-history note of a retrigger; merge counts
// its rebases since the last one.
const retriggerNote = "retrigger "

// batchResumeAction is the batch action that re-runs what a batch's driver
// stopped at, when the driver keeps none (a blocked batch's driver: its
// batch_settle finished by blocking): the check pipeline is polled again
// (an operator re-ran it in GitLab), a refused approval asked again, and a
// failed merge, rebase or rebased pipeline answered by a fresh merge, which
// rebases again when needed.
func batchResumeAction(step domain.StepStatus) (string, bool) {
	switch step {
	case domain.StepCreateFailed, domain.StepCreatePipelineFailed, domain.StepCreatePipelinePending, domain.StepCreatePoolRejected:
		return flow.ActionBatchPollPipeline, true
	case domain.StepHandleApproveFailed, domain.StepHandleApproveForbidden:
		return flow.ActionBatchApprove, true
	case domain.StepHandlePipelineFailed, domain.StepHandlePipelinePending, domain.StepHandleRebaseConflict,
		domain.StepHandleRebasePending, domain.StepHandleMergeFailed, domain.StepHandleMergeUnknown, domain.StepHandlePoolRejected:
		return flow.ActionBatchMerge, true
	}
	return "", false
}

// retriggerBatch re-drives an active batch whose driver stopped, whichever
// member the operator named (docs/api.md, POST /ops/requests/{id}/retrigger):
//
//   - the driver (the batch's first member in claim order) must be stopped:
//     no lease, nothing due — else ErrNotStopped;
//   - the action: the one the driver keeps (the engine's safety net keeps
//     it), else the one its failure state came from (batchResumeAction);
//   - a BLOCKED batch is resumed first (store.BatchResume: RUNNING, block
//     reason cleared, batch.timeout restarted), so the resumed step does
//     not find it blocked and stop; then the driver's action is due from
//     its start state, as a single request's retrigger.
//
// A blocked batch without an MR (its round blocked it: a binding file that
// does not parse) has no step to re-run: it is settled instead (its
// members re-admitted, the next round builds it again) —
// domain.ErrIllegalTransition says so (Retrigger finds such members by
// their claimed waiting row, since they are linked only with the MR). If the driver's write fails after
// the resume, the batch is RUNNING with a stopped driver: retriggering
// again finishes it, and the timeout sweep settles it otherwise.
func retriggerBatch(ctx context.Context, st RetriggerStore, b store.Batch, named, actor string) (string, error) {
	members, err := st.BatchMembers(ctx, b.ID)
	if err != nil {
		return "", fmt.Errorf("retrigger %s (batch %d): %w", named, b.ID, err)
	}
	if len(members) == 0 {
		return "", fmt.Errorf("retrigger %s: batch %d has no members: %w", named, b.ID, domain.ErrNotFound)
	}
	driver, err := st.OperationGet(ctx, members[0].OperationID)
	if err != nil {
		return "", fmt.Errorf("retrigger %s (batch %d): %w", named, b.ID, err)
	}
	if !driver.DueAt.IsZero() || driver.LeaseOwner != "" {
		return "", fmt.Errorf("retrigger %s: batch %d's driver %s is due or running: %w", named, b.ID, driver.OperationID, ErrNotStopped)
	}
	if b.MRIID == 0 {
		return "", fmt.Errorf("retrigger %s: batch %d has no MR to drive; settle it (POST /ops/batches/%d/settle) so its members are admitted again: %w",
			named, b.ID, b.ID, domain.ErrIllegalTransition)
	}
	if driver.NextAction == "" {
		action, ok := batchResumeAction(domain.StepStatus(driver.Step))
		if !ok {
			return "", fmt.Errorf("retrigger %s: batch %d's driver %s stopped at %s, which no batch step resumes: %w",
				named, b.ID, driver.OperationID, domain.StepStatus(driver.Step), domain.ErrIllegalTransition)
		}
		driver.NextAction = action
	}
	if b.Status == domain.BatchBlocked {
		if _, err := st.BatchResume(ctx, b.ID, b.Version); err != nil {
			return "", fmt.Errorf("retrigger %s: %w", named, err)
		}
	}
	return retriggerOne(ctx, st, driver, actor)
}

// ErrPipelineNotRetried is RetryFailedPipeline's refusal: GitLab would not
// re-run the failed pipeline; the error's text says why, in words.
var ErrPipelineNotRetried = errors.New("workflow: the failed pipeline was not re-run")

// ErrPipelineRateLimited is RetryFailedPipeline's "later": GitLab's rate
// limit (or this instance's own pace) held the re-run back. Nothing was
// re-run and the request stays where it stopped; gitlab.RetryAfterOf on
// the error says how long GitLab asked to wait.
var ErrPipelineRateLimited = errors.New("workflow: GitLab's rate limit held the pipeline re-run back")

// RetryFailedPipeline re-runs, with GitLab's pipeline retry, the failed
// check pipeline of a single request stopped at CREATE_PIPELINE_FAILED or
// HANDLE_PIPELINE_FAILED, so that the retrigger which follows polls a
// pipeline that runs again rather than the same failed one. It returns
// the pipeline re-run, or ok false when there is nothing to re-run here
// (another step, a batch member, no MR, or the MR's newest pipeline no
// longer failed — someone re-ran it already). GitLab refusing the retry
// is an error wrapping ErrPipelineNotRetried; its rate limit, one
// wrapping ErrPipelineRateLimited.
func RetryFailedPipeline(ctx context.Context, d flow.Env, op store.Operation) (gitlab.Pipeline, bool, error) {
	st := domain.StepStatus(op.Step)
	if d.GitLab == nil || op.MRIID == 0 || op.BatchID != 0 ||
		st != domain.StepCreatePipelineFailed && st != domain.StepHandlePipelineFailed {
		return gitlab.Pipeline{}, false, nil
	}
	project, err := d.Project(op)
	if err != nil {
		return gitlab.Pipeline{}, false, err
	}
	pls, err := d.GitLab.ListMRPipelines(ctx, project, op.MRIID)
	if err != nil {
		return gitlab.Pipeline{}, false, fmt.Errorf("list the pipelines of MR !%d: %w", op.MRIID, err)
	}
	if len(pls) == 0 || pls[0].Status != pipelineFailed && pls[0].Status != pipelineCanceled {
		return gitlab.Pipeline{}, false, nil
	}
	pl, err := d.GitLab.RetryPipeline(ctx, project, pls[0].ID)
	if err != nil {
		var ge *gitlab.Error
		if gitlab.IsRateLimited(err) {
			// A 429 is a wait, never a refusal (docs/workflow.md, "GitLab's
			// limits"): the operator is told to come back, not that GitLab
			// will not run it.
			return gitlab.Pipeline{}, false, fmt.Errorf("re-run pipeline %d of MR !%d: %w: %w", pls[0].ID, op.MRIID, ErrPipelineRateLimited, err)
		}
		if errors.As(err, &ge) && ge.Status >= 400 && ge.Status < 500 {
			return gitlab.Pipeline{}, false, fmt.Errorf("GitLab refused to re-run pipeline %d of MR !%d (%d): %w", pls[0].ID, op.MRIID, ge.Status, ErrPipelineNotRetried)
		}
		return gitlab.Pipeline{}, false, fmt.Errorf("re-run pipeline %d of MR !%d: %w", pls[0].ID, op.MRIID, err)
	}
	return pl, true, nil
}
