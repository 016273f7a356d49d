package callbacks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"changeflow/internal/approval"
	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flow"
)

// An approval callback carries only the shared callback token, so anyone
// holding that token could claim any decision for any request. Two layers
// keep a callback from granting what was not approved (docs/security.md,
// Callbacks):
//
//  1. binding: a decision applies only to the approval changeflow itself
//     recorded for the request (operation.approval_id, written by
//     submit_approval from the approval system's answer) and, on the
//     legacy flow, only with the request's own MR as ext.mrId. Anything
//     else is answered 2xx, recorded as REJECTED_BY_GUARD with the reason,
//     and never replayed; the recorded approval id is never overwritten.
//  2. read-back (approval.verifyDecisions, default on): the callback is a
//     wake-up, not the truth. The decision applied is the one the approval
//     system's API reports for the recorded approval; the callback's own
//     claim is never applied. A forged callback that passes the binding
//     therefore causes at most one read. When the read fails the decision
//     is VERIFY_FAILED, when it says PENDING it is UNCONFIRMED; either way
//     nothing is applied, the request keeps waiting, and the inbox replay
//     (every reconcile.interval, for decisions older than
//     reconcile.minAge) and poll_approval read again. A real decision is
//     thus delayed by a failing approval system, never lost and never
//     replaced by a callback's claim.
//
// A callback that arrives before submit_approval recorded the approval id
// (the approval system answered the submit late) is matched against the
// approval the system holds for the operationId when reading back;
// without read-back it waits in the inbox (RECORDED) and is applied once
// submit_approval records the id (its after-commit hook replays it).

// applyApprovalAs applies ev under both layers; actor goes to the step
// history. It returns the action it scheduled ("" for none).
func (d Applier) applyApprovalAs(ctx context.Context, ev ApprovalEvent, actor string) (Result, string, error) {
	op, err := d.Store.OperationGet(ctx, ev.OperationID)
	if errors.Is(err, domain.ErrNotFound) {
		d.noteDisposition(ctx, ev, store.InboxUnknownOperation, "no such request, or it has no binding")
		return Stale, "", nil
	}
	if err != nil {
		return 0, "", fmt.Errorf("approval callback for %s: %w", ev.OperationID, err)
	}
	bind := store.ApprovalBinding{ApprovalID: ev.ApprovalID}
	if m := strings.TrimSpace(ev.MRID); m != "" {
		n, perr := strconv.ParseInt(m, 10, 64)
		if perr != nil || n <= 0 {
			return d.refuseApproval(ctx, ev, fmt.Sprintf("ext.mrId %q is not an MR number", flow.Clip(m, 32)))
		}
		bind.MRIID = n
	}
	// The request must still wait for an approval before anything is
	// read: a stale callback costs no call to the approval system.
	if stale, err := d.approvalStale(ctx, op, ev); err != nil || stale {
		return Stale, "", err
	}
	unrecorded := op.ApprovalID == ""
	check := bind
	check.Adopt = unrecorded
	if refused, _ := check.Check(op.ApprovalID, op.MRIID); refused != "" {
		return d.refuseApproval(ctx, ev, refused)
	}
	decision, note, comment, by := strings.ToUpper(ev.Result), "", ev.Comment, ev.DecidedBy
	switch {
	case ev.verified:
		// Read from the approval system by poll_approval: its approval id
		// is the system's own for this operation.
		bind.Adopt = unrecorded
	case d.Config().Approval().VerifyDecisions:
		a, disp, why := d.readBackApproval(ctx, op, ev.ApprovalID)
		switch disp {
		case store.InboxRejectedByGuard:
			return d.refuseApproval(ctx, ev, why)
		case "":
		default:
			d.noteDisposition(ctx, ev, disp, why)
			d.Log().Info("approval callback not applied: its decision is not confirmed", "operation", op.OperationID,
				"delivery", ev.DeliveryKey, "disposition", disp, "why", why)
			return Deferred, "", nil
		}
		bind.Adopt = unrecorded
		if string(a.Status) != decision {
			note = fmt.Sprintf("; the approval system reports %s, the callback claimed %s", a.Status, flow.Clip(decision, 16))
		} else {
			note = "; confirmed by the approval system"
		}
		decision, comment, by = string(a.Status), a.Comment, a.DecidedBy
	case unrecorded:
		d.noteDisposition(ctx, ev, store.InboxRecorded, "no approval id recorded yet; applied once submit_approval records it")
		return Deferred, "", nil
	}
	// Who decided and their comment are kept in the decision's step note,
	// where the request page finds a rejection's reason and the audit
	// export carries both; a decision confirmed by reading the approval
	// system records the system's answer, not the callback's.
	return d.applyDecision(ctx, ev, op, decision, bind, actor, note+domain.DeciderNote(by)+domain.ApproverCommentNote(comment))
}

