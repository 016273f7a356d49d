package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"changeflow/internal/domain"
)

// WorkCallbackParams is a callback's transition of the request it is for:
// the guard, the two-layer state to write and the work to
// schedule, all in one transaction.
type WorkCallbackParams struct {
	OperationID string
	// Waiting is the set of binding statuses the request must be in for
	// the callback to apply (the approval callback's {APPROVAL_SENDING,
	// APPROVAL_SENT}); anything else is stale.
	Waiting []domain.BindingStatus
	// Step and Binding are the state to write, each checked against the
	// central table (I7).
	Step    int
	Binding domain.BindingStatus
	// NextAction is scheduled due at once (WorkScheduleTx semantics: the
	// lease of a step still running, e.g. submit_approval overtaken by
	// its own callback, is pre-empted). "" stops the request's work: the
	// action, due time and lease are cleared.
	NextAction string
	// AdmitProject, when non-zero, admits the request to that project's
	// batch waiting set in the same transaction (approve-first, batching).
	AdmitProject int64
	// Approval, when non-nil, binds the callback to the approval
	// changeflow itself submitted (docs/security.md, Callbacks); checked under the operation's
	// row lock, after the staleness guard. nil (a retrigger) checks
	// nothing.
	Approval *ApprovalBinding
	// ApprovedAt, when non-zero, is an approve-first approval's time: a
	// grant's days count from it (domain.ApprovedExpiry, capped at
	// MaxDays, the target's longest access), not from the submission, so
	// days spent waiting for the approver are not lost. The operation's
	// and the binding's expiry are rewritten in this transaction, before
	// the MR that writes it into the file exists, and binding_history
	// gains a row with it. A renewal keeps its submission's expiry (see
	// domain.ApprovedExpiry); zero (legacy, a rejection, a retrigger)
	// leaves the expiry as it is.
	ApprovedAt time.Time
	MaxDays    int
	Actor      string
	Note       string
}

// ApprovalBinding is what an approval decision must match on the locked
// operation row to be applied (domain.ApprovalBinding).
type ApprovalBinding = domain.ApprovalBinding

// WorkCallbackResult is what WorkCallbackApply did.
type WorkCallbackResult struct {
	// Applied is false when the guard found the callback stale: the
	// binding is owned by another operation, or not in a waiting status,
	// or the operation does not exist. Nothing was written then.
	Applied bool
	// Flip is non-nil when this call changed the binding's status (I9).
	Flip *Flip
	// Current is the binding as found (zero when there is none).
	Current Binding
	// Refused is why the approval binding (WorkCallbackParams.Approval)
	// refused the callback; nothing was written then. "" otherwise.
	Refused string
}

// WorkCallbackApply applies a callback to its request in one transaction,
// in the lock order operation → binding:
//
//  1. lock the operation row; none → stale;
//  2. lock its binding; it must be owned by OperationID (a re-apply gave
//     the row a newer operationId: the callback is an old request's) and
//     be in Waiting — else stale, nothing written;
//  3. check Step and Binding against the table (illegal → an error
//     wrapping domain.ErrIllegalTransition, nothing written);
//  4. write the binding (guarded by status and version), the operation
//     (step, version, approval id, next action with its lease cleared)
//     and one step-history row; admit to the batch waiting set if asked.
//
// Of two deliveries racing for the same request the second waits on the
// row locks and then finds the binding out of the waiting set: stale.
func (s *Store) WorkCallbackApply(ctx context.Context, p WorkCallbackParams) (WorkCallbackResult, error) {
	switch {
	case p.OperationID == "" || len(p.Waiting) == 0:
		return WorkCallbackResult{}, errors.New("apply callback: operationId and a waiting set are required")
	case p.Step <= 0 || !p.Binding.Valid():
		return WorkCallbackResult{}, fmt.Errorf("apply callback: %d/%q is not a state", p.Step, p.Binding)
	}
	var res WorkCallbackResult
	err := s.InTx(ctx, nil, func(tx *sql.Tx) error {
		var err error
		res, err = s.workCallbackTx(ctx, tx, p)
		return err
	})
	if err != nil {
		return WorkCallbackResult{}, fmt.Errorf("apply callback to %s: %w", p.OperationID, err)
	}
	return res, nil
}

