package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"changeflow/internal/domain"
)

// WithdrawPlace is where a request waited when its requester withdrew it
// (domain.WithdrawPlace, where the places are documented); it is also the
// label of changeflow_requests_withdrawn_total.
type WithdrawPlace = domain.WithdrawPlace

// The places a request can be withdrawn from.
const (
	WithdrawFromApproval = domain.WithdrawFromApproval
	WithdrawFromBatchSet = domain.WithdrawFromBatchSet
	WithdrawFromMR       = domain.WithdrawFromMR
)

// WithdrawOutcome is what OperationWithdraw found and did
// (domain.WithdrawOutcome).
type WithdrawOutcome = domain.WithdrawOutcome

// The outcomes of OperationWithdraw. Only WithdrawApplied wrote anything.
const (
	WithdrawApplied = domain.WithdrawApplied
	WithdrawAlready = domain.WithdrawAlready
	WithdrawClaimed = domain.WithdrawClaimed
	WithdrawRefused = domain.WithdrawRefused
)

// WithdrawParams is one withdrawal.
type WithdrawParams struct {
	OperationID string
	// Action is the workflow action scheduled (due at once, pre-empting
	// any step still running under a lease) for the approval and MR
	// places: the upstream half of the withdrawal.
	Action string
	Actor  string
	Note   string
	// ClaimOwner, when set, claims the scheduled action for that engine
	// owner in the same transaction, under a lease of ClaimLease
	// (WorkClaimOne's write, without its "due" test), for the MR place:
	// the caller runs it at once and answers from its outcome, and no
	// poller of another instance can take it in between. Should the
	// caller die, the lease expires and any instance runs it.
	ClaimOwner string
	ClaimLease time.Duration
	// Cancel makes this an operator's close (POST
	// /ops/requests/{id}/close) rather than the requester's withdrawal:
	// the step written is CLOSE_CANCELLED, and only a request stopped on a
	// failure or in a pending step (domain.StepStatus.Stopped) in the MR
	// place is taken; anything else is WithdrawRefused. A repeat is
	// WithdrawAlready.
	Cancel bool
}

// WithdrawResult is what OperationWithdraw did.
type WithdrawResult struct {
	Outcome WithdrawOutcome
	Place   WithdrawPlace
	// Flip is non-nil when this call moved the binding (I9): the approval
	// and batch-set places.
	Flip *Flip
	// Binding is the binding as found, before any write (zero when the
	// operation has none any more).
	Binding Binding
	// View is Binding's status in the grant's vocabulary
	// (domain.OperationKind.GrantView): for a renewal, whose binding
	// shows RENEWING throughout, where the renewal itself stands
	// (APPROVAL_SENT, MR_CREATED, MERGING, …); for a grant, Binding's
	// status.
	View domain.BindingStatus
	// Step is the operation's step as found.
	Step int
	// BatchID is the claiming batch for WithdrawClaimed (0 when the claim
	// is known only from the waiting set's row), or the batch a member
	// withdrawn from the MR place leaves (BLOCKED, or ended).
	BatchID int64
	// Claimed is the action claimed for WithdrawParams.ClaimOwner (MR
	// place only), to run with the engine; nil otherwise.
	Claimed *WorkItem
}

// OperationWithdraw withdraws a request that has not taken effect, in one
// transaction, in the lock order operation → binding → waiting-set row.
// What it writes is decided by domain.Withdraw from what it read (every
// place, refusal and the operator's close are documented there); this
// loads that state and applies the plan:
//
//   - the operation and then its binding are locked (no operation: an
//     error wrapping domain.ErrNotFound); the step history and the batch
//     membership are read only when the decision needs them;
//   - the batch set is left by the guarded DELETE of its waiting row
//     "… WHERE operation_id = ? AND batch_id IS NULL". One row: out of the
//     set. No row: a round claimed it first — WithdrawClaimed. The claim
//     marks rows with "… SET batch_id = ? WHERE batch_id IS NULL" and
//     rolls back when it marks fewer than it read, so of a claim and a
//     withdrawal racing for one row exactly one wins, on either database:
//     both guards test the same column of the same row, and the row lock
//     (MariaDB) or the single writer (SQLite) orders them;
//   - the step is written guarded by the step read, the binding moved
//     guarded by its version, the withdraw action scheduled (pre-empting
//     any step still running under a lease), one step-history row.
//
// Every write is checked against the transition table (I7).
func (s *Store) OperationWithdraw(ctx context.Context, p WithdrawParams) (WithdrawResult, error) {
	if p.OperationID == "" || p.Action == "" {
		return WithdrawResult{}, errors.New("withdraw: operationId and action are required")
	}
	var res WithdrawResult
	err := s.InTx(ctx, nil, func(tx *sql.Tx) error {
		var err error
		res, err = s.withdrawTx(ctx, tx, p)
		return err
	})
	if err != nil {
		return WithdrawResult{}, fmt.Errorf("withdraw %s: %w", p.OperationID, err)
	}
	return res, nil
}

