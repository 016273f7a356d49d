package single

import (
	"context"
	"fmt"
	"strconv"

	"changeflow/internal/approval"
	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flow"
)

// submitApproval is submit_approval: the approval form for the request,
// looked up by operationId before it is submitted and again after a lost
// answer (approval.EnsureSubmitted), so there is never a second approval.
//
// The binding is APPROVAL_SENDING before the call (legacy: written here
// as progress; approve-first: written at submission) and APPROVAL_SENT
// after it. The decision's callback may arrive before SENT is written:
// the sink accepts SENDING as waiting, moves the request on and
// pre-empts this step's lease, so this step's own SENT write is then
// dropped (ErrPreempted) instead of moving the request back.
//
// The flow is decided by what the database holds: an operation with an
// MR is on the legacy flow and its form carries ext.mrId, which is how
// the callback tells the flows apart.
func (d Steps) submitApproval(ctx context.Context, w engine.Work) (engine.Outcome, error) {
	op := w.Operation
	if domain.StepStatus(op.Step) != domain.StepCreateApprovalSubmitting {
		if err := w.Progress(ctx, engine.Transition{Step: domain.StepCreateApprovalSubmitting, Binding: domain.BindingApprovalSending,
			Note: "submitting approval"}); err != nil {
			return engine.Outcome{}, err
		}
	}
	form := approval.Form{
		OperationID: op.OperationID,
		Requester:   op.Subject,
		Title:       fmt.Sprintf("Bind %s to %s", op.Subject, op.TargetKey),
		Fields: map[string]any{
			"targetKey": op.TargetKey, "subject": op.Subject, "reason": op.Reason, "days": op.Days,
		},
	}
	if op.MRIID != 0 {
		form.Ext.MRID = strconv.FormatInt(op.MRIID, 10)
		form.Fields["mrUrl"] = op.MRURL
	}
	if op.MRIID != 0 || op.Kind == domain.OperationRenew {
		// The end is fixed before the decision on the legacy flow (its MR
		// carries it) and for a renewal (from the grant's end); an
		// approve-first grant counts its days from the approval, so its
		// approver is shown the days alone.
		form.Fields["expiresAt"] = op.ExpiresAt.UTC().Format("2006-01-02T15:04:05Z")
	}
	a, err := approval.EnsureSubmitted(ctx, d.Approval, form)
	if err != nil {
		if approval.IsTransient(err) || approval.OutcomeUnknown(err) || approval.IsBreakerOpen(err) {
			return d.RetryLater(err, "submit approval: "+err.Error()), nil
		}
		return engine.Fail(domain.StepCreateApprovalFailed, domain.BindingCreateFailed, "submit approval: "+err.Error()), nil
	}
	// A decision already in the callback inbox (its sink call failed, or
	// the request was retriggered after a crash) is applied once SENT is
	// committed, instead of waiting for a callback that was delivered. A
	// callback that never comes is covered by poll_approval, which reads
	// the approval system while the request waits (first at once: the
	// decision may have been made already).
	return engine.Done(flow.ActionPollApproval, engine.Transition{Step: domain.StepCreateApprovalSubmitted, Binding: domain.BindingApprovalSent,
		Fields: store.WorkFields{ApprovalID: a.ApprovalID}, Note: "approval " + a.ApprovalID + " sent"}).
		OnFlip(d.applier().ApplyRecordedDecision), nil
}