func (s *Store) workCallbackTx(ctx context.Context, tx *sql.Tx, p WorkCallbackParams) (WorkCallbackResult, error) {
	d := s.dialect
	var (
		subject, target string
		step            int
		approvalID      sql.NullString
		mrIID           sql.NullInt64
		kind            domain.OperationKind
		grantOp         string
		days            sql.NullInt64
	)
	err := tx.QueryRowContext(ctx,
		"SELECT subject, target_key, step_status, approval_id, mr_iid, "+kindOf("")+", COALESCE(grant_operation_id, ''), days FROM operation WHERE operation_id = ?"+d.forUpdate(),
		p.OperationID).Scan(&subject, &target, &step, &approvalID, &mrIID, &kind, &grantOp, &days)
	if errors.Is(err, sql.ErrNoRows) {
		return WorkCallbackResult{}, nil
	}
	if err != nil {
		return WorkCallbackResult{}, fmt.Errorf("lock operation: %w", translate(err))
	}
	b, err := bindingGet(ctx, tx, d, subject, target, d.forUpdate())
	if errors.Is(err, sql.ErrNoRows) {
		return WorkCallbackResult{}, nil
	}
	if err != nil {
		return WorkCallbackResult{}, fmt.Errorf("lock binding: %w", translate(err))
	}
	res := WorkCallbackResult{Current: b}
	plan, err := domain.PlanCallback(domain.CallbackState{
		Kind: kind, Step: domain.StepStatus(step), Binding: b.Status, BindingOwned: b.OperationID == p.OperationID,
		ApprovalID: approvalID.String, MRIID: mrIID.Int64, Days: int(days.Int64),
	}, p.callback())
	if err != nil {
		return WorkCallbackResult{}, err
	}
	if res.Refused = plan.Refused; !plan.Apply {
		return res, nil
	}
	if plan.Move != "" {
		if err := bindingMove(ctx, tx, d, b, plan.Move, plan.Restore, grantOp); err != nil {
			return WorkCallbackResult{}, fmt.Errorf("move binding: %w", err)
		}
		res.Flip = &Flip{
			OperationID: p.OperationID, Subject: subject, TargetKey: target,
			From: b.Status, To: plan.Move, BindingVersion: b.Version + 1,
			FromStep: step, ToStep: int(plan.Step), EndedWithoutEffect: plan.Restore,
		}
	}
	if err := s.callbackApply(ctx, tx, p, plan, b); err != nil {
		return WorkCallbackResult{}, err
	}
	hist := operationStepRow{operationID: p.OperationID, fromStep: step, toStep: int(plan.Step), actor: p.Actor, note: p.Note,
		approval: p.Approval != nil}
	if res.Flip != nil {
		hist.fromBinding, hist.toBinding = res.Flip.From, res.Flip.To
	}
	if err := operationStepInsert(ctx, tx, d, []operationStepRow{hist}); err != nil {
		return WorkCallbackResult{}, err
	}
	res.Applied = true
	return res, nil
}

// callback is the part of p that domain.PlanCallback decides from.
func (p WorkCallbackParams) callback() domain.Callback {
	return domain.Callback{
		Waiting: p.Waiting, Step: domain.StepStatus(p.Step), Binding: p.Binding,
		Approval: p.Approval, ApprovedAt: p.ApprovedAt, MaxDays: p.MaxDays,
	}
}

