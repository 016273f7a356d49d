package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"changeflow/internal/domain"
)

// WorkFields are the operation's link columns a step may set with its
// outcome; zero values leave a column unchanged.
type WorkFields struct {
	BatchID    int64
	MRIID      int64
	MRURL      string
	Branch     string
	ApprovalID string
	// MergeSHA is the merge commit of the operation's MR, set with the
	// outcome that found it merged; the access period the request opens
	// names it (accessRecord).
	MergeSHA string
}

// WorkCompleteParams is the outcome of one step run, written under the
// lease that ran it.
type WorkCompleteParams struct {
	OperationID string
	Lease       Lease
	// Step is the step to write (checked against domain.CheckStep from
	// the stored step); 0 leaves the step alone.
	Step int
	// Binding is the binding status to write (checked against
	// domain.CheckBinding from the stored status; no write when already
	// there); "" leaves the binding alone.
	Binding domain.BindingStatus
	// UnlessStopped writes Step and Binding only when the stored step is
	// not already a failed or pending step: the safety net's declared
	// failure loses to a more specific state the step wrote itself.
	UnlessStopped bool
	// NextAction is the action to run next, due Delay after the DB clock;
	// "" with KeepAction false clears it (the request needs no more work).
	NextAction string
	Delay      time.Duration
	// Unattempted gives the claim's attempt back when the same action is
	// due again: the step made no call (its client's breaker refused it),
	// so the run must not count against the action's retry budget.
	Unattempted bool
	// KeepAction keeps next_action and clears due_at: the row stopped (a
	// failure) and remembers where, so a retrigger re-runs that action.
	KeepAction bool
	// KeepLease writes a progress state and keeps the lease (the step
	// goes on); the next-action fields are then ignored.
	KeepLease bool
	// LastError is stored (clipped to 512 characters); "" clears it.
	LastError string
	Fields    WorkFields
	Actor     string
	Note      string
}

// WorkResult is what WorkComplete wrote.
type WorkResult struct {
	// Operation is the row after the write.
	Operation Operation
	// FromStep is the step before; StepWritten says whether it changed.
	FromStep    int
	StepWritten bool
	// Flip is non-nil only when this call changed the binding's status
	// (I9: side effects after commit, only on a flip) — for a revocation,
	// also when its step crossed a grant milestone (see workCompleteTx).
	Flip *Flip
}

// WorkComplete records a step's outcome and its state transition in one
// transaction, in the lock order operation → binding:
//
//  1. lock the operation row WHERE lease_owner = owner#token — no row
//     means the lease was lost (expired and re-claimed, or pre-empted by a
//     callback's WorkSchedule): an error wrapping domain.ErrPreempted, and
//     nothing of this outcome is written;
//  2. check Step against the table from the stored step, and Binding from
//     the stored binding (which must still be owned by this operation);
//     an illegal move is an error wrapping domain.ErrIllegalTransition;
//  3. write the binding (guarded by id, status, version), the operation
//     (step, version, next action, due time from the DB clock, attempts,
//     lease, last error, link fields) and one step-history row.
func (s *Store) WorkComplete(ctx context.Context, p WorkCompleteParams) (WorkResult, error) {
	if p.OperationID == "" || p.Lease.Owner == "" || p.Lease.Token == "" {
		return WorkResult{}, errors.New("complete work: operationId and lease are required")
	}
	var res WorkResult
	err := s.InTx(ctx, nil, func(tx *sql.Tx) error {
		var err error
		res, err = workCompleteTx(ctx, tx, s.dialect, p)
		return err
	})
	if err != nil {
		return WorkResult{}, fmt.Errorf("complete work of %s: %w", p.OperationID, err)
	}
	return res, nil
}

