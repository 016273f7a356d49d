package batch

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/gitlab"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flow"
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

// SettleBatch settles a RUNNING or BLOCKED batch: close its MR
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
func (d Flow) SettleBatch(ctx context.Context, batchID int64, code, message, actor string) (SettleResult, error) {
	return d.settleBatch(ctx, batchID, settleOpts{code: code, message: message, actor: actor})
}

// settleOpts says who settles and why.
type settleOpts struct {
	code, message, actor string
	// runningDriver: the running batch settles from its driver's step,
	// whose own lease is kept (the step finishes the run).
	runningDriver string
	// culprit, when set, is not re-admitted: it keeps the failure state
	// it shows (a single-request batch whose check pipeline failed).
	culprit string
	// only settles the batch only while it is in this status (the timeout
	// sweep: RUNNING — a BLOCKED batch waits for a person); 0: any active.
	only domain.BatchStatus
	// mergeSHA is the batch MR's merge commit when it read merged,
	// recorded on the batch row with the members' move to MERGED.
	mergeSHA string
}

// settleBatch reads the batch and settles it (settleCore), reading again
// and retrying when a member moved meanwhile.
func (d Flow) settleBatch(ctx context.Context, batchID int64, o settleOpts) (SettleResult, error) {
	b, err := d.Store.BatchGet(ctx, batchID)
	if err != nil {
		return SettleResult{}, err
	}
	// A member that moved between the read and the write (the driver's
	// poll) pre-empts the whole transaction: read again and retry.
	for attempt := 1; ; attempt++ {
		if !b.Status.Active() || (o.only != 0 && b.Status != o.only) {
			return SettleResult{BatchID: b.ID, Status: b.Status.String(), AlreadySettled: true}, nil
		}
		res, err := d.settleCore(ctx, b, o)
		if err == nil || !errors.Is(err, domain.ErrPreempted) || attempt == 3 {
			return res, err
		}
		if b, err = d.Store.BatchGet(ctx, batchID); err != nil {
			return SettleResult{}, err
		}
	}
}

// settleCore closes and re-reads the batch MR, then writes the whole
// settlement in ONE transaction (store.BatchApply): the batch's guarded
// write first, then every member's move and re-admission. There is no
// point between a settled batch and its members' move where a crash could
// strand them; a crash after the remote close leaves the batch as it was,
// and the next settlement (the step's retry, the sweep, an operator) finds
// the MR closed and settles it.
func (d Flow) settleCore(ctx context.Context, b store.Batch, o settleOpts) (SettleResult, error) {
	merged, sha, err := d.closeAndRead(ctx, b)
	if err != nil {
		return SettleResult{BatchID: b.ID}, err
	}
	o.mergeSHA = sha
	states, err := d.Store.BatchMemberStates(ctx, b.ID)
	if err != nil {
		return SettleResult{BatchID: b.ID}, err
	}
	p, res, err := planSettlement(b, states, merged, o)
	if err != nil {
		return res, err
	}
	if _, err := d.Store.BatchApply(ctx, p); err != nil {
		if errors.Is(err, domain.ErrPreempted) {
			now, gerr := d.Store.BatchGet(ctx, b.ID)
			if gerr == nil && !now.Status.Active() {
				return SettleResult{BatchID: b.ID, Status: now.Status.String(), AlreadySettled: true}, nil
			}
		}
		return res, err
	}
	d.RoundNow(b.ProjectID) // the slot is free; re-admitted members wait
	if merged {
		d.validateMembersIfDeployed(ctx, b)
	}
	return res, nil
}