func (s *Store) withdrawTx(ctx context.Context, tx *sql.Tx, p WithdrawParams) (WithdrawResult, error) {
	r, err := withdrawLoad(ctx, tx, s.dialect, p)
	if err != nil {
		return WithdrawResult{}, err
	}
	plan, err := domain.Withdraw(r.view)
	if err != nil {
		return WithdrawResult{}, err
	}
	res := WithdrawResult{Outcome: plan.Outcome, Step: int(r.view.Step), View: plan.View, BatchID: plan.Batch}
	if r.view.BindingOwned {
		res.Binding = r.b
	}
	if plan.Outcome != domain.WithdrawApplied {
		return res, nil
	}
	if plan.LeaveBatchSet {
		gone, err := execCount(ctx, tx,
			"DELETE FROM merge_batch_request WHERE operation_id = ? AND batch_id IS NULL", p.OperationID)
		if err != nil {
			return WithdrawResult{}, fmt.Errorf("take out of the waiting set: %w", err)
		}
		if gone != 1 {
			res.Outcome, res.BatchID = WithdrawClaimed, claimingBatch(ctx, tx, p.OperationID)
			return res, nil
		}
	}
	if res.Flip, err = s.withdrawWrite(ctx, tx, p, r, plan); err != nil {
		return WithdrawResult{}, err
	}
	res.Place = plan.Place
	if plan.Place == WithdrawFromMR && p.ClaimOwner != "" && p.ClaimLease > 0 {
		it, err := claimInTx(ctx, tx, s.dialect, p.OperationID, p.ClaimOwner, p.ClaimLease)
		if err != nil {
			return WithdrawResult{}, err
		}
		res.Claimed = &it
	}
	return res, nil
}

// withdrawRead is what OperationWithdraw read under its locks: the view
// domain.Withdraw decides from, the binding as found and the grant a
// renewal renews (its row's owner once handed back).
type withdrawRead struct {
	view  domain.WithdrawView
	b     Binding
	grant string
}

// withdrawLoad locks the operation and then its binding, and reads the
// step history and the batch membership when the decision needs them.
func withdrawLoad(ctx context.Context, tx *sql.Tx, d Dialect, p WithdrawParams) (withdrawRead, error) {
	var (
		r               withdrawRead
		subject, target string
		step            int
		batchID         sql.NullInt64
	)
	err := tx.QueryRowContext(ctx,
		"SELECT subject, target_key, step_status, batch_id, "+kindOf("")+", COALESCE(grant_operation_id, '') FROM operation WHERE operation_id = ?"+d.forUpdate(),
		p.OperationID).Scan(&subject, &target, &step, &batchID, &r.view.Kind, &r.grant)
	if errors.Is(err, sql.ErrNoRows) {
		return withdrawRead{}, fmt.Errorf("operation %s: %w", p.OperationID, domain.ErrNotFound)
	}
	if err != nil {
		return withdrawRead{}, fmt.Errorf("lock operation: %w", translate(err))
	}
	r.view.Step, r.view.Batch, r.view.Cancel = domain.StepStatus(step), batchID.Int64, p.Cancel
	r.b, err = bindingGet(ctx, tx, d, subject, target, d.forUpdate())
	if errors.Is(err, sql.ErrNoRows) {
		return r, nil
	}
	if err != nil {
		return withdrawRead{}, fmt.Errorf("lock binding: %w", translate(err))
	}
	r.view.Binding, r.view.BindingOwned = r.b.Status, r.b.OperationID == p.OperationID
	if r.view.NeedsHistory() {
		r.view.EndReached = reachedBefore(ctx, tx, p.OperationID, domain.WithdrawEnd(p.Cancel))
	}
	if r.view.NeedsMembership() {
		if r.view.Member, err = withdrawMembership(ctx, tx, p.OperationID, r.view); err != nil {
			return withdrawRead{}, err
		}
	}
	return r, nil
}

// withdrawMembership reads the batch membership of a request withdrawn
// from the MR place: its waiting-set row's batch and, when it is a
// member of one, that batch's status.
//
// The batch row is read, not locked: settlements lock the batch before
// its members, and a lock here, after the operation's, could deadlock
// against them. A batch resumed between this read and the commit (an
// operator's retrigger) is still settled by the withdraw action, as an
// operator's settlement would be.
func withdrawMembership(ctx context.Context, tx *sql.Tx, operationID string, v domain.WithdrawView) (*domain.WithdrawMember, error) {
	var rowBatch sql.NullInt64
	err := tx.QueryRowContext(ctx, "SELECT batch_id FROM merge_batch_request WHERE operation_id = ?", operationID).Scan(&rowBatch)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("read waiting set: %w", translate(err))
	}
	m := &domain.WithdrawMember{WaitingBatch: rowBatch.Int64}
	v.Member = m
	if id := v.MemberBatch(); id != 0 {
		if err := tx.QueryRowContext(ctx, "SELECT status FROM merge_batch WHERE id = ?", id).Scan(&m.Status); err != nil {
			return nil, fmt.Errorf("read batch %d: %w", id, translate(err))
		}
	}
	return m, nil
}