func workCompleteTx(ctx context.Context, tx *sql.Tx, d Dialect, p WorkCompleteParams) (WorkResult, error) {
	var (
		id              int64
		subject, target string
		step            int
		nextAction      sql.NullString
		kind            domain.OperationKind
		grantOp         string
	)
	err := tx.QueryRowContext(ctx,
		"SELECT id, subject, target_key, step_status, next_action, "+kindOf("")+", COALESCE(grant_operation_id, '') FROM operation WHERE operation_id = ? AND lease_owner = ?"+d.forUpdate(),
		p.OperationID, p.Lease.column()).Scan(&id, &subject, &target, &step, &nextAction, &kind, &grantOp)
	if errors.Is(err, sql.ErrNoRows) {
		return WorkResult{}, fmt.Errorf("lease %s lost: %w", p.Lease.column(), domain.ErrPreempted)
	}
	if err != nil {
		return WorkResult{}, fmt.Errorf("lock operation: %w", translate(err))
	}
	outcome := p.outcome()
	state := domain.OutcomeState{Kind: kind, Step: domain.StepStatus(step), NextAction: nextAction.String}
	var b Binding
	if outcome.NeedsBinding(state.Step) {
		// Lock order operation → binding.
		b, err = bindingGet(ctx, tx, d, subject, target, d.forUpdate())
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return WorkResult{}, fmt.Errorf("lock binding: %w", translate(err))
		}
		state.Binding, state.BindingOwned = b.Status, err == nil && b.OperationID == p.OperationID
	}
	plan, err := domain.PlanOutcome(state, outcome)
	if err != nil {
		return WorkResult{}, fmt.Errorf("%s/%s at step %d: %w", subject, target, step, err)
	}
	if err := applyOutcome(ctx, tx, d, id, step, p, plan, b, grantOp); err != nil {
		return WorkResult{}, err
	}
	res := WorkResult{FromStep: step, StepWritten: plan.StepWritten}
	if f := plan.Flip; f != nil {
		res.Flip = &Flip{
			OperationID: p.OperationID, Subject: subject, TargetKey: target,
			From: f.From, To: f.To, BindingVersion: b.Version,
			FromStep: step, ToStep: int(plan.Step), EndedWithoutEffect: f.EndedWithoutEffect,
		}
		if f.Moved {
			res.Flip.BindingVersion++
		}
	}
	res.Operation, err = operationGet(ctx, tx, p.OperationID)
	if err != nil {
		return WorkResult{}, fmt.Errorf("re-read operation: %w", translate(err))
	}
	return res, nil
}

// outcome is the part of p that domain.PlanOutcome decides from.
func (p WorkCompleteParams) outcome() domain.StepOutcome {
	return domain.StepOutcome{
		Step: domain.StepStatus(p.Step), Binding: p.Binding, UnlessStopped: p.UnlessStopped,
		NextAction: p.NextAction, Unattempted: p.Unattempted, KeepAction: p.KeepAction, KeepLease: p.KeepLease,
	}
}

