package workflow

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"changeflow/internal/domain"
	"changeflow/internal/gitlab"
	"changeflow/internal/store"
)

// SettleResult is what a settlement did.
type SettleResult struct {
	BatchID int64  `json:"batchId"`
	Status  string `json:"status"`
	// Merged: the MR read merged ("merged wins"); the members are MERGED.
	Merged bool `json:"merged"`
	// AlreadySettled: another path settled the batch first; nothing done.
	AlreadySettled bool `json:"alreadySettled"`
	// Readmitted is how many members went back to the waiting set.
	Readmitted int `json:"readmitted"`
}

// SettleBatch settles a RUNNING or BLOCKED batch (seed §3.7): close its MR
// if it is open, re-read it, and let merged win —
//
//   - merged → every member MERGED (checked moves from wherever it is),
//     the batch SUCCEEDED;
//   - closed, or no MR → the batch FAILED, its waiting-set rows deleted,
//     and every member not merged back at CREATE_ADMITTED / MR_CREATING and
//     admitted again for the next round (history and audit kept).
//
// Both are one transaction whose first statement is the batch's guarded
// write (state + version as read), so when two settlement paths race (the
// running batch, an operator, the sweep) one settles and the other gets
// AlreadySettled. Used by batch_settle, POST /ops/batches/{id}/settle and
// the round when it finds the batch MR closed.
func (d Deps) SettleBatch(ctx context.Context, batchID int64, code, message, actor string) (SettleResult, error) {
	return d.settleBatch(ctx, batchID, code, message, actor, "", "")
}

// settleBatch is SettleBatch from the running batch: runningDriver's own
// lease is kept (its step finishes the run), and culprit, when set, is
// not re-admitted — it keeps the failure state it shows.
func (d Deps) settleBatch(ctx context.Context, batchID int64, code, message, actor, runningDriver, culprit string) (SettleResult, error) {
	b, err := d.Store.BatchGet(ctx, batchID)
	if err != nil {
		return SettleResult{}, err
	}
	if !b.Status.Active() {
		return SettleResult{BatchID: b.ID, Status: b.Status.String(), AlreadySettled: true}, nil
	}
	// A member that moved between the read and the write (the driver's
	// poll) pre-empts the whole transaction: read again and retry.
	for attempt := 1; ; attempt++ {
		res, err := d.settleCore(ctx, b, code, message, actor, true, runningDriver, culprit)
		if err == nil || !errors.Is(err, domain.ErrPreempted) || attempt == 3 {
			return res, err
		}
		if b, err = d.Store.BatchGet(ctx, batchID); err != nil {
			return SettleResult{}, err
		}
		if !b.Status.Active() {
			return SettleResult{BatchID: b.ID, Status: b.Status.String(), AlreadySettled: true}, nil
		}
	}
}

// settleMembers is the members' half of a settlement of a batch another
// path (the timeout sweep) already moved to FAILED: close, re-read, and
// move the members as SettleBatch does, without writing the batch.
func (d Deps) settleMembers(ctx context.Context, b store.Batch, actor string, _ bool) (SettleResult, error) {
	return d.settleCore(ctx, b, "", "", actor, false, "", "")
}

