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

// WithdrawPlace is where a request waited when its requester withdrew it;
// it is also the label of changeflow_requests_withdrawn_total.
type WithdrawPlace string

// The places a request can be withdrawn from.
const (
	// WithdrawFromApproval: waiting for its approval (APPROVAL_SENDING or
	// APPROVAL_SENT, either flow). The binding is CLOSED at once; the
	// scheduled action withdraws the approval upstream (and, legacy flow,
	// closes the request's MR).
	WithdrawFromApproval WithdrawPlace = "approval"
	// WithdrawFromBatchSet: approved and waiting in its project's batch
	// waiting set, not yet claimed by a round. Taken out of the set and
	// CLOSED in one transaction; nothing upstream to undo.
	WithdrawFromBatchSet WithdrawPlace = "batch_set"
	// WithdrawFromMR: its single-request MR is being created or checked
	// (MR_CREATING or MR_CREATED, no batch), or it stopped on a failure
	// (CREATE_FAILED or HANDLE_FAILED, no batch), or it is a member of a
	// BLOCKED batch, or the stopped culprit of an ended one (its MR is the
	// batch's). Only the step moves now; the
	// scheduled action closes the MR and then moves the binding — to
	// CLOSED, or to MERGED when the MR turned out merged.
	WithdrawFromMR WithdrawPlace = "mr"
)

// WithdrawOutcome is what OperationWithdraw found and did.
type WithdrawOutcome int

