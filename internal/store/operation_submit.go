package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"changeflow/internal/domain"
)

// OperationSubmitParams is a validated submission: the new operation and
// the binding state it starts its relationship in.
type OperationSubmitParams struct {
	Operation OperationCreateParams
	// BindingStatus is the relationship's first state for this request,
	// e.g. APPROVAL_SENDING. The binding's expiry is Operation.ExpiresAt.
	BindingStatus domain.BindingStatus
	// Renew accepts the submission as a renewal of the grant in effect
	// while its renewal window is open (BindingApplyParams.Renew); the
	// operation then names the grant (grant_operation_id, kind RENEW) and
	// the binding shows RENEWING.
	Renew *domain.RenewWindow
	// SubmittedAt and MaxDays set a renewal's expiry: accepted as a
	// renewal, the operation's expiry becomes domain.RenewalExpiry of
	// SubmittedAt, the grant's current expiry, Operation.Days and MaxDays
	// (the target's longest access) instead of Operation.ExpiresAt, so
	// days still left on the grant are kept. A zero SubmittedAt keeps
	// Operation.ExpiresAt.
	SubmittedAt time.Time
	MaxDays     int
}

// OperationSubmitResult is what a submission wrote.
type OperationSubmitResult struct {
	Operation   Operation
	Application BindingApplyResult
}

// OperationSubmit creates the operation and applies its binding (I5) in one
// transaction, so a refused application leaves no operation behind and an
// accepted one never exists without its operation:
//
//  1. INSERT operation (a duplicate operationId is an error wrapping
//     domain.ErrDuplicate — the idempotency record answers it);
//  2. BindingApply's load, domain.Submit's decision and its guarded
//     write — insert, reset in place or renewal — which may refuse with
//     *BindingRefusedError (rolled back, nothing written);
//  3. a renewal's operation names the grant it renews, with the expiry
//     the plan gave it;
//  4. the first step-history row, naming the binding's new status.
//
// The lock order is operation, then binding, as in every cross-table
// transition. The new operation row is invisible to other
// transactions until commit, so no other path can hold it first.
// A lost race on the binding retries the whole transaction, as BindingApply
// does.
func (s *Store) OperationSubmit(ctx context.Context, p OperationSubmitParams) (OperationSubmitResult, error) {
	op, apply := p.Operation, p.apply()
	if err := p.validate(apply); err != nil {
		return OperationSubmitResult{}, fmt.Errorf("submit operation: %w", err)
	}
	var res OperationSubmitResult
	err := s.retryApply(ctx, func(tx *sql.Tx) error {
		if err := operationInsert(ctx, tx, s.dialect, op); err != nil {
			return err
		}
		app, plan, err := bindingApplyTx(ctx, tx, s.dialect, apply)
		if err != nil {
			return err
		}
		if plan.Renews != "" {
			// The renewal names the grant it renews: that makes it kind
			// RENEW (kindOf), so every later write maps its statuses.
			// Its expiry extends the grant's rather than restarting from
			// now, decided from the row it renews as this transaction
			// read it.
			if err := execOne(ctx, tx,
				"UPDATE operation"+s.dialect.forceIndex("uk_operation_operation_id")+" SET grant_operation_id = ?, expires_at = ? WHERE operation_id = ?",
				plan.Renews, s.dialect.Time(plan.Expiry), op.OperationID); err != nil {
				return fmt.Errorf("name the renewed grant: %w", err)
			}
		}
		h := plan.History
		if err := operationStepInsert(ctx, tx, s.dialect, []operationStepRow{{
			operationID: op.OperationID, toStep: int(h.To), fromBinding: h.FromBinding, toBinding: h.ToBinding,
			actor: op.Actor, note: h.Note,
		}}); err != nil {
			return err
		}
		o, err := operationGet(ctx, tx, op.OperationID)
		if err != nil {
			return fmt.Errorf("re-read operation: %w", translate(err))
		}
		res = OperationSubmitResult{Operation: o, Application: app}
		return nil
	})
	if err != nil {
		return OperationSubmitResult{}, fmt.Errorf("submit operation %s: %w", op.OperationID, err)
	}
	return res, nil
}

// apply is the binding application of p: a renewal's expiry comes from
// its terms when SubmittedAt is set.
func (p OperationSubmitParams) apply() BindingApplyParams {
	op := p.Operation
	a := BindingApplyParams{
		Subject: op.Subject, TargetKey: op.TargetKey, OperationID: op.OperationID,
		Status: p.BindingStatus, ExpiresAt: op.ExpiresAt, Renew: p.Renew,
		step: domain.StepStatus(op.Step),
	}
	if !p.SubmittedAt.IsZero() {
		a.RenewTerms = &domain.RenewalTerms{At: p.SubmittedAt, Days: op.Days, MaxDays: p.MaxDays}
	}
	return a
}

// validate checks p and its application before any write. A submission
// that starts the workflow starts from the table's entry row, both layers
// (I7).
func (p OperationSubmitParams) validate(apply BindingApplyParams) error {
	if err := p.Operation.validate(); err != nil {
		return err
	}
	if err := apply.validate(); err != nil {
		return err
	}
	if p.Operation.NextAction != "" {
		return domain.CheckEntry(domain.StepStatus(p.Operation.Step), p.BindingStatus)
	}
	return nil
}