func (d Deps) settleCore(ctx context.Context, b store.Batch, code, message, actor string, writeBatch bool, runningDriver, culprit string) (SettleResult, error) {
	res := SettleResult{BatchID: b.ID}
	merged, err := d.closeAndRead(ctx, b)
	if err != nil {
		return res, err
	}
	states, err := d.Store.BatchMemberStates(ctx, b.ID)
	if err != nil {
		return res, err
	}
	var unschedule []string
	for _, m := range states {
		if m.OperationID != runningDriver && m.NextAction != "" {
			unschedule = append(unschedule, m.OperationID)
		}
	}
	p := store.BatchApplyParams{BatchID: b.ID, Unschedule: unschedule}
	if writeBatch {
		p.From, p.Version = b.Status, b.Version
	}
	if merged {
		res.Merged, res.Status = true, domain.BatchSucceeded.String()
		if p.Moves, err = planMoves(states, msMerged, func(m store.BatchMemberState) bool {
			return m.Binding != "" && m.Binding != domain.BindingMerged && m.Binding != domain.BindingValidated
		}, actor, fmt.Sprintf("batch %d settled: MR !%d merged", b.ID, b.MRIID)); err != nil {
			return res, err
		}
		if writeBatch {
			p.SettleTo = domain.BatchSucceeded
		}
	} else {
		res.Status = domain.BatchFailed.String()
		pick := func(m store.BatchMemberState) bool {
			return m.OperationID != culprit && m.Binding != "" && m.Binding != domain.BindingMerged && m.Binding != domain.BindingValidated
		}
		if p.Moves, err = planMoves(states, msAdmitted, pick, actor,
			fmt.Sprintf("batch %d failed (%s): back to the waiting set", b.ID, code)); err != nil {
			return res, err
		}
		for _, m := range states {
			if pick(m) {
				p.Readmit = append(p.Readmit, m.OperationID)
			}
		}
		p.ProjectID = b.ProjectID
		if culprit != "" {
			// Stopped where an operator's retrigger opens a single-request
			// MR for it (after the file or the checks are fixed).
			p.Park = &store.BatchSchedule{OperationID: culprit, Action: ActionCreateMR}
		}
		if writeBatch {
			p.SettleTo, p.FailureCode, p.FailureMessage = domain.BatchFailed, code, message
		}
		res.Readmitted = len(p.Readmit)
	}
	if _, err := d.Store.BatchApply(ctx, p); err != nil {
		if errors.Is(err, domain.ErrPreempted) && writeBatch {
			now, gerr := d.Store.BatchGet(ctx, b.ID)
			if gerr == nil && !now.Status.Active() {
				return SettleResult{BatchID: b.ID, Status: now.Status.String(), AlreadySettled: true}, nil
			}
		}
		return res, err
	}
	if merged {
		d.validateMembersIfDeployed(ctx, b)
	}
	return res, nil
}

// closeAndRead closes the batch's MR if it is open and reads it again; it
// reports whether the MR is merged. No MR recorded → the MR of the batch's
// branch, if any (a round that died between CreateMR and recording it).
func (d Deps) closeAndRead(ctx context.Context, b store.Batch) (bool, error) {
	project := strconv.FormatInt(b.ProjectID, 10)
	iid := b.MRIID
	if iid == 0 {
		mr, found, err := d.GitLab.FindMRBySourceBranch(ctx, project, BatchBranchName(b.ID), gitlab.StateAll)
		if err != nil {
			return false, fmt.Errorf("look up MR: %w", err)
		}
		if !found {
			return false, nil
		}
		iid = mr.IID
	}
	mr, err := d.GitLab.GetMR(ctx, project, iid)
	if err != nil {
		return false, fmt.Errorf("read MR !%d: %w", iid, err)
	}
	if mr.State == gitlab.MRStateOpened || mr.State == gitlab.MRStateLocked {
		if _, err := d.GitLab.CloseMR(ctx, project, iid); err != nil && transient(err) {
			return false, fmt.Errorf("close MR !%d: %w", iid, err)
		}
		// Whatever the close answered, the MR's state now decides: a merge
		// that won the race cannot be closed any more.
		if mr, err = d.GitLab.GetMR(ctx, project, iid); err != nil {
			return false, fmt.Errorf("re-read MR !%d: %w", iid, err)
		}
		if mr.State == gitlab.MRStateOpened || mr.State == gitlab.MRStateLocked {
			return false, fmt.Errorf("MR !%d is still %s after closing it", iid, mr.State)
		}
	}
	return mr.State == gitlab.MRStateMerged, nil
}

// validateMembersIfDeployed validates the merged members when the deploy
// callback for the batch MR arrived before they were MERGED (I9: the
// success side effect only for a binding this call flipped).
func (d Deps) validateMembersIfDeployed(ctx context.Context, b store.Batch) {
	if b.MRIID == 0 {
		return
	}
	seen, err := d.Store.DeployCallbackSeen(ctx, b.ProjectID, b.MRIID)
	if err != nil || !seen {
		return
	}
	states, err := d.Store.BatchMemberStates(ctx, b.ID)
	if err != nil {
		return
	}
	for _, m := range states {
		if m.Binding != domain.BindingMerged {
			continue
		}
		if _, err := d.markValidated(ctx, m.OperationID, "deploy-callback", "deploy callback arrived before MERGED"); err != nil {
			d.logger().Warn("validate batch member", "operation", m.OperationID, "err", err)
		}
	}
}