// readBackApproval reads the recorded approval (or, while none is
// recorded, the approval the system holds for the operationId) and says
// what it allows: "" with the decided approval to apply, or a disposition
// with the reason — REJECTED_BY_GUARD when the system says the callback's
// approval is not this request's, VERIFY_FAILED when the read failed,
// UNCONFIRMED when it is still pending.
func (d Applier) readBackApproval(ctx context.Context, op store.Operation, claimedID string) (approval.Approval, string, string) {
	if d.Approval == nil {
		return approval.Approval{}, store.InboxVerifyFailed, "no approval system client configured; read again later"
	}
	var (
		a   approval.Approval
		err error
	)
	if op.ApprovalID != "" {
		a, err = d.Approval.Get(ctx, op.ApprovalID)
	} else {
		var found bool
		a, found, err = d.Approval.FindByOperationID(ctx, op.OperationID)
		if err == nil && !found {
			return approval.Approval{}, store.InboxVerifyFailed, "the approval system holds no approval for this request yet; read again later"
		}
	}
	switch {
	case err != nil:
		return approval.Approval{}, store.InboxVerifyFailed, "reading the approval back failed (" + flow.Clip(err.Error(), 120) + "); read again later"
	case a.OperationID != op.OperationID:
		return approval.Approval{}, store.InboxRejectedByGuard, fmt.Sprintf("the approval system says approval %q is not this request's", flow.Clip(a.ApprovalID, 64))
	case a.ApprovalID != claimedID:
		return approval.Approval{}, store.InboxRejectedByGuard, fmt.Sprintf("approvalId %q is not the approval the approval system holds for this request", flow.Clip(claimedID, 64))
	case !a.Status.Decided():
		return approval.Approval{}, store.InboxUnconfirmed, "the approval system still reports approval " + flow.Clip(a.ApprovalID, 64) + " as " + flow.Clip(string(a.Status), 16) + "; nothing applied"
	}
	return a, "", ""
}

// approvalStale says whether op no longer waits for an approval (its
// binding was re-applied by a newer request, or moved on), noting the
// disposition when it does not.
func (d Applier) approvalStale(ctx context.Context, op store.Operation, ev ApprovalEvent) (bool, error) {
	b, err := d.Store.BindingGet(ctx, op.Subject, op.TargetKey)
	switch {
	case errors.Is(err, domain.ErrNotFound):
		d.noteDisposition(ctx, ev, store.InboxUnknownOperation, "no such request, or it has no binding")
		return true, nil
	case err != nil:
		return false, fmt.Errorf("approval callback for %s: %w", op.OperationID, err)
	case b.OperationID != op.OperationID:
		d.noteDisposition(ctx, ev, store.InboxStale, "the binding was re-applied for request "+b.OperationID)
		return true, nil
	case !slices.Contains(approvalWaiting, b.Status) && !(op.Kind == domain.OperationRenew &&
		slices.Contains(approvalWaiting, op.Kind.GrantView(b.Status, domain.StepStatus(op.Step)))):
		// A renewal's RENEWING is read as the grant status of its step.
		d.noteDisposition(ctx, ev, store.InboxStale, "the binding is "+string(b.Status)+", not waiting for an approval")
		return true, nil
	}
	return false, nil
}

// refuseApproval records ev as refused by the guard; it is answered like
// a stale callback (2xx IGNORED_STALE), so the sender stops retrying and
// learns nothing about which check refused it.
func (d Applier) refuseApproval(ctx context.Context, ev ApprovalEvent, reason string) (Result, string, error) {
	d.Log().Warn("approval callback refused by the guard", "operation", ev.OperationID, "delivery", ev.DeliveryKey, "reason", reason)
	d.noteDisposition(ctx, ev, store.InboxRejectedByGuard, reason)
	return Stale, "", nil
}