// planSettlement decides batch b's settlement from its members' states
// as read and whether its MR is merged: the one transaction (guarded on
// the batch's status and version) and the answer it gives once applied.
//
//   - merged: SUCCEEDED, every member still on the path moved to MERGED;
//   - otherwise: FAILED with o's code and message, every member but the
//     culprit moved back to CREATE_ADMITTED and re-admitted to the
//     waiting set; the culprit, if any, parked where a retrigger opens a
//     single-request MR for it.
//
// Every member's scheduled action but the running driver's is cleared;
// members leaving the batch (a withdrawal) are neither moved nor
// unscheduled — their withdrawal does that.
func planSettlement(b store.Batch, states []store.BatchMemberState, merged bool, o settleOpts) (store.BatchApplyParams, SettleResult, error) {
	res := SettleResult{BatchID: b.ID}
	var unschedule []string
	for _, m := range states {
		if m.OperationID != o.runningDriver && m.NextAction != "" && !leaving(m) {
			unschedule = append(unschedule, m.OperationID)
		}
	}
	p := store.BatchApplyParams{BatchID: b.ID, Unschedule: unschedule, From: b.Status, Version: b.Version}
	var err error
	if merged {
		res.Merged, res.Status = true, domain.BatchSucceeded.String()
		if p.Moves, err = planMoves(states, msMerged, func(m store.BatchMemberState) bool {
			return !leaving(m) && onThePath(m)
		}, o.actor, fmt.Sprintf("batch %d settled: MR !%d merged", b.ID, b.MRIID)); err != nil {
			return p, res, err
		}
		p.SettleTo, p.MergeSHA = domain.BatchSucceeded, o.mergeSHA
		return p, res, nil
	}
	res.Status = domain.BatchFailed.String()
	pick := func(m store.BatchMemberState) bool {
		return m.OperationID != o.culprit && !leaving(m) && onThePath(m)
	}
	if p.Moves, err = planMoves(states, msAdmitted, pick, o.actor,
		fmt.Sprintf("batch %d failed (%s): back to the waiting set", b.ID, o.code)); err != nil {
		return p, res, err
	}
	for _, m := range states {
		if pick(m) {
			p.Readmit = append(p.Readmit, m.OperationID)
		}
	}
	p.ProjectID = b.ProjectID
	if o.culprit != "" {
		// Stopped where an operator's retrigger opens a single-request
		// MR for it (after the file or the checks are fixed).
		p.Park = &store.BatchSchedule{OperationID: o.culprit, Action: flow.ActionCreateMR}
	}
	p.SettleTo, p.FailureCode, p.FailureMessage = domain.BatchFailed, o.code, o.message
	res.Readmitted = len(p.Readmit)
	return p, res, nil
}

// onThePath reports whether a settlement still moves m: it has a binding
// and is not past the merge (MERGED, or VALIDATED by its deploy).
func onThePath(m store.BatchMemberState) bool {
	return m.Binding != "" && m.Binding != domain.BindingMerged && m.Binding != domain.BindingValidated
}

// leaving reports whether m is being withdrawn or closed out of its batch
// (next action withdraw, the withdrawal's leaveBatch): no settlement, catch-up or
// finish moves it or clears its action — its withdrawal does, from the
// MR's state it reads (closed: CLOSED; merged: it follows the merge).
func leaving(m store.BatchMemberState) bool { return m.NextAction == flow.ActionWithdraw }

// closeAndRead closes the batch's MR if it is open and reads it again; it
// reports whether the MR is merged, and then its merge commit. No MR
// recorded → the MR of the batch's branch, if any (a round that died
// between CreateMR and recording it).
func (d Flow) closeAndRead(ctx context.Context, b store.Batch) (bool, string, error) {
	project := strconv.FormatInt(b.ProjectID, 10)
	iid := b.MRIID
	if iid == 0 {
		mr, found, err := d.GitLab.FindMRBySourceBranch(ctx, project, flow.BatchBranchName(b.ID), gitlab.StateAll)
		if err != nil {
			return false, "", fmt.Errorf("look up MR: %w", err)
		}
		if !found {
			return false, "", nil
		}
		iid = mr.IID
	}
	return d.closeAndReadMR(ctx, project, iid)
}

// closeAndReadMR closes MR iid if it is open and reads it again; it reports
// whether the MR is merged ("merged wins": a merge that won the race
// cannot be closed) and then its merge commit. An MR still open after the
// close is errMRWontClose.
func (d Flow) closeAndReadMR(ctx context.Context, project string, iid int64) (bool, string, error) {
	mr, err := d.GitLab.GetMR(ctx, project, iid)
	if err != nil {
		return false, "", fmt.Errorf("read MR !%d: %w", iid, err)
	}
	if mr.State == gitlab.MRStateOpened || mr.State == gitlab.MRStateLocked {
		_, closeErr := d.GitLab.CloseMR(ctx, project, iid)
		if closeErr != nil && flow.Transient(closeErr) {
			return false, "", fmt.Errorf("close MR !%d: %w", iid, closeErr)
		}
		// Whatever the close answered, the MR's state now decides: a merge
		// that won the race cannot be closed any more.
		if mr, err = d.GitLab.GetMR(ctx, project, iid); err != nil {
			return false, "", fmt.Errorf("re-read MR !%d: %w", iid, err)
		}
		if mr.State == gitlab.MRStateOpened || mr.State == gitlab.MRStateLocked {
			return false, "", fmt.Errorf("MR !%d is still %s after closing it (close answered: %v): %w",
				iid, mr.State, closeErr, errMRWontClose)
		}
	}
	if mr.State != gitlab.MRStateMerged {
		return false, "", nil
	}
	return true, mr.MergeCommitSHA, nil
}