// applyOutcome writes plan for operation id (row id) under p's lease: the
// binding b read for it (guarded by status and version), the operation
// (guarded by the lease) and one step-history row when the plan has one.
func applyOutcome(ctx context.Context, tx *sql.Tx, d Dialect, id int64, fromStep int, p WorkCompleteParams, plan domain.OutcomePlan, b Binding, grantOp string) error {
	if plan.Move != "" {
		if err := bindingMove(ctx, tx, d, b, plan.Move, plan.Restore, grantOp); err != nil {
			return fmt.Errorf("move binding: %w", err)
		}
	}
	set := "step_status = ?, last_error = ?"
	vals := []any{int(plan.Step), nullString(clipRunes(p.LastError, 512))}
	if plan.StepWritten {
		set += ", version = version + 1"
	}
	if plan.ReleaseLease {
		set += ", lease_owner = NULL, lease_expires_at = NULL"
	}
	switch plan.Action {
	case domain.ActionStop:
		set += ", due_at = NULL"
	case domain.ActionClear:
		set += ", next_action = NULL, due_at = NULL, attempts = 0"
	case domain.ActionSet:
		// An event noted for this action while the step ran
		// (WorkExpedite) makes it due now: the step may have read the
		// state before the event.
		due, dueArg := d.NowAdd(p.Delay)
		set += ", next_action = ?, due_at = CASE WHEN expedite_action = ? THEN " + d.Now() + " ELSE " + due + " END"
		vals = append(vals, plan.NextAction, plan.NextAction, dueArg)
		switch plan.Attempts {
		case domain.AttemptsReset:
			set += ", attempts = 0"
		case domain.AttemptsGivenBack:
			set += ", attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END"
		}
	}
	if plan.ReleaseLease {
		set += ", expedite_action = NULL"
	}
	f := p.Fields
	for _, c := range []struct {
		col string
		set bool
		v   any
	}{
		{"batch_id", f.BatchID != 0, f.BatchID}, {"mr_iid", f.MRIID != 0, f.MRIID},
		{"mr_url", f.MRURL != "", clipRunes(f.MRURL, 512)}, {"branch", f.Branch != "", clipRunes(f.Branch, 255)},
		{"approval_id", f.ApprovalID != "", clipRunes(f.ApprovalID, 128)},
		{"merge_sha", f.MergeSHA != "", clipRunes(f.MergeSHA, 64)},
	} {
		if c.set {
			set += ", " + c.col + " = ?"
			vals = append(vals, c.v)
		}
	}
	vals = append(vals, id, p.Lease.column())
	if err := execOne(ctx, tx,
		"UPDATE operation "+d.PrimaryKeyHint()+" SET "+set+" WHERE id = ? AND lease_owner = ?", vals...); err != nil {
		return fmt.Errorf("write outcome: %w", err)
	}
	if !plan.HistoryRow() {
		return nil
	}
	var fromBinding, toBinding domain.BindingStatus
	if plan.Move != "" {
		fromBinding = b.Status
	}
	if plan.Flip != nil {
		toBinding = plan.Flip.To
	}
	return operationStepInsert(ctx, tx, d, []operationStepRow{{
		operationID: p.OperationID, fromStep: fromStep, toStep: int(plan.Step),
		fromBinding: fromBinding, toBinding: toBinding, actor: p.Actor, note: p.Note,
	}})
}

// bindingMove writes binding b's status to, guarded on the status and
// version read. With restore (a renewal ending without effect,
// domain.OperationKind.EndsWithoutEffect) the row also goes back to the
// grant it renews, grant: VALIDATED, owned by the grant again, its expiry
// never touched — exactly the access in effect before the renewal.
func bindingMove(ctx context.Context, tx *sql.Tx, d Dialect, b Binding, to domain.BindingStatus, restore bool, grant string) error {
	if restore {
		if grant == "" {
			return fmt.Errorf("renewal owning %s/%s names no grant to hand the row back to", b.Subject, b.TargetKey)
		}
		return execOne(ctx, tx,
			"UPDATE binding "+d.PrimaryKeyHint()+" SET status = ?, operation_id = ?, version = version + 1 WHERE id = ? AND status = ? AND version = ?",
			string(to), grant, b.ID, string(b.Status), b.Version)
	}
	return execOne(ctx, tx,
		"UPDATE binding "+d.PrimaryKeyHint()+" SET status = ?, version = version + 1 WHERE id = ? AND status = ? AND version = ?",
		string(to), b.ID, string(b.Status), b.Version)
}

// WorkReject persists the worker pool's refusal of a claimed operation:
// the step's declared rejection state is written
// through the same checked transition as any outcome, next_action is kept
// (a retrigger resumes it) and the row is no longer due, so a poller sees
// "failed", never "processing".
func (s *Store) WorkReject(ctx context.Context, opID string, l Lease, step int, binding domain.BindingStatus, reason, actor string) (WorkResult, error) {
	return s.WorkComplete(ctx, WorkCompleteParams{
		OperationID: opID, Lease: l, Step: step, Binding: binding, KeepAction: true,
		LastError: reason, Actor: actor, Note: "worker pool full: " + reason,
	})
}
