package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
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
// operation row to be applied: the recorded approval id and, legacy flow,
// the operation's MR. The recorded approval id is never overwritten: a
// callback naming another approval is refused, which is what keeps a
// decision for some other approval — or a forged one — from moving a
// request, and a later real decision from becoming stale.
type ApprovalBinding struct {
	// ApprovalID must equal operation.approval_id.
	ApprovalID string
	// Adopt allows an operation with no approval id recorded yet
	// (submit_approval has not had its answer) to take ApprovalID. Only
	// for an id the approval system itself named for this operation
	// (read back by operationId), never for a callback's bare claim.
	Adopt bool
	// MRIID must equal operation.mr_iid; 0 means the operation must have
	// no MR (approve-first: the approval comes before the MR).
	MRIID int64
}

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
	// A retrigger names the grant's status of the step it resumes; a
	// revocation shows its own (domain.OperationKind.Binding).
	// A renewal's rejection hands the row back to its grant (restore).
	restore := kind.EndsWithoutEffect(p.Binding)
	p.Binding = kind.Binding(p.Binding)
	// The waiting set is named in the grant's vocabulary: a renewal's
	// RENEWING is read as the grant status of its step (GrantView).
	waiting := slices.Contains(p.Waiting, b.Status) ||
		slices.Contains(p.Waiting, kind.GrantView(b.Status, domain.StepStatus(step)))
	if b.OperationID != p.OperationID || !waiting {
		return res, nil
	}
	adopt := false
	if a := p.Approval; a != nil {
		res.Refused, adopt = a.Check(approvalID.String, mrIID.Int64)
		if res.Refused != "" {
			return res, nil
		}
	}
	if err := domain.CheckStep(domain.StepStatus(step), domain.StepStatus(p.Step)); err != nil {
		return WorkCallbackResult{}, err
	}
	if b.Status != p.Binding {
		if err := domain.CheckBinding(b.Status, p.Binding); err != nil {
			return WorkCallbackResult{}, err
		}
		if err := bindingMove(ctx, tx, d, b, p.Binding, restore, grantOp); err != nil {
			return WorkCallbackResult{}, fmt.Errorf("move binding: %w", err)
		}
		res.Flip = &Flip{
			OperationID: p.OperationID, Subject: subject, TargetKey: target,
			From: b.Status, To: p.Binding, BindingVersion: b.Version + 1,
			FromStep: step, ToStep: p.Step, EndedWithoutEffect: restore,
		}
	}
	set := "step_status = ?"
	vals := []any{p.Step}
	if p.Step != step {
		set += ", version = version + 1"
	}
	if !p.ApprovedAt.IsZero() && kind == domain.OperationGrant && days.Valid && days.Int64 > 0 {
		// A row from before days were stored keeps its expiry: without
		// the days asked there is nothing to count from the approval.
		exp := domain.ApprovedExpiry(p.ApprovedAt, int(days.Int64), p.MaxDays)
		set += ", expires_at = ?"
		vals = append(vals, d.Time(exp))
		if err := approvalExpiryTx(ctx, tx, d, b, p, exp); err != nil {
			return WorkCallbackResult{}, err
		}
	}
	if adopt {
		// Guarded like the check above: only while still unrecorded.
		set += ", approval_id = ?"
		vals = append(vals, p.Approval.ApprovalID)
	}
	if p.NextAction == "" {
		set += ", next_action = NULL, due_at = NULL, attempts = 0, lease_owner = NULL, lease_expires_at = NULL"
	}
	vals = append(vals, p.OperationID)
	where := " WHERE operation_id = ?"
	if adopt {
		where += " AND (approval_id IS NULL OR approval_id = '')"
	}
	if err := execOne(ctx, tx,
		"UPDATE operation"+d.forceIndex("uk_operation_operation_id")+" SET "+set+where, vals...); err != nil {
		return WorkCallbackResult{}, fmt.Errorf("write step: %w", err)
	}
	if p.NextAction != "" {
		if err := s.WorkScheduleTx(ctx, tx, p.OperationID, p.NextAction, 0); err != nil {
			return WorkCallbackResult{}, err
		}
	}
	if p.AdmitProject != 0 {
		if _, err := s.BatchAdmitTx(ctx, tx, p.OperationID, p.AdmitProject); err != nil {
			return WorkCallbackResult{}, err
		}
	}
	hist := operationStepRow{operationID: p.OperationID, fromStep: step, toStep: p.Step, actor: p.Actor, note: p.Note}
	if res.Flip != nil {
		hist.fromBinding, hist.toBinding = res.Flip.From, res.Flip.To
	}
	if err := operationStepInsert(ctx, tx, []operationStepRow{hist}); err != nil {
		return WorkCallbackResult{}, err
	}
	res.Applied = true
	return res, nil
}

// approvalExpiryTx writes the expiry an approval fixed (exp) where it
// lives beside the operation: the grant's binding row, which the expiry
// scan reads once the grant is in effect, and one binding_history row —
// the history is append-only — so it says until when the approved access
// runs, not the provisional end the submission recorded.
func approvalExpiryTx(ctx context.Context, tx *sql.Tx, d Dialect, b Binding, p WorkCallbackParams, exp time.Time) error {
	if err := execOne(ctx, tx,
		"UPDATE binding "+d.PrimaryKeyHint()+" SET expires_at = ? WHERE id = ? AND operation_id = ?",
		d.Time(exp), b.ID, p.OperationID); err != nil {
		return fmt.Errorf("set the approved expiry: %w", err)
	}
	return bindingHistoryInsert(ctx, tx, d, BindingApplyParams{
		Subject: b.Subject, TargetKey: b.TargetKey, OperationID: p.OperationID, Status: p.Binding, ExpiresAt: exp,
	})
}

// Check compares the binding with an operation's recorded approval id and
// MR: it returns why it refuses ("" to apply) and whether the approval id
// is to be recorded (Adopt on an unrecorded one). WorkCallbackApply runs
// it under the row lock; the workflow runs it first, so a refused
// callback costs no read of the approval system.
func (a ApprovalBinding) Check(recordedID string, mrIID int64) (refused string, adopt bool) {
	switch {
	case a.ApprovalID == "":
		return "the callback names no approvalId", false
	case a.MRIID != mrIID && mrIID == 0:
		return fmt.Sprintf("ext.mrId %d given, but the request has no MR (approve-first flow)", a.MRIID), false
	case a.MRIID != mrIID && a.MRIID == 0:
		return fmt.Sprintf("no ext.mrId, but the request is on the legacy flow with MR !%d", mrIID), false
	case a.MRIID != mrIID:
		return fmt.Sprintf("ext.mrId %d is not this request's MR !%d", a.MRIID, mrIID), false
	case recordedID == "" && !a.Adopt:
		return "no approval id is recorded for this request yet", false
	case recordedID != "" && recordedID != a.ApprovalID:
		return fmt.Sprintf("approvalId %q is not the approval changeflow submitted for this request", clipRunes(a.ApprovalID, 64)), false
	}
	return "", recordedID == ""
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
