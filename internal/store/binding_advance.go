package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"changeflow/internal/domain"
)

// Flip is what an advancing call returns when — and only when — this call
// changed the binding's status. Callers produce side effects (metrics,
// notifications) from a non-nil Flip, after the commit (I9): of several
// concurrent paths advancing the same binding, exactly one gets a Flip.
type Flip struct {
	OperationID string
	Subject     string
	TargetKey   string
	From        domain.BindingStatus
	To          domain.BindingStatus
	// BindingVersion is the binding's version after the flip.
	BindingVersion int64
	// FromStep and ToStep are the operation's step before and after; equal
	// when the step did not need repairing.
	FromStep int
	ToStep   int
	// EndedWithoutEffect: a renewal ended without effect (rejected,
	// withdrawn, closed) and the row went back to its grant, VALIDATED as
	// before — To is VALIDATED, but nothing new took effect.
	EndedWithoutEffect bool
}

// BindingAdvanceParams describes an advance of the binding owned by
// OperationID from From to To.
type BindingAdvanceParams struct {
	OperationID string
	From        domain.BindingStatus
	To          domain.BindingStatus
	// Step is the step the operation must show once the binding is in To
	// (e.g. CALLED_BACK). A lagging step is repaired even when the binding
	// is already in To; 0 leaves the step alone.
	Step  int
	Actor string
	Note  string
	// OnlyFromSteps, when set, is a precondition on the operation's step:
	// any other step writes nothing (nil, nil), like a binding outside
	// {From, To}.
	OnlyFromSteps []int
	// TakeExpiry makes the flip also write the operation's own expiry to
	// the binding: a renewal in effect moves the access's expiry to its
	// own.
	TakeExpiry bool
}

// BindingAdvance is the state-advancing method several paths share:
// callbacks, reconciliation and
// operators may all try to move the same binding at once.
//
// In one transaction, in the fixed lock order operation → binding:
//
//  1. lock the operation row (SELECT … FOR UPDATE on MariaDB);
//  2. lock the binding through its unique key (subject, target) — a record
//     lock, no gap lock — and check the operation still owns it;
//  3. preconditions: the binding is in From or To, else nothing is written
//     (idempotent no-op: a stale or early caller);
//  4. repair a lagging step: Step is written if the operation shows
//     another one (version+1), so the two layers agree again;
//  5. flip From → To, guarded by status and version;
//  6. one step-history row for whatever changed.
//
// It returns a non-nil *Flip only when step 5 ran in this call. A missing
// operation or binding, another owner, a status outside {From, To}, or a
// binding already in To all return (nil, nil). Because the rows are locked
// before they are read, concurrent callers queue and each later one reads
// To: they return nil instead of failing with domain.ErrPreempted. SQLite
// needs no row locks for this: its write transactions hold the database's
// single write lock from BEGIN (see Dialect.forUpdate).
func (s *Store) BindingAdvance(ctx context.Context, p BindingAdvanceParams) (*Flip, error) {
	switch {
	case p.OperationID == "":
		return nil, errors.New("advance binding: operationId is required")
	case !p.From.Valid() || !p.To.Valid() || p.From == p.To:
		return nil, fmt.Errorf("advance binding: %q → %q is not a move", p.From, p.To)
	case p.Step < 0:
		return nil, fmt.Errorf("advance binding: step code %d is not a step", p.Step)
	}
	return s.advance(ctx, p.OperationID, p.advance(), p.Actor, p.Note)
}

