package workflow

import (
	"context"
	"errors"
	"fmt"

	"changeflow/internal/domain"
	"changeflow/internal/store"
)

// ErrNotStopped is Retrigger's refusal for a request that is not stopped:
// it is due, running, or finished.
var ErrNotStopped = errors.New("workflow: the request is not stopped")

// resume is the state a retrigger of an action writes before the action
// runs again: the state the action normally starts from, as the table's
// retrigger rows list (a failed or pending step → the action's start).
// close_mr keeps its state (CLOSE_FAILED may only become CLOSE_MR_CLOSED).
var resume = map[string]Failure{
	ActionCreateMR:       {Step: domain.StepCreateStarted, Binding: domain.BindingMRCreating},
	ActionPollPipeline:   {Step: domain.StepCreatePipelineRunning, Binding: domain.BindingMRCreating},
	ActionSubmitApproval: {Step: domain.StepCreateApprovalSubmitting, Binding: domain.BindingApprovalSending},
	ActionApprove:        {Step: domain.StepHandleStarted, Binding: domain.BindingMerging},
	ActionMerge:          {Step: domain.StepHandleApproved, Binding: domain.BindingMerging},
}

// resumeAs is the action a retrigger runs instead of the kept one: a
// stopped rebase poll resumes at merge, which reads the MR first (merged
// by hand → MERGED; a rebase still running → poll it) and asks for a
// fresh rebase when needed — polling again would only find the old
// rebase's merge_error.
var resumeAs = map[string]string{ActionPollRebase: ActionMerge}

// Retrigger re-runs a stopped request from where it stopped (the ops
// endpoint POST /ops/requests/{id}/retrigger): the action kept in
// next_action is made due now, and the row moves back to the state that
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
func Retrigger(ctx context.Context, st *store.Store, operationID, actor string) (string, error) {
	op, err := st.OperationGet(ctx, operationID)
	if err != nil {
		return "", err
	}
	if op.NextAction == "" || !op.DueAt.IsZero() || op.LeaseOwner != "" {
		return "", fmt.Errorf("retrigger %s (action %q): %w", operationID, op.NextAction, ErrNotStopped)
	}
	b, err := st.BindingGetByOperation(ctx, operationID)
	if err != nil {
		return "", fmt.Errorf("retrigger %s: %w", operationID, err)
	}
	action := op.NextAction
	if a, ok := resumeAs[action]; ok {
		action = a
	}
	to, ok := resume[action]
	if !ok {
		to = Failure{Step: domain.StepStatus(op.Step), Binding: b.Status}
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