// The outcomes of OperationWithdraw. Only WithdrawApplied wrote anything.
const (
	// WithdrawApplied: this call withdrew the request (Place says from
	// where).
	WithdrawApplied WithdrawOutcome = iota + 1
	// WithdrawAlready: the request was withdrawn before (its step is
	// CLOSE_REQUESTER_WITHDRAWN, or CLOSE_FAILED after a withdrawal); the
	// answer is its current state.
	WithdrawAlready
	// WithdrawClaimed: a batch round has claimed the request (BatchID); it
	// goes through that batch's MR and can no longer be taken out.
	WithdrawClaimed
	// WithdrawRefused: the request is past the point of withdrawal or has
	// ended otherwise: merging, merged, in effect,
	// rejected or closed, a revocation — or its binding now belongs to a
	// newer request. Binding and Step say where it is.
	WithdrawRefused
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
// transaction, in the lock order operation → binding → waiting-set row:
//
//  1. lock the operation (none: an error wrapping domain.ErrNotFound) and
//     its binding; a binding owned by another (newer) request, or none,
//     is WithdrawRefused;
//  2. a request withdrawn before is WithdrawAlready (idempotent);
//  3. APPROVAL_SENDING / APPROVAL_SENT: binding CLOSED, step
//     CLOSE_REQUESTER_WITHDRAWN, Action due at once — a late approval
//     callback then finds the binding out of its waiting set (stale);
//  4. MR_CREATING at CREATE_ADMITTED: the guarded DELETE of its waiting
//     row "… WHERE operation_id = ? AND batch_id IS NULL". One row: out of
//     the set, binding CLOSED, step CLOSE_REQUESTER_WITHDRAWN, nothing
//     due. No row: a round claimed it first — WithdrawClaimed. The claim
//     marks rows with "… SET batch_id = ? WHERE batch_id IS NULL" and
//     rolls back when it marks fewer than it read, so of a claim and a
//     withdrawal racing for one row exactly one wins, on either database:
//     both guards test the same column of the same row, and the row lock
//     (MariaDB) or the single writer (SQLite) orders them;
//  5. MR_CREATING / MR_CREATED with no waiting-set row and no batch: the
//     single-request MR path. Only the step moves (CLOSE_REQUESTER_WITHDRAWN,
//     Action due): the binding stays where it is, not re-appliable, until
//     the action has closed the MR — had it moved to CLOSED now, a new
//     request could take the row before the action learns that the MR was
//     merged by hand meanwhile, and "merged wins" would have nothing to
//     follow. A member of a claimed batch: see 7;
//  6. CREATE_FAILED / HANDLE_FAILED (a grant or a renewal stopped on a
//     failure, waiting for an operator), with no waiting-set row and no
//     batch, from a step the table lets the withdrawal leave: the same
//     as 5 — only the step moves, and the action closes its MR, if it has
//     one ("merged wins" again). A stopped revocation is not the
//     requester's to withdraw: it is refused;
//  7. a member of a batch (a waiting row with a batch, or a batch id) in
//     place 5 or 6, or following its batch at MERGING, leaves it only when its batch is BLOCKED, or has ended
//     with the member stopped on a failure (batchLetsGo): then as 5, the
//     action settling a BLOCKED batch without it first; else
//     WithdrawClaimed;
//  8. anything else: WithdrawRefused.
//
// An operator's close (WithdrawParams.Cancel) takes only places 5 and 6,
// and of 5 only a stopped step (a pending pipeline or rebase), writing
// CLOSE_CANCELLED instead; a request withdrawn or closed before is
// WithdrawAlready, anything else WithdrawRefused.
//
// A renewal (docs/flows/lifecycle.md, "Renewal") is withdrawn from the same
// places, read in the grant's vocabulary (its binding shows RENEWING
// throughout: domain.OperationKind.GrantView). Where a grant's binding
// would move to CLOSED, the renewal's goes back to the grant it renews —
// VALIDATED, owned by the grant, its expiry never touched
// (domain.OperationKind.EndsWithoutEffect), so the access in effect is
// exactly what it was and the grant's entry on main stays as it is.
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
	d := s.dialect
	var (
		subject, target string
		step            int
		batchID         sql.NullInt64
		kind            domain.OperationKind
		grantOp         string
	)
	err := tx.QueryRowContext(ctx,
		"SELECT subject, target_key, step_status, batch_id, "+kindOf("")+", COALESCE(grant_operation_id, '') FROM operation WHERE operation_id = ?"+d.forUpdate(),
		p.OperationID).Scan(&subject, &target, &step, &batchID, &kind, &grantOp)
	if errors.Is(err, sql.ErrNoRows) {
		return WithdrawResult{}, fmt.Errorf("operation %s: %w", p.OperationID, domain.ErrNotFound)
	}
	if err != nil {
		return WithdrawResult{}, fmt.Errorf("lock operation: %w", translate(err))
	}
	res := WithdrawResult{Step: step, Outcome: WithdrawRefused}
	b, err := bindingGet(ctx, tx, d, subject, target, d.forUpdate())
	if errors.Is(err, sql.ErrNoRows) {
		return res, nil
	}
	if err != nil {
		return WithdrawResult{}, fmt.Errorf("lock binding: %w", translate(err))
	}
	if b.OperationID != p.OperationID {
		return res, nil // an old request: its binding belongs to a newer one
	}
	res.Binding = b
	view := kind.GrantView(b.Status, domain.StepStatus(step))
	res.View = view
	toStep := domain.StepCloseRequesterWithdrawn
	if p.Cancel {
		toStep = domain.StepCloseCancelled
	}
	switch st := domain.StepStatus(step); {
	case st == toStep, st == domain.StepCloseFailed && reachedBefore(ctx, tx, p.OperationID, toStep):
		res.Outcome = WithdrawAlready
		return res, nil
	}
	stopped := kind != domain.OperationRevoke && domain.CheckStep(domain.StepStatus(step), toStep) == nil &&
		(view == domain.BindingCreateFailed || view == domain.BindingHandleFailed || p.Cancel && domain.StepStatus(step).Stopped())

	w := withdrawWrite{op: p.OperationID, fromStep: step, toStep: toStep, b: b, kind: kind, grant: grantOp, actor: p.Actor, note: p.Note}
	switch {
	case p.Cancel && !(stopped && (view == domain.BindingMRCreating || view == domain.BindingMRCreated ||
		view == domain.BindingCreateFailed || view == domain.BindingHandleFailed)):
		return res, nil // an operator closes only a stopped request
	case view == domain.BindingApprovalSending || view == domain.BindingApprovalSent:
		res.Place, w.to, w.action = WithdrawFromApproval, domain.BindingClosed, p.Action
	case view == domain.BindingMRCreating && domain.StepStatus(step) == domain.StepCreateAdmitted:
		gone, err := execCount(ctx, tx,
			"DELETE FROM merge_batch_request WHERE operation_id = ? AND batch_id IS NULL", p.OperationID)
		if err != nil {
			return WithdrawResult{}, fmt.Errorf("take out of the waiting set: %w", err)
		}
		if gone != 1 {
			res.Outcome, res.BatchID = WithdrawClaimed, claimingBatch(ctx, tx, p.OperationID)
			return res, nil
		}
		res.Place, w.to = WithdrawFromBatchSet, domain.BindingClosed
	case view == domain.BindingMRCreating || view == domain.BindingMRCreated, stopped,
		// A batch member following its batch into handling: only a
		// BLOCKED batch lets it go (batchLetsGo, below); a merging
		// request of its own, or of a running batch, never.
		view == domain.BindingMerging && batchID.Int64 != 0 && !p.Cancel:
		var rowBatch sql.NullInt64
		err := tx.QueryRowContext(ctx, "SELECT batch_id FROM merge_batch_request WHERE operation_id = ?", p.OperationID).Scan(&rowBatch)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return WithdrawResult{}, fmt.Errorf("read waiting set: %w", translate(err))
		}
		if claimed := max(rowBatch.Int64, batchID.Int64); claimed != 0 {
			ok, err := batchLetsGo(ctx, tx, claimed, stopped)
			if err != nil {
				return WithdrawResult{}, err
			}
			if !ok || domain.CheckStep(domain.StepStatus(step), toStep) != nil {
				res.Outcome, res.BatchID = WithdrawClaimed, claimed
				return res, nil
			}
			res.BatchID = claimed
		}
		res.Place, w.to, w.action = WithdrawFromMR, b.Status, p.Action
	default:
		return res, nil
	}
	flip, err := w.write(ctx, tx, d, s)
	if err != nil {
		return WithdrawResult{}, err
	}
	res.Outcome, res.Flip = WithdrawApplied, flip
	if res.Place == WithdrawFromMR && p.ClaimOwner != "" && p.ClaimLease > 0 {
		it, err := claimInTx(ctx, tx, d, p.OperationID, p.ClaimOwner, p.ClaimLease)
		if err != nil {
			return WithdrawResult{}, err
		}
		res.Claimed = &it
	}
	return res, nil
}

