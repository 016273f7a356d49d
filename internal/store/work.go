package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"changeflow/internal/domain"
)

// Durable execution: the next action of every in-flight request
// and when it is due live in its operation row (next_action, due_at).
// Workers on every instance take due rows with a guarded UPDATE that
// writes an owner and a lease expiry from the DB clock, run one step, and
// record its outcome together with the state transition in one
// transaction guarded by that lease.
//
// A claimed row's due_at is moved to its lease expiry. "Due" therefore
// covers both never-claimed work and work whose owner died: when the lease
// expires the row is due again and the same claim query takes it — there
// is no separate recovery pass to forget. WorkReleaseExpired only tidies
// the owner column for the ops pages.

// Lease identifies one claim of one operation: the engine instance that
// holds it and a random per-claim token, stored together in lease_owner
// ("owner#token"). The token makes every claim distinct, so a write from a
// claim that lost its lease to a later claim by the same instance is
// refused too.
type Lease struct {
	Owner string
	Token string
}

// column is the stored lease_owner value.
func (l Lease) column() string { return l.Owner + "#" + l.Token }

// maxLeaseOwnerLen is what an owner may use of lease_owner's 128
// characters, leaving room for "#" and the token.
const maxLeaseOwnerLen = 100

// WorkItem is one claimed operation.
type WorkItem struct {
	// Operation is the row as claimed: Attempts already counts this claim,
	// DueAt and LeaseExpiresAt are the lease expiry (DB clock).
	Operation Operation
	Lease     Lease
}