// advance runs BindingAdvance's transaction for move a of operationID.
func (s *Store) advance(ctx context.Context, operationID string, a domain.Advance, actor, note string) (*Flip, error) {
	if err := domain.CheckBinding(a.From, a.To); err != nil {
		return nil, fmt.Errorf("advance binding: %w", err)
	}
	var flip *Flip
	err := s.InTx(ctx, nil, func(tx *sql.Tx) error {
		var err error
		flip, err = bindingAdvanceTx(ctx, tx, s.dialect, operationID, a, actor, note)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("advance binding of %s %s → %s: %w", operationID, a.From, a.To, err)
	}
	return flip, nil
}

// advance is the move p asks for.
func (p BindingAdvanceParams) advance() domain.Advance {
	a := domain.Advance{From: p.From, To: p.To, Step: domain.StepStatus(p.Step), TakeExpiry: p.TakeExpiry}
	for _, st := range p.OnlyFromSteps {
		a.OnlyFromSteps = append(a.OnlyFromSteps, domain.StepStatus(st))
	}
	return a
}

// bindingAdvanceTx is BindingAdvance inside tx: it loads (operation, then
// binding, both locked), lets domain.PlanAdvance decide and applies.
func bindingAdvanceTx(ctx context.Context, tx *sql.Tx, d Dialect, operationID string, a domain.Advance, actor, note string) (*Flip, error) {
	var (
		subject, target string
		step            int
		version         int64
	)
	err := tx.QueryRowContext(ctx,
		"SELECT subject, target_key, step_status, version FROM operation WHERE operation_id = ?"+d.forUpdate(),
		operationID).Scan(&subject, &target, &step, &version)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lock operation: %w", translate(err))
	}
	b, err := bindingGet(ctx, tx, d, subject, target, d.forUpdate())
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("lock binding: %w", translate(err))
	}
	plan, err := domain.PlanAdvance(domain.AdvanceState{
		Step: domain.StepStatus(step), Binding: b.Status, BindingOwned: err == nil && b.OperationID == operationID,
	}, a)
	if err != nil || !plan.Writes() {
		return nil, err
	}
	toStep := step
	if plan.RepairStep != 0 {
		toStep = int(plan.RepairStep)
		if err := execOne(ctx, tx,
			"UPDATE operation"+d.forceIndex("uk_operation_operation_id")+
				" SET step_status = ?, version = version + 1 WHERE operation_id = ? AND step_status = ? AND version = ?",
			toStep, operationID, step, version); err != nil {
			return nil, fmt.Errorf("repair step: %w", err)
		}
	}
	hist := operationStepRow{operationID: operationID, fromStep: step, toStep: toStep, actor: actor, note: note}
	if plan.Flip {
		set, vals := "status = ?", []any{string(a.To)}
		if a.TakeExpiry {
			set += ", expires_at = (SELECT o.expires_at FROM operation o WHERE o.operation_id = ?)"
			vals = append(vals, operationID)
		}
		if err := execOne(ctx, tx,
			"UPDATE binding "+d.PrimaryKeyHint()+" SET "+set+", version = version + 1 WHERE id = ? AND status = ? AND version = ?",
			append(vals, b.ID, string(a.From), b.Version)...); err != nil {
			return nil, fmt.Errorf("flip binding: %w", err)
		}
		hist.fromBinding, hist.toBinding = a.From, a.To
	}
	if err := operationStepInsert(ctx, tx, d, []operationStepRow{hist}); err != nil {
		return nil, err
	}
	if !plan.Flip {
		return nil, nil
	}
	return &Flip{
		OperationID: operationID, Subject: subject, TargetKey: target,
		From: a.From, To: a.To, BindingVersion: b.Version + 1,
		FromStep: step, ToStep: toStep,
	}, nil
}

// BindingMarkValidatedParams names the operation whose binding the
// deployment reported in effect.
type BindingMarkValidatedParams struct {
	OperationID string
	// CalledBackStep is the step code of "called back" (CALLED_BACK,
	// 10301), written when the operation's step lags behind.
	CalledBackStep int
	Actor          string
	Note           string
}

// BindingMarkValidated moves
// MERGED → VALIDATED for the binding owned by OperationID, repairing a
// lagging step to CalledBackStep. The deploy callback and reconciliation
// both call it; it returns a non-nil *Flip to exactly one of them, and
// (nil, nil) to the others and to any caller whose preconditions do not
// hold (idempotent no-op). See BindingAdvance.
//
// For a revocation the same evidence confirms the removal: REVOKING →
// REVOKED with the step mapped per kind (CALLED_BACK → REVOKE_CALLED_BACK,
// RECONCILED → REVOKE_RECONCILED). REVOKING covers the whole removal, so
// the flip also needs the removal merged: the step must already be
// HANDLE_MERGED (or a confirmation step, repaired), else nothing is
// written — the table allows only those steps to become a confirmation.
func (s *Store) BindingMarkValidated(ctx context.Context, p BindingMarkValidatedParams) (*Flip, error) {
	var kind domain.OperationKind
	err := s.db.QueryRowContext(ctx, "SELECT "+kindOf("")+" FROM operation WHERE operation_id = ?", p.OperationID).Scan(&kind)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("mark validated %s: %w", p.OperationID, translate(err))
	}
	return s.advance(ctx, p.OperationID, domain.Confirmation(kind, domain.StepStatus(p.CalledBackStep)), p.Actor, p.Note)
}
