package withdraw

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"changeflow/internal/approval"
	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/gitlab"
	"changeflow/internal/store"
	"changeflow/internal/workflow/batch"
	"changeflow/internal/workflow/flow"
)

// A requester withdraws a request that has not taken effect
// (docs/flows/withdrawal.md, "Withdrawing a request"). The local state moves
// first, by store.OperationWithdraw's guarded write; whatever must be
// undone upstream is the withdraw action, a durable step like any other:
// a crash between the two leaves the action due and any instance runs it,
// a failing approval system or GitLab is retried by the engine, and a
// step of the request still running (a submit, create_mr, a pipeline
// poll) was pre-empted by the write and can no longer record anything.

// noneYet starts the reason of the withdraw action's one wait for an
// approval or MR it did not find: a submit_approval or create_mr that
// the withdrawal pre-empted may still be in its call and create it. The
// step reads it back from last_error on its next run (a clock-free "I
// have waited once"); any other retry reason in between only costs one
// more wait.
const noneYet = "nothing to withdraw found yet"

// withdraw is the withdraw action: load what it reads, plan what it does
// upstream (domain.PlanWithdrawAction, where the places are told apart),
// withdraw the approval, leave the batch, close the MR, and record the
// end.
//
// The same action is the upstream half of a renewal's cut-off
// (RENEW_EXPIRED, RENEW_REVOKED: docs/flows/lifecycle.md, "Renewal"): it keeps
// that step as the marker of why the renewal ended, rather than writing
// the requester's CLOSE_REQUESTER_WITHDRAWN, and such an end is not
// counted as a requester's withdrawal.
func (d Flow) withdraw(ctx context.Context, w engine.Work) (engine.Outcome, error) {
	op := w.Operation
	v, end := d.withdrawActionView(ctx, op)
	if end != nil {
		return end.Out, end.Err
	}
	plan := domain.PlanWithdrawAction(v)
	var notes []string
	if plan.WithdrawApproval {
		note, out, done := d.withdrawApproval(ctx, op, plan.ApprovalWaited)
		if done != nil {
			return done.Out, done.Err
		}
		if out != nil {
			return *out, nil
		}
		notes = append(notes, note)
	}
	if !plan.CloseMR {
		// The step does not change, so the engine writes no history row
		// for this outcome: the log keeps what happened upstream.
		note := strings.Join(notes, "; ")
		d.Log().Info("withdraw: done", "operation", op.OperationID, "upstream", note)
		return engine.Done("", engine.Transition{Step: plan.End, Note: note}), nil
	}
	if plan.LeaveBatch {
		if end := d.leaveBatch(ctx, op, plan.End); end != nil {
			return end.Out, end.Err
		}
	}
	mr, found, end := d.closeForWithdrawal(ctx, op, v.Waited)
	if end != nil {
		return end.Out, end.Err
	}
	return d.withdrawFinish(op, plan, mr, found, notes), nil
}

// withdrawActionView reads what the withdraw action is planned from: the
// operation, the binding it owns, and its step history when the plan
// needs it.
func (d Flow) withdrawActionView(ctx context.Context, op store.Operation) (domain.WithdrawActionView, *flow.StepEnd) {
	v := domain.WithdrawActionView{
		Kind: op.Kind, Step: domain.StepStatus(op.Step),
		InBatch: op.BatchID != 0, Legacy: op.Flow == flow.FlowLegacy, HasApproval: op.ApprovalID != "", HasMR: op.MRIID != 0,
		Waited: strings.HasPrefix(op.LastError, noneYet),
	}
	b, err := d.Store.BindingGetByOperation(ctx, op.OperationID)
	switch {
	case err == nil:
		v.Binding = b.Status
	case !errors.Is(err, domain.ErrNotFound):
		out, err := d.RetryOr(err, "read binding")
		return v, &flow.StepEnd{Out: out, Err: err}
	}
	if v.NeedsCloseHistory() {
		if v.Cancelled, err = d.reached(ctx, op.OperationID, domain.StepCloseCancelled); err != nil {
			out, err := d.RetryOr(err, "read step history")
			return v, &flow.StepEnd{Out: out, Err: err}
		}
	}
	if v.NeedsSubmitHistory() {
		if v.Asked, err = d.reached(ctx, op.OperationID, domain.StepCreateApprovalSubmitting); err != nil {
			out, err := d.RetryOr(err, "read step history")
			return v, &flow.StepEnd{Out: out, Err: err}
		}
	}
	return v, nil
}