// WorkClaimDue claims up to limit due operations for owner, each for lease
// (DB clock), oldest due first:
//
//  1. a plain read of the ids with due_at <= now (idx_operation_due),
//     ordered by (due_at, id) — no locks;
//  2. one guarded UPDATE … WHERE id IN (…) AND due_at <= now AND the lease
//     is free or expired, pinned to the primary key, which sets the lease
//     (owner#token, expiry), moves due_at to the expiry and counts the
//     attempt. MariaDB re-evaluates the condition on the latest row version
//     under the row lock, so of two instances that read the same ids,
//     the second matches none of the rows the first took;
//  3. re-read the rows carrying this claim's token.
//
// It returns what this call got; an empty result is normal. SQLite has a
// single writer, so step 2 is serialized anyway.
func (s *Store) WorkClaimDue(ctx context.Context, owner string, lease time.Duration, limit int) ([]WorkItem, error) {
	switch {
	case owner == "" || utf8.RuneCountInString(owner) > maxLeaseOwnerLen:
		return nil, fmt.Errorf("claim work: owner must have 1 to %d characters", maxLeaseOwnerLen)
	case lease <= 0:
		return nil, errors.New("claim work: lease must be positive")
	case limit <= 0:
		return nil, nil
	}
	d := s.dialect
	rows, err := s.db.QueryContext(ctx,
		"SELECT id FROM operation WHERE due_at <= "+d.Now()+" ORDER BY due_at, id LIMIT ?", limit)
	if err != nil {
		return nil, fmt.Errorf("claim work: read due: %w", translate(err))
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, fmt.Errorf("claim work: read due: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Close(); err != nil {
		return nil, fmt.Errorf("claim work: read due: %w", translate(err))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim work: read due: %w", translate(err))
	}
	if len(ids) == 0 {
		return nil, nil
	}

	l := Lease{Owner: owner, Token: newToken()}
	until, untilArg := d.NowAdd(lease)
	vals := []any{l.column(), untilArg, untilArg}
	for _, id := range ids {
		vals = append(vals, id)
	}
	res, err := s.db.ExecContext(ctx,
		"UPDATE operation "+d.PrimaryKeyHint()+" SET lease_owner = ?, lease_expires_at = "+until+", due_at = "+until+
			", attempts = attempts + 1 WHERE id IN ("+placeholders(len(ids))+") AND due_at <= "+d.Now()+
			" AND (lease_owner IS NULL OR lease_expires_at IS NULL OR lease_expires_at <= "+d.Now()+")", vals...)
	if err != nil {
		return nil, fmt.Errorf("claim work: %w", translate(err))
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return nil, translate(err)
	}

	got, err := s.db.QueryContext(ctx,
		"SELECT "+operationColumns+" FROM operation WHERE id IN ("+placeholders(len(ids))+") AND lease_owner = ? ORDER BY due_at, id",
		append(vals[3:], l.column())...)
	if err != nil {
		return nil, fmt.Errorf("claim work: re-read: %w", translate(err))
	}
	defer got.Close()
	var out []WorkItem
	for got.Next() {
		o, err := scanOperation(got)
		if err != nil {
			return nil, fmt.Errorf("claim work: re-read: %w", err)
		}
		out = append(out, WorkItem{Operation: o, Lease: l})
	}
	if err := got.Err(); err != nil {
		return nil, fmt.Errorf("claim work: re-read: %w", translate(err))
	}
	return out, nil
}

// newToken returns 16 random hex characters.
func newToken() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// WorkFields are the operation's link columns a step may set with its
// outcome; zero values leave a column unchanged.
type WorkFields struct {
	BatchID    int64
	MRIID      int64
	MRURL      string
	Branch     string
	ApprovalID string
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

// WorkRelease gives a claimed operation back without an outcome (the
// instance is shutting down): the lease is cleared and the action is due
// again after delay, for any instance. A lost lease is domain.ErrPreempted.
func (s *Store) WorkRelease(ctx context.Context, opID string, l Lease, delay time.Duration) error {
	due, dueArg := s.dialect.NowAdd(delay)
	err := execOne(ctx, s.db,
		"UPDATE operation"+s.dialect.forceIndex("uk_operation_operation_id")+
			" SET lease_owner = NULL, lease_expires_at = NULL, due_at = "+due+
			" WHERE operation_id = ? AND lease_owner = ?", dueArg, opID, l.column())
	if err != nil {
		return fmt.Errorf("release work of %s: %w", opID, err)
	}
	return nil
}

// WorkRenewLease extends a held lease to d from the DB clock (and the due
// time with it) and returns the new expiry. A lost lease is an error
// wrapping domain.ErrPreempted: the step must stop and write nothing.
func (s *Store) WorkRenewLease(ctx context.Context, opID string, l Lease, d time.Duration) (time.Time, error) {
	until, arg := s.dialect.NowAdd(d)
	err := execOne(ctx, s.db,
		"UPDATE operation"+s.dialect.forceIndex("uk_operation_operation_id")+
			" SET lease_expires_at = "+until+", due_at = "+until+" WHERE operation_id = ? AND lease_owner = ?",
		arg, arg, opID, l.column())
	if err != nil {
		return time.Time{}, fmt.Errorf("renew lease of %s: %w", opID, err)
	}
	var exp time.Time
	if err := s.db.QueryRowContext(ctx, "SELECT lease_expires_at FROM operation WHERE operation_id = ?", opID).Scan(&exp); err != nil {
		return time.Time{}, fmt.Errorf("renew lease of %s: %w", opID, translate(err))
	}
	return exp, nil
}

// WorkReleaseExpired clears the owner of up to limit leases that expired
// (their owner died or stalled) and returns how many. It is tidying, not
// recovery: an expired row is already due (due_at = lease expiry) and the
// next WorkClaimDue takes it either way. Uses idx_operation_lease.
func (s *Store) WorkReleaseExpired(ctx context.Context, limit int) (int64, error) {
	d := s.dialect
	rows, err := s.db.QueryContext(ctx,
		"SELECT id FROM operation WHERE lease_expires_at <= "+d.Now()+" ORDER BY lease_expires_at LIMIT ?", limit)
	if err != nil {
		return 0, fmt.Errorf("release expired leases: %w", translate(err))
	}
	var ids []any
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, fmt.Errorf("release expired leases: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(ids) == 0 {
		return 0, translate(err)
	}
	res, err := s.db.ExecContext(ctx,
		"UPDATE operation "+d.PrimaryKeyHint()+" SET lease_owner = NULL, lease_expires_at = NULL WHERE id IN ("+
			placeholders(len(ids))+") AND lease_expires_at <= "+d.Now(), ids...)
	if err != nil {
		return 0, fmt.Errorf("release expired leases: %w", translate(err))
	}
	n, err := res.RowsAffected()
	return n, translate(err)
}

// WorkSchedule makes action due for operationID after delay (DB clock),
// resets its attempts and pre-empts any lease: a step still running under
// it can no longer write its outcome (WorkComplete gets
// domain.ErrPreempted). Callbacks, the HTTP entry and operators' retrigger
// use it, inside their own transaction with WorkScheduleTx.
func (s *Store) WorkSchedule(ctx context.Context, operationID, action string, delay time.Duration) error {
	return s.InTx(ctx, nil, func(tx *sql.Tx) error {
		return s.WorkScheduleTx(ctx, tx, operationID, action, delay)
	})
}

// WorkScheduleTx is WorkSchedule inside tx; an unknown operation is an
// error wrapping domain.ErrNotFound.
func (s *Store) WorkScheduleTx(ctx context.Context, tx *sql.Tx, operationID, action string, delay time.Duration) error {
	if action == "" {
		return errors.New("schedule work: action is required")
	}
	due, dueArg := s.dialect.NowAdd(delay)
	err := execOne(ctx, tx,
		"UPDATE operation"+s.dialect.forceIndex("uk_operation_operation_id")+
			" SET next_action = ?, due_at = "+due+", attempts = 0, lease_owner = NULL, lease_expires_at = NULL, last_error = NULL"+
			" WHERE operation_id = ?", action, dueArg, operationID)
	if errors.Is(err, domain.ErrPreempted) {
		return fmt.Errorf("schedule %s for %s: %w", action, operationID, domain.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("schedule %s for %s: %w", action, operationID, err)
	}
	return nil
}

// WorkClaimOne claims operationID for owner if its action is due now (the
// async entry hands a just-submitted request straight to the pool). It
// returns ok false when the row is not due or another owner holds it.
func (s *Store) WorkClaimOne(ctx context.Context, operationID, owner string, lease time.Duration) (item WorkItem, ok bool, err error) {
	if owner == "" || utf8.RuneCountInString(owner) > maxLeaseOwnerLen || lease <= 0 {
		return WorkItem{}, false, errors.New("claim work: owner and a positive lease are required")
	}
	d := s.dialect
	l := Lease{Owner: owner, Token: newToken()}
	until, untilArg := d.NowAdd(lease)
	res, err := s.db.ExecContext(ctx,
		"UPDATE operation"+d.forceIndex("uk_operation_operation_id")+" SET lease_owner = ?, lease_expires_at = "+until+
			", due_at = "+until+", attempts = attempts + 1 WHERE operation_id = ? AND due_at <= "+d.Now()+
			" AND (lease_owner IS NULL OR lease_expires_at IS NULL OR lease_expires_at <= "+d.Now()+")",
		l.column(), untilArg, untilArg, operationID)
	if err != nil {
		return WorkItem{}, false, fmt.Errorf("claim %s: %w", operationID, translate(err))
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return WorkItem{}, false, translate(err)
	}
	o, err := operationGet(ctx, s.db, operationID)
	if err != nil {
		return WorkItem{}, false, fmt.Errorf("claim %s: %w", operationID, translate(err))
	}
	return WorkItem{Operation: o, Lease: l}, true, nil
}