// validateMembersIfDeployed validates the merged members when the deploy
// callback for the batch MR arrived before they were MERGED (I9: the
// success side effect only for a binding this call flipped).
func (d Flow) validateMembersIfDeployed(ctx context.Context, b store.Batch) {
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
	flipped := false
	for _, m := range states {
		if m.Binding != domain.BindingMerged {
			continue
		}
		ok, err := d.applier().MarkValidated(ctx, m.OperationID, "deploy-callback", "deploy callback arrived before MERGED")
		if err != nil {
			d.Log().Warn("validate batch member", "operation", m.OperationID, "err", err)
		}
		flipped = flipped || ok
	}
	if flipped {
		d.applier().DeployApplied(ctx, b.ProjectID, b.MRIID, "applied when changeflow wrote MERGED")
	}
}

// batchFinish is batch_finish, run by the driver once it saw the MR
// merged: every other member → MERGED and the batch → SUCCEEDED in one
// transaction (the batch's guarded write first), then the members the
// deploy callback already named are validated. Safe to re-run: members
// already MERGED are not moved, a settled batch is not written again.
func (d Flow) batchFinish(ctx context.Context, w engine.Work) (engine.Outcome, error) {
	b, err := d.Store.BatchGet(ctx, w.Operation.BatchID)
	if err != nil {
		return d.RetryOr(err, "read batch")
	}
	states, err := d.Store.BatchMemberStates(ctx, b.ID)
	if err != nil {
		return d.RetryOr(err, "read members")
	}
	driver := w.Operation.OperationID
	moves, err := planMoves(states, msMerged, func(m store.BatchMemberState) bool {
		return m.OperationID != driver && !leaving(m) && m.Binding != "" && m.Binding != domain.BindingMerged && m.Binding != domain.BindingValidated
	}, "batch-"+strconv.FormatInt(b.ID, 10), fmt.Sprintf("batch MR !%d merged", b.MRIID))
	if err != nil {
		return engine.Outcome{}, err
	}
	// The driver's row holds the merge commit its merge step read.
	p := store.BatchApplyParams{BatchID: b.ID, Moves: moves, MergeSHA: w.Operation.MergeSHA}
	if b.Status.Active() {
		p.SettleTo, p.From, p.Version = domain.BatchSucceeded, b.Status, b.Version
	}
	if len(moves) > 0 || p.SettleTo != 0 {
		if _, err := d.Store.BatchApply(ctx, p); err != nil {
			if errors.Is(err, domain.ErrPreempted) {
				return engine.RetryAfter(0, "batch moved meanwhile: "+err.Error()), nil
			}
			return d.RetryOr(err, "finish batch")
		}
		if p.SettleTo != 0 {
			d.RoundNow(b.ProjectID) // the slot is free for the next batch
		}
	}
	d.validateMembersIfDeployed(ctx, b)
	return engine.Done("", engine.Transition{Note: fmt.Sprintf("batch %d succeeded", b.ID)}), nil
}