// batchFinish is batch_finish, run by the driver once it saw the MR
// merged: every other member → MERGED and the batch → SUCCEEDED in one
// transaction (the batch's guarded write first), then the members the
// deploy callback already named are validated. Safe to re-run: members
// already MERGED are not moved, a settled batch is not written again.
func (d Deps) batchFinish(ctx context.Context, w Work) (Outcome, error) {
	b, err := d.Store.BatchGet(ctx, w.Operation.BatchID)
	if err != nil {
		return d.retryOr(err, "read batch")
	}
	states, err := d.Store.BatchMemberStates(ctx, b.ID)
	if err != nil {
		return d.retryOr(err, "read members")
	}
	driver := w.Operation.OperationID
	moves, err := planMoves(states, msMerged, func(m store.BatchMemberState) bool {
		return m.OperationID != driver && m.Binding != "" && m.Binding != domain.BindingMerged && m.Binding != domain.BindingValidated
	}, "batch-"+strconv.FormatInt(b.ID, 10), fmt.Sprintf("batch MR !%d merged", b.MRIID))
	if err != nil {
		return Outcome{}, err
	}
	p := store.BatchApplyParams{BatchID: b.ID, Moves: moves}
	if b.Status.Active() {
		p.SettleTo, p.From, p.Version = domain.BatchSucceeded, b.Status, b.Version
	}
	if len(moves) > 0 || p.SettleTo != 0 {
		if _, err := d.Store.BatchApply(ctx, p); err != nil {
			if errors.Is(err, domain.ErrPreempted) {
				return RetryAfter(0, "batch moved meanwhile: "+err.Error()), nil
			}
			return d.retryOr(err, "finish batch")
		}
	}
	d.validateMembersIfDeployed(ctx, b)
	return Done("", Transition{Note: fmt.Sprintf("batch %d succeeded", b.ID)}), nil
}

// batchSettleStep is batch_settle: the driver stopped (a deterministic
// failure, a timeout, a closed MR) — settle the batch.
func (d Deps) batchSettleStep(ctx context.Context, w Work) (Outcome, error) {
	op := w.Operation
	step := domain.StepStatus(op.Step)
	reason := fmt.Sprintf("%s stopped at %s", op.OperationID, step)
	code, culprit := "BATCH_STEP_FAILED", ""
	if step == domain.StepHandleApproveForbidden {
		return d.batchBlock(ctx, op.BatchID, reason)
	}
	if step == domain.StepCreatePipelineFailed || step == domain.StepHandlePipelineFailed {
		// The checks refused the batch's change: the next round halves
		// its size (roundSize). A batch of one has found its culprit: it
		// keeps the failure (CONTACT_MAINTAINERS) and is not re-admitted.
		code = codePipelineFailed
		members, err := d.Store.BatchMembers(ctx, op.BatchID)
		if err != nil {
			return d.retryOr(err, "read members")
		}
		if len(members) == 1 {
			culprit = op.OperationID
		}
	}
	res, err := d.settleBatch(ctx, op.BatchID, code, reason, "batch-"+strconv.FormatInt(op.BatchID, 10), op.OperationID, culprit)
	if err != nil {
		if transient(err) {
			return RetryAfter(d.retryDelay(), "settle: "+err.Error()), nil
		}
		return Outcome{}, err
	}
	if culprit != "" && !res.AlreadySettled && !res.Merged {
		// The row stays in its failure state, stopped, next action
		// create_mr (parked by the settlement).
		return Fail(step, domain.BindingCreateFailed, reason+"; the batch's culprit: not re-admitted"), nil
	}
	return Done("", Transition{Note: fmt.Sprintf("batch %d settled %s", res.BatchID, res.Status)}), nil
}

// codeNeedsAPerson is the code of a batch blocked on a failure no retry or
// re-admission can fix (a bot may not approve): every next batch would
// fail the same way.
const codeNeedsAPerson = "BATCH_NEEDS_A_PERSON"

// batchBlock moves a RUNNING batch to BLOCKED: it keeps the project's slot,
// so no further batch starts until a person fixed the cause and settled it
// (POST /ops/batches/{id}/settle: close, re-read, merged wins, members
// re-admitted). The driver keeps its failure state.
func (d Deps) batchBlock(ctx context.Context, batchID int64, reason string) (Outcome, error) {
	b, err := d.Store.BatchGet(ctx, batchID)
	if err != nil {
		return d.retryOr(err, "read batch")
	}
	if b.Status == domain.BatchRunning {
		_, err := d.Store.BatchBlock(ctx, store.BatchBlockParams{ID: b.ID, Version: b.Version, Code: codeNeedsAPerson, Message: reason})
		if errors.Is(err, domain.ErrPreempted) {
			return RetryAfter(0, "batch moved meanwhile"), nil
		}
		if err != nil {
			return d.retryOr(err, "block batch")
		}
	}
	return Done("", Transition{Note: fmt.Sprintf("batch %d blocked: %s", b.ID, reason)}), nil
}