// withdrawFinish is the withdraw action's outcome once it has looked for
// the request's MR and closed it (found false: there is none): End with
// the plan's binding and the notes of what happened upstream; merged
// wins in the MR place; an MR neither closed nor merged is read again
// later.
func (d Flow) withdrawFinish(op store.Operation, plan domain.WithdrawActionPlan, mr gitlab.MR, found bool, notes []string) engine.Outcome {
	// A renewal's CLOSED is mapped at the store edge: the row goes back to
	// the grant it renews, VALIDATED with the grant's expiry.
	t := engine.Transition{Step: plan.End, Binding: plan.Binding}
	switch {
	case !found:
		notes = append(notes, "no MR was opened")
	case mr.State == gitlab.MRStateClosed:
		notes = append(notes, fmt.Sprintf("MR !%d closed", mr.IID))
		if op.MRIID == 0 {
			t.Fields = store.WorkFields{MRIID: mr.IID, MRURL: mr.WebURL}
		}
	case mr.State == gitlab.MRStateMerged && plan.FollowMerge:
		// Merged wins: the change is on the default branch, so the request
		// follows its merge to MERGED and, with the deploy callback or
		// reconciliation, VALIDATED. The requester hears that it already
		// took effect.
		fields := store.WorkFields{MergeSHA: mr.MergeCommitSHA}
		if op.MRIID == 0 {
			fields.MRIID, fields.MRURL = mr.IID, mr.WebURL
		}
		return engine.Done("", engine.Transition{Step: domain.StepHandleMerged, Binding: domain.BindingMerged, Fields: fields,
			Note: fmt.Sprintf("withdrawal came too late: MR !%d was merged (%s); the request follows its merge", mr.IID, mr.MergeCommitSHA)}).
			OnFlip(d.applier().ValidateIfDeployed(d.ProjectID(op), mr.IID))
	case mr.State == gitlab.MRStateMerged:
		// Legacy flow, withdrawn while waiting for the approval: nothing of
		// changeflow's merges an MR before its approval, so a person did.
		return engine.Fail(domain.StepCloseFailed, "", fmt.Sprintf("MR !%d is merged although the request was withdrawn before its approval", mr.IID))
	default:
		return engine.RetryAfter(d.RetryWait(), fmt.Sprintf("MR !%d is %s", mr.IID, mr.State))
	}
	t.Note = strings.Join(notes, "; ")
	d.Log().Info("withdraw: done", "operation", op.OperationID, "upstream", t.Note)
	out := engine.Done("", t)
	if plan.Counted {
		out = out.OnFlip(d.withdrawnHook(store.WithdrawFromMR))
	}
	return out
}

// codeMemberWithdrawn is the failure code of a batch settled because one
// of its members was withdrawn by its owner or closed by an operator.
const codeMemberWithdrawn = "BATCH_MEMBER_WITHDRAWN"