// callbackApply writes the operation's part of plan (step, the approved
// expiry with its binding's, the adopted approval id, the next action)
// and the admission to the batch waiting set p asks for.
func (s *Store) callbackApply(ctx context.Context, tx *sql.Tx, p WorkCallbackParams, plan domain.CallbackPlan, b Binding) error {
	d := s.dialect
	set := "step_status = ?"
	vals := []any{int(plan.Step)}
	if plan.StepWritten {
		set += ", version = version + 1"
	}
	if !plan.Expiry.IsZero() {
		set += ", expires_at = ?"
		vals = append(vals, d.Time(plan.Expiry))
		// The binding's status once this callback applies: the one the
		// plan moves it to, or the one it is already in.
		status := b.Status
		if plan.Move != "" {
			status = plan.Move
		}
		if err := approvalExpiryTx(ctx, tx, d, b, p.OperationID, status, plan.Expiry); err != nil {
			return err
		}
	}
	if plan.AdoptApproval {
		// Guarded like the check: only while still unrecorded.
		set += ", approval_id = ?"
		vals = append(vals, p.Approval.ApprovalID)
	}
	if p.NextAction == "" {
		set += ", next_action = NULL, due_at = NULL, attempts = 0, lease_owner = NULL, lease_expires_at = NULL"
	}
	vals = append(vals, p.OperationID)
	where := " WHERE operation_id = ?"
	if plan.AdoptApproval {
		where += " AND (approval_id IS NULL OR approval_id = '')"
	}
	if err := execOne(ctx, tx,
		"UPDATE operation"+d.forceIndex("uk_operation_operation_id")+" SET "+set+where, vals...); err != nil {
		return fmt.Errorf("write step: %w", err)
	}
	if p.NextAction != "" {
		if err := s.WorkScheduleTx(ctx, tx, p.OperationID, p.NextAction, 0); err != nil {
			return err
		}
	}
	if p.AdmitProject != 0 {
		if _, err := s.BatchAdmitTx(ctx, tx, p.OperationID, p.AdmitProject); err != nil {
			return err
		}
	}
	return nil
}

// approvalExpiryTx writes the expiry an approval fixed (exp) where it
// lives beside the operation: the grant's binding row, which the expiry
// scan reads once the grant is in effect, and one binding_history row —
// the history is append-only — so it says until when the approved access
// runs, not the provisional end the submission recorded.
func approvalExpiryTx(ctx context.Context, tx *sql.Tx, d Dialect, b Binding, operationID string, status domain.BindingStatus, exp time.Time) error {
	if err := execOne(ctx, tx,
		"UPDATE binding "+d.PrimaryKeyHint()+" SET expires_at = ? WHERE id = ? AND operation_id = ?",
		d.Time(exp), b.ID, operationID); err != nil {
		return fmt.Errorf("set the approved expiry: %w", err)
	}
	return bindingHistoryInsert(ctx, tx, d, BindingApplyParams{
		Subject: b.Subject, TargetKey: b.TargetKey, OperationID: operationID, Status: status, ExpiresAt: exp,
	})
}

// WorkExpedite makes operationID's pending action due now when it is
// still action: a webhook saying "the pipeline changed" speeds up a poll
// without resetting the attempts the polling tiers count. It reports
// whether the event took effect:
//
//   - the row waits (due later, not running): due now;
//   - a step of the row runs right now: the row is left alone — making it
//     due (WorkSchedule) would let two runs overlap — and the action is
//     noted (expedite_action). The running step may well have read the
//     state before the event, so when it schedules the same action again,
//     WorkComplete makes it due now instead of after its delay. Without
//     the note such an event was lost, and the request waited a whole
//     polling tier for what the webhook had already said
//     (TestWorkExpediteWhileRunningIsNotLost);
//   - anything else (another action, already due, no action): nothing.
func (s *Store) WorkExpedite(ctx context.Context, operationID, action string) (bool, error) {
	d := s.dialect
	running := "(lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL AND lease_expires_at > " + d.Now() + ")"
	// MariaDB assigns left to right; neither CASE reads a column assigned
	// before it.
	res, err := s.db.ExecContext(ctx,
		"UPDATE operation"+d.forceIndex("uk_operation_operation_id")+
			" SET due_at = CASE WHEN "+running+" THEN due_at ELSE "+d.Now()+" END,"+
			" expedite_action = CASE WHEN "+running+" THEN next_action ELSE expedite_action END"+
			" WHERE operation_id = ? AND next_action = ? AND ("+running+" OR due_at > "+d.Now()+")",
		operationID, action)
	if err != nil {
		return false, fmt.Errorf("expedite %s of %s: %w", action, operationID, translate(err))
	}
	n, err := res.RowsAffected()
	return n > 0, translate(err)
}