// batchSettleStep is batch_settle: the driver stopped (a deterministic
// failure, a timeout, a closed MR) — settle the batch, or block it when no
// retry or re-admission can fix the cause (docs/flows/batch.md "Blocked
// batches"):
//
//   - HANDLE_APPROVE_FORBIDDEN: a bot may not approve; every next batch
//     would fail the same way;
//   - HANDLE_PIPELINE_FAILED: the batch's own checks passed, and the
//     pipeline of its head rebased onto the target branch failed: the
//     target branch, or how the batch's change meets what landed there,
//     needs a person — re-admitting would run every member into the same
//     wall one halving at a time and end each as a "culprit";
//   - CREATE_PIPELINE_FAILED of a batch of more than one member at
//     batch.maxSplitDepth: the halving bound is spent and the checks still
//     fail, so the failure is not narrowed to one change;
//   - a settlement whose MR will not close (errMRWontClose).
//
// Otherwise a check-pipeline failure settles FAILED with
// codePipelineFailed (the next round halves, culprit isolation), and a
// batch of one whose checks failed has found its culprit.
func (d Flow) batchSettleStep(ctx context.Context, w engine.Work) (engine.Outcome, error) {
	op := w.Operation
	step := domain.StepStatus(op.Step)
	reason := fmt.Sprintf("%s stopped at %s", op.OperationID, step)
	code, culprit := "BATCH_STEP_FAILED", ""
	switch step {
	case domain.StepHandleApproveForbidden:
		return d.batchBlock(ctx, op.BatchID, reason+": a bot may not approve the batch MR")
	case domain.StepHandlePipelineFailed:
		return d.batchBlock(ctx, op.BatchID, reason+": the pipeline of the batch rebased onto the target branch failed")
	case domain.StepCreatePipelineFailed:
		// The checks refused the batch's change: the next round claims
		// half of it (planRound). A batch of one has found its culprit: it
		// keeps the failure (CONTACT_MAINTAINERS) and is not re-admitted.
		code = codePipelineFailed
		members, err := d.Store.BatchMembers(ctx, op.BatchID)
		if err != nil {
			return d.RetryOr(err, "read members")
		}
		if len(members) == 1 {
			culprit = op.OperationID
			break
		}
		b, err := d.Store.BatchGet(ctx, op.BatchID)
		if err != nil {
			return d.RetryOr(err, "read batch")
		}
		if limit := d.Config().Batch().MaxSplitDepth; b.SplitDepth >= limit {
			return d.batchBlock(ctx, op.BatchID, fmt.Sprintf(
				"%s: the check pipeline of %d members still fails after %d halving(s) (batch.maxSplitDepth %d)",
				reason, len(members), b.SplitDepth, limit))
		}
	}
	res, err := d.settleBatch(ctx, op.BatchID, settleOpts{code: code, message: reason,
		actor: "batch-" + strconv.FormatInt(op.BatchID, 10), runningDriver: op.OperationID, culprit: culprit})
	if err != nil {
		if errors.Is(err, errMRWontClose) {
			return d.batchBlock(ctx, op.BatchID, reason+"; settling it: "+err.Error())
		}
		if flow.Transient(err) {
			return d.RetryLater(err, "settle: "+err.Error()), nil
		}
		return engine.Outcome{}, err
	}
	if culprit != "" && !res.AlreadySettled && !res.Merged {
		// The row stays in its failure state, stopped, next action
		// create_mr (parked by the settlement).
		return engine.Fail(step, domain.BindingCreateFailed, reason+"; the batch's culprit: not re-admitted"), nil
	}
	return engine.Done("", engine.Transition{Note: fmt.Sprintf("batch %d settled %s", res.BatchID, res.Status)}), nil
}

// ErrMRWontClose: the batch MR is still open after closing it (the close
// was refused: the bot lost its rights, the MR is locked). No retry fixes
// that, and the batch cannot be settled while its MR might still merge:
// the running batch is blocked for a person, and an operator's settlement
// answers it (close or merge the MR by hand, then settle again).
var ErrMRWontClose = errors.New("the batch MR does not close")

// errMRWontClose is the package's name for ErrMRWontClose.
var errMRWontClose = ErrMRWontClose

// codeNeedsAPerson is the code of a batch blocked on a failure no retry or
// re-admission can fix (a bot may not approve): every next batch would
// fail the same way.
const codeNeedsAPerson = "BATCH_NEEDS_A_PERSON"

// batchBlock moves a RUNNING batch to BLOCKED: it keeps the project's slot,
// so no further batch starts until a person fixed the cause and settled it
// (POST /ops/batches/{id}/settle: close, re-read, merged wins, members
// re-admitted). The driver keeps its failure state.
func (d Flow) batchBlock(ctx context.Context, batchID int64, reason string) (engine.Outcome, error) {
	if err := d.blockBatch(ctx, batchID, reason); err != nil {
		if errors.Is(err, domain.ErrPreempted) {
			return engine.RetryAfter(0, "batch moved meanwhile"), nil
		}
		return d.RetryOr(err, "block batch")
	}
	return engine.Done("", engine.Transition{Note: fmt.Sprintf("batch %d blocked: %s", batchID, reason)}), nil
}

// blockBatch moves the batch to BLOCKED (code BATCH_NEEDS_A_PERSON, the
// reason as its message) if it is RUNNING; a batch already blocked or
// settled is left as it is. domain.ErrPreempted: it moved meanwhile.
func (d Flow) blockBatch(ctx context.Context, batchID int64, reason string) error {
	b, err := d.Store.BatchGet(ctx, batchID)
	if err != nil {
		return err
	}
	if b.Status != domain.BatchRunning {
		return nil
	}
	if _, err := d.Store.BatchBlock(ctx, store.BatchBlockParams{ID: b.ID, Version: b.Version, Code: codeNeedsAPerson, Message: reason}); err != nil {
		return err
	}
	d.Log().Warn("batch blocked: it needs a person", "batch", b.ID, "project", b.ProjectID, "reason", reason)
	return nil
}