// leaveBatch takes a withdrawn (or closed) member out of its batch before
// its MR — the batch's — is closed. A batch still active (BLOCKED when the
// guarded write took the withdrawal, store.OperationWithdraw) is settled
// without the member: its MR closed and read again, merged wins (the
// others MERGED; this member then finds the MR merged and follows it),
// else FAILED with the others back in the waiting set, so that the next
// round builds an MR without it. The member is this action's to finish:
// the settlement leaves a member whose next action is withdraw alone. An
// ended batch (the culprit of a failed check pipeline) needs nothing.
func (d Flow) leaveBatch(ctx context.Context, op store.Operation, endStep domain.StepStatus) *flow.StepEnd {
	b, err := d.Store.BatchGet(ctx, op.BatchID)
	if err != nil {
		out, err := d.RetryOr(err, "read batch")
		return &flow.StepEnd{Out: out, Err: err}
	}
	if !b.Status.Active() {
		return nil
	}
	why := "withdrawn by its owner"
	if endStep == domain.StepCloseCancelled {
		why = "closed by an operator"
	}
	_, err = d.batches().SettleBatch(ctx, b.ID, codeMemberWithdrawn,
		fmt.Sprintf("%s left the batch: %s", op.OperationID, why), "batch-"+strconv.FormatInt(b.ID, 10))
	switch {
	case err == nil:
		return nil
	case flow.Transient(err), errors.Is(err, batch.ErrMRWontClose), errors.Is(err, domain.ErrPreempted):
		// The MR may still merge, or GitLab did not answer: settle again
		// later; past the retries the withdrawal stops at CLOSE_FAILED for
		// a retrigger, its batch still waiting for a person.
		return &flow.StepEnd{Out: d.RetryLater(err, "settle the batch without this request: "+err.Error())}
	}
	return &flow.StepEnd{Err: fmt.Errorf("settle batch %d without this request: %w", b.ID, err)}
}

// reached says whether operationID's history has step.
func (d Flow) reached(ctx context.Context, operationID string, step domain.StepStatus) (bool, error) {
	hist, err := d.Store.OperationStepList(ctx, operationID)
	if err != nil {
		return false, err
	}
	for _, h := range hist {
		if domain.StepStatus(h.ToStep) == step {
			return true, nil
		}
	}
	return false, nil
}

// withdrawApproval withdraws op's approval upstream. It returns a note
// for the history when done, an outcome to return instead (the one wait
// for an approval not found yet), or a flow.StepEnd for a failure.
func (d Flow) withdrawApproval(ctx context.Context, op store.Operation, waited bool) (string, *engine.Outcome, *flow.StepEnd) {
	if d.Approval == nil {
		return "", nil, &flow.StepEnd{Err: errors.New("no approval system client configured")}
	}
	id := op.ApprovalID
	if id == "" {
		a, found, err := d.Approval.FindByOperationID(ctx, op.OperationID)
		switch {
		case err != nil:
			out, err := d.approvalRetryOr(err, "look up the approval")
			return "", nil, &flow.StepEnd{Out: out, Err: err}
		case found:
			id = a.ApprovalID
		case !waited:
			out := engine.RetryAfter(d.Config().Workflow().LeaseDuration, noneYet+": no approval for the request; looking once more after a submit cut off by the withdrawal has ended")
			return "", &out, nil
		default:
			return "no approval was submitted", nil, nil
		}
	}
	a, err := d.Approval.Withdraw(ctx, id, "withdrawn by the requester through changeflow")
	switch {
	case err == nil:
		return fmt.Sprintf("approval %s withdrawn (%s)", id, a.Status), nil, nil
	case approval.IsAlreadyDecided(err):
		// Decided before the withdrawal reached it: the request stays
		// withdrawn, and the decision's callback finds it no longer
		// waiting (recorded as stale).
		return fmt.Sprintf("approval %s was decided before the withdrawal reached it; the request stays withdrawn", id), nil, nil
	case approval.IsNotFound(err):
		return fmt.Sprintf("approval %s is unknown to the approval system", id), nil, nil
	}
	out, err := d.approvalRetryOr(err, "withdraw approval "+id)
	return "", nil, &flow.StepEnd{Out: out, Err: err}
}

// approvalRetryOr retries a transient approval-system failure (no answer,
// 429, 5xx, open breaker) and fails on anything else.
func (d Flow) approvalRetryOr(err error, what string) (engine.Outcome, error) {
	if approval.IsTransient(err) || approval.OutcomeUnknown(err) || approval.IsBreakerOpen(err) {
		return d.RetryLater(err, what+": "+err.Error()), nil
	}
	return engine.Outcome{}, fmt.Errorf("%s: %w", what, err)
}