// batchLetsGo says whether a member of batch id may leave it by a
// withdrawal (or an operator's close): the batch is BLOCKED — it waits for
// a person, and the withdraw action settles it without this member (its
// MR closed, merged wins, the others back in the waiting set) — or it has
// ended and the member stopped on a failure (the culprit of a failed
// check pipeline, left with its own failure). A RUNNING batch keeps its
// members: its MR may be merging.
//
// The batch row is read, not locked: settlements lock the batch before
// its members, and a lock here, after the operation's, could deadlock
// against them. A batch resumed between this read and the commit (an
// operator's retrigger) is still settled by the withdraw action, as an
// operator's settlement would be.
func batchLetsGo(ctx context.Context, tx *sql.Tx, id int64, stopped bool) (bool, error) {
	var status domain.BatchStatus
	err := tx.QueryRowContext(ctx, "SELECT status FROM merge_batch WHERE id = ?", id).Scan(&status)
	if err != nil {
		return false, fmt.Errorf("read batch %d: %w", id, translate(err))
	}
	return status == domain.BatchBlocked || !status.Active() && stopped, nil
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

// withdrawWrite is the state write of a withdrawal: step
// CLOSE_REQUESTER_WITHDRAWN (an operator's close: CLOSE_CANCELLED), the binding to `to` in the grant's vocabulary
// (mapped per kind: a renewal's CLOSED is its grant's VALIDATED, the row
// handed back; unchanged when equal), action due at once or, "", nothing
// due; one step-history row.
type withdrawWrite struct {
	op          string
	fromStep    int
	toStep      domain.StepStatus
	b           Binding
	kind        domain.OperationKind
	grant       string
	to          domain.BindingStatus
	action      string
	actor, note string
}

func (w withdrawWrite) write(ctx context.Context, tx *sql.Tx, d Dialect, s *Store) (*Flip, error) {
	toStep := int(w.toStep)
	if err := domain.CheckStep(domain.StepStatus(w.fromStep), domain.StepStatus(toStep)); err != nil {
		return nil, err
	}
	var flip *Flip
	restore := w.kind.EndsWithoutEffect(w.to)
	to := w.kind.Binding(w.to)
	if to != w.b.Status {
		if err := domain.CheckBinding(w.b.Status, to); err != nil {
			return nil, err
		}
		if err := bindingMove(ctx, tx, d, w.b, to, restore, w.grant); err != nil {
			return nil, fmt.Errorf("move binding: %w", err)
		}
		flip = &Flip{
			OperationID: w.op, Subject: w.b.Subject, TargetKey: w.b.TargetKey,
			From: w.b.Status, To: to, BindingVersion: w.b.Version + 1,
			FromStep: w.fromStep, ToStep: toStep, EndedWithoutEffect: restore,
		}
	}
	if err := execOne(ctx, tx,
		"UPDATE operation"+d.forceIndex("uk_operation_operation_id")+" SET step_status = ?, version = version + 1,"+
			" next_action = NULL, due_at = NULL, attempts = 0, lease_owner = NULL, lease_expires_at = NULL"+
			" WHERE operation_id = ? AND step_status = ?", toStep, w.op, w.fromStep); err != nil {
		return nil, fmt.Errorf("write step: %w", err)
	}
	if w.action != "" {
		// Pre-empts the lease of a step still running (submit_approval,
		// create_mr, a pipeline poll): its outcome can no longer be written.
		if err := s.WorkScheduleTx(ctx, tx, w.op, w.action, 0); err != nil {
			return nil, err
		}
	}
	hist := operationStepRow{operationID: w.op, fromStep: w.fromStep, toStep: toStep, actor: w.actor, note: w.note}
	if flip != nil {
		hist.fromBinding, hist.toBinding = flip.From, flip.To
	}
	if err := operationStepInsert(ctx, tx, []operationStepRow{hist}); err != nil {
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