// applyDecision writes decision for op in one transaction
// (store.WorkCallbackApply), bound to bind under the row locks. The flow
// is the database's: an operation with an MR is on the legacy flow
// (bind checked that ext.mrId agrees), so approvals sent before a switch
// of workflow.approveFirst finish on the flow they began:
//
//   - APPROVED, legacy → HANDLE_STARTED, MERGING, approve;
//   - APPROVED, approve-first, target without batching → CREATE_STARTED,
//     MR_CREATING, create_mr; with batching → CREATE_ADMITTED,
//     MR_CREATING and admitted to the batch waiting set (store
//     BatchAdmitTx) for a batch round to claim;
//   - REJECTED / WITHDRAWN → CLOSE_REJECTED / CLOSE_WITHDRAWN, REJECTED;
//     legacy also schedules close_mr.
//
// An approve-first APPROVED also fixes the request's expiry: its days
// count from the approval (domain.ApprovedExpiry), written in the same
// transaction, before the MR that puts it into the file is built.
func (d Applier) applyDecision(ctx context.Context, ev ApprovalEvent, op store.Operation, decision string, bind store.ApprovalBinding, actor, note string) (Result, string, error) {
	legacy := op.MRIID != 0
	p := store.WorkCallbackParams{
		OperationID: ev.OperationID, Waiting: approvalWaiting, Approval: &bind,
		Actor: actor, Note: fmt.Sprintf("approval %s %s (delivery %s)%s", bind.ApprovalID, decision, ev.DeliveryKey, note),
	}
	switch decision {
	case "APPROVED":
		switch {
		case legacy:
			p.Step, p.Binding, p.NextAction = int(domain.StepHandleStarted), domain.BindingMerging, flow.ActionApprove
		case d.batching(op):
			p.Step, p.Binding, p.AdmitProject = int(domain.StepCreateAdmitted), domain.BindingMRCreating, d.ProjectID(op)
			if p.AdmitProject == 0 {
				return 0, "", fmt.Errorf("admit %s: no numeric project id", ev.OperationID)
			}
		default:
			p.Step, p.Binding, p.NextAction = int(domain.StepCreateStarted), domain.BindingMRCreating, flow.ActionCreateMR
		}
		if !legacy {
			// Approve-first: no MR carries the end date yet, so the days
			// count from now, the approval, rather than from the
			// submission (docs/flows/lifecycle.md, "When the access ends").
			p.ApprovedAt = d.CurrentTime()
			if t, ok := d.Config().Target(op.TargetKey); ok {
				p.MaxDays = t.MaxDays
			}
		}
	case "REJECTED", "WITHDRAWN":
		p.Step, p.Binding = int(domain.StepCloseRejected), domain.BindingRejected
		if decision == "WITHDRAWN" {
			p.Step = int(domain.StepCloseWithdrawn)
		}
		if legacy {
			p.NextAction = flow.ActionCloseMR
		}
	default:
		return 0, "", fmt.Errorf("approval callback for %s: unknown result %q", ev.OperationID, decision)
	}
	res, err := d.Store.WorkCallbackApply(ctx, p)
	if err != nil {
		if errors.Is(err, domain.ErrIllegalTransition) {
			d.noteDisposition(ctx, ev, store.InboxRejectedByGuard, err.Error())
		}
		return 0, "", err
	}
	switch {
	case res.Refused != "":
		return d.refuseApproval(ctx, ev, res.Refused)
	case !res.Applied:
		d.Log().Info("approval callback ignored as stale", "operation", ev.OperationID, "delivery", ev.DeliveryKey,
			"bindingOwner", res.Current.OperationID, "bindingStatus", res.Current.Status)
		switch {
		case res.Current.OperationID == "":
			d.noteDisposition(ctx, ev, store.InboxUnknownOperation, "no such request, or it has no binding")
		case res.Current.OperationID != ev.OperationID:
			d.noteDisposition(ctx, ev, store.InboxStale, "the binding was re-applied for request "+res.Current.OperationID)
		default:
			d.noteDisposition(ctx, ev, store.InboxStale, "the binding is "+string(res.Current.Status)+", not waiting for an approval")
		}
		return Stale, "", nil
	}
	d.noteDisposition(ctx, ev, store.InboxApplied, fmt.Sprintf("moved to %s / %s by %s%s", domain.StepStatus(p.Step), p.Binding, actor, note))
	if res.Flip != nil {
		d.RenewalFlipped(ctx, *res.Flip) // a renewal rejected: its end, once
	}
	if p.AdmitProject != 0 {
		d.RoundAfterAdmission(p.AdmitProject)
	}
	return Applied, p.NextAction, nil
}