// closeForWithdrawal finds op's MR (recorded, else by its deterministic
// branch: create_mr may have opened it without recording it before the
// withdrawal pre-empted it) and closes it unless closed or merged. found
// is false when there is none — after one wait, as for the approval.
func (d Flow) closeForWithdrawal(ctx context.Context, op store.Operation, waited bool) (gitlab.MR, bool, *flow.StepEnd) {
	project, err := d.Project(op)
	if err != nil {
		return gitlab.MR{}, false, &flow.StepEnd{Err: err}
	}
	iid := op.MRIID
	if iid == 0 {
		mr, ok, err := d.GitLab.FindMRBySourceBranch(ctx, project, flow.SingleBranch(op), gitlab.StateAll)
		switch {
		case err != nil:
			out, err := d.RetryOr(err, "look up the MR")
			return gitlab.MR{}, false, &flow.StepEnd{Out: out, Err: err}
		case !ok && !waited:
			return gitlab.MR{}, false, &flow.StepEnd{Out: engine.RetryAfter(d.Config().Workflow().LeaseDuration,
				noneYet+": no MR for the request; looking once more after a create_mr cut off by the withdrawal has ended")}
		case !ok:
			return gitlab.MR{}, false, nil
		}
		iid = mr.IID
	}
	mr, err := d.GitLab.GetMR(ctx, project, iid)
	if err != nil {
		out, err := d.RetryOr(err, "read MR")
		return gitlab.MR{}, false, &flow.StepEnd{Out: out, Err: err}
	}
	if mr.State == gitlab.MRStateOpened || mr.State == gitlab.MRStateLocked {
		if mr, err = d.GitLab.CloseMR(ctx, project, iid); err != nil {
			out, err := d.RetryOr(err, "close MR")
			return gitlab.MR{}, false, &flow.StepEnd{Out: out, Err: err}
		}
	}
	return mr, true, nil
}

// withdrawnHook counts a withdrawal once, after the commit that flipped
// its binding to CLOSED (a renewal's: back to its grant).
func (d Flow) withdrawnHook(place store.WithdrawPlace) engine.FlipHook {
	return func(ctx context.Context, f store.Flip) {
		if f.To == domain.BindingClosed || f.EndedWithoutEffect {
			d.ObserverOrNop().Withdrawn(ctx, place)
		}
	}
}

// Answer is what a withdrawal came to, for the HTTP answer.
type Answer struct {
	// Result is the guarded write's answer (store.OperationWithdraw).
	Result store.WithdrawResult
	// Operation and Binding are the request as it is after the call
	// (Binding is zero when a newer request owns the row).
	Operation store.Operation
	Binding   store.Binding
	// Merged: the MR was merged before it could be closed; the request
	// follows its merge ("merged wins") and the withdrawal did not happen.
	Merged bool
	// Pending: the upstream half is still due or running (retried).
	Pending bool
	// Stopped: the upstream half gave up (CLOSE_FAILED, the action kept
	// for an operator's retrigger).
	Stopped bool
}

// Withdrawer runs a requester's withdrawal (POST
// /api/requests/{operationId}/withdraw). Engine may be nil: the action is
// then left to the engines' pollers.
type Withdrawer struct {
	Flow   Flow
	Engine *engine.Engine
}

// Withdraw withdraws operationID for actor (the HTTP layer has checked
// that actor owns it). The guarded write decides (store.OperationWithdraw);
// then the upstream half runs: in the background for an approval (the
// request is CLOSED already, the answer does not depend on it), at once on
// this goroutine for an open MR, whose answer does ("merged wins" turns a
// withdrawal into "it already took effect"): the guarded write claims
// that action for this engine in its own transaction, so no poller takes
// it in between (Engine.RunClaimed). An unknown operation is an
// error wrapping domain.ErrNotFound.
func (wd Withdrawer) Withdraw(ctx context.Context, operationID, actor string) (Answer, error) {
	return wd.run(ctx, store.WithdrawParams{OperationID: operationID, Action: flow.ActionWithdraw, Actor: actor, Note: "withdrawn by the requester"})
}