// claimInTx is WorkClaimOne's claim inside tx, on a row this transaction
// has just scheduled (so it is due and unleased).
func claimInTx(ctx context.Context, tx *sql.Tx, d Dialect, operationID, owner string, lease time.Duration) (WorkItem, error) {
	if utf8.RuneCountInString(owner) > maxLeaseOwnerLen {
		return WorkItem{}, errors.New("claim work: owner too long")
	}
	l := Lease{Owner: owner, Token: newToken()}
	until, untilArg := d.NowAdd(lease)
	if err := execOne(ctx, tx,
		"UPDATE operation"+d.forceIndex("uk_operation_operation_id")+" SET lease_owner = ?, lease_expires_at = "+until+
			", due_at = "+until+", attempts = attempts + 1 WHERE operation_id = ?",
		l.column(), untilArg, untilArg, operationID); err != nil {
		return WorkItem{}, fmt.Errorf("claim: %w", err)
	}
	o, err := operationGet(ctx, tx, operationID)
	if err != nil {
		return WorkItem{}, fmt.Errorf("claim: %w", translate(err))
	}
	return WorkItem{Operation: o, Lease: l}, nil
}

// withdrawWrite applies plan's state write: the step (guarded by the
// step read), the binding move (guarded by its version; a renewal's
// CLOSED is its grant's VALIDATED, the row handed back), the action due
// at once when the plan schedules it, one step-history row.
func (s *Store) withdrawWrite(ctx context.Context, tx *sql.Tx, p WithdrawParams, r withdrawRead, plan domain.WithdrawPlan) (*Flip, error) {
	d := s.dialect
	fromStep, toStep := int(r.view.Step), int(plan.Step)
	var flip *Flip
	if plan.Move != "" {
		if err := bindingMove(ctx, tx, d, r.b, plan.Move, plan.Restore, r.grant); err != nil {
			return nil, fmt.Errorf("move binding: %w", err)
		}
		flip = &Flip{
			OperationID: p.OperationID, Subject: r.b.Subject, TargetKey: r.b.TargetKey,
			From: r.b.Status, To: plan.Move, BindingVersion: r.b.Version + 1,
			FromStep: fromStep, ToStep: toStep, EndedWithoutEffect: plan.Restore,
		}
	}
	if err := execOne(ctx, tx,
		"UPDATE operation"+d.forceIndex("uk_operation_operation_id")+" SET step_status = ?, version = version + 1,"+
			" next_action = NULL, due_at = NULL, attempts = 0, lease_owner = NULL, lease_expires_at = NULL"+
			" WHERE operation_id = ? AND step_status = ?", toStep, p.OperationID, fromStep); err != nil {
		return nil, fmt.Errorf("write step: %w", err)
	}
	if plan.Schedule {
		// Pre-empts the lease of a step still running (submit_approval,
		// create_mr, a pipeline poll): its outcome can no longer be written.
		if err := s.WorkScheduleTx(ctx, tx, p.OperationID, p.Action, 0); err != nil {
			return nil, err
		}
	}
	hist := operationStepRow{operationID: p.OperationID, fromStep: fromStep, toStep: toStep, actor: p.Actor, note: p.Note}
	if flip != nil {
		hist.fromBinding, hist.toBinding = flip.From, flip.To
	}
	if err := operationStepInsert(ctx, tx, d, []operationStepRow{hist}); err != nil {
		return nil, err
	}
	return flip, nil
}

// reachedBefore says whether the operation's history has step (the
// requester's withdrawal, an operator's close): a CLOSE_FAILED reached
// after it (the upstream half kept failing) is still a withdrawn or
// closed request.
func reachedBefore(ctx context.Context, tx *sql.Tx, operationID string, step domain.StepStatus) bool {
	var n int
	err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM operation_step WHERE operation_id = ? AND to_step = ?",
		operationID, int(step)).Scan(&n)
	return err == nil && n > 0
}

// claimingBatch is the batch whose round claimed operationID's waiting
// row (0 when there is no row any more).
func claimingBatch(ctx context.Context, tx *sql.Tx, operationID string) int64 {
	var id sql.NullInt64
	_ = tx.QueryRowContext(ctx, "SELECT batch_id FROM merge_batch_request WHERE operation_id = ?", operationID).Scan(&id)
	return id.Int64
}

// execCount runs a write and returns how many rows it affected.
func execCount(ctx context.Context, q queryer, query string, args ...any) (int64, error) {
	r, err := q.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, translate(err)
	}
	n, err := r.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("rows affected: %w", err)
	}
	return n, nil
}