// Close is an operator's close of a request stopped on a failure or in a
// pending step (POST /ops/requests/{operationId}/close): the same two
// halves as Withdraw, the MR place only, writing CLOSE_CANCELLED with the
// operator's reason in the step history (store.WithdrawParams.Cancel).
// "Merged wins" as for a withdrawal: the answer's Merged says so. Nothing
// counts it as a requester's withdrawal.
func (wd Withdrawer) Close(ctx context.Context, operationID, actor, reason string) (Answer, error) {
	return wd.run(ctx, store.WithdrawParams{OperationID: operationID, Action: flow.ActionWithdraw, Actor: actor,
		Note: "closed by an operator: " + reason, Cancel: true})
}

func (wd Withdrawer) run(ctx context.Context, p store.WithdrawParams) (Answer, error) {
	if wd.Engine != nil {
		if owner, lease, ok := wd.Engine.Claimant(); ok {
			p.ClaimOwner, p.ClaimLease = owner, lease
		}
	}
	res, err := wd.Flow.Store.OperationWithdraw(ctx, p)
	if err != nil {
		return Answer{}, err
	}
	wd.afterWrite(ctx, p, res)
	return wd.answer(ctx, p.OperationID, res)
}

// afterWrite runs what follows the guarded write's commit: a binding flip
// counted as a requester's withdrawal and, when it was one, a renewal's
// end; then the upstream half — the claimed action (MR place) at once on
// this goroutine, the approval's withdrawal handed to the pool.
func (wd Withdrawer) afterWrite(ctx context.Context, p store.WithdrawParams, res store.WithdrawResult) {
	if res.Outcome == store.WithdrawApplied && res.Flip != nil && !p.Cancel {
		wd.Flow.ObserverOrNop().Withdrawn(ctx, res.Place)
	}
	if res.Outcome == store.WithdrawApplied && res.Flip != nil {
		wd.Flow.RenewalFlipped(ctx, *res.Flip) // a renewal's end, when it was one
	}
	switch {
	case res.Claimed != nil:
		wd.Engine.RunClaimed(*res.Claimed)
	case wd.Engine != nil && res.Outcome == store.WithdrawApplied && res.Place == store.WithdrawFromApproval:
		if _, err := wd.Engine.Submit(ctx, p.OperationID); err != nil {
			wd.Flow.Log().Warn("withdraw: hand the approval withdrawal to the pool; left to the poller", "operation", p.OperationID, "err", err)
		}
	}
}

// answer reads operationID as it is after the call and says what the
// withdrawal came to.
func (wd Withdrawer) answer(ctx context.Context, operationID string, res store.WithdrawResult) (Answer, error) {
	st := wd.Flow.Store
	ans := Answer{Result: res}
	var err error
	if ans.Operation, err = st.OperationGet(ctx, operationID); err != nil {
		return Answer{}, err
	}
	b, err := st.BindingGetByOperation(ctx, operationID)
	switch {
	case err == nil:
		ans.Binding = b
	case !errors.Is(err, domain.ErrNotFound):
		return Answer{}, err
	}
	step := domain.StepStatus(ans.Operation.Step)
	// A renewal's binding shows RENEWING until it is in effect: read in
	// the grant's vocabulary, its merge is MERGED as a grant's.
	view := ans.Operation.Kind.GrantView(ans.Binding.Status, step)
	ans.Merged = (res.Outcome == store.WithdrawApplied || res.Outcome == store.WithdrawAlready) &&
		step != domain.StepCloseRequesterWithdrawn && step != domain.StepCloseCancelled && (view == domain.BindingMerged || view == domain.BindingValidated)
	ans.Pending = ans.Operation.NextAction == flow.ActionWithdraw && (!ans.Operation.DueAt.IsZero() || ans.Operation.LeaseOwner != "")
	ans.Stopped = ans.Operation.NextAction == flow.ActionWithdraw && !ans.Pending
	return ans, nil
}
