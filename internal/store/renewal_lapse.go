package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"changeflow/internal/domain"
)

// A renewal that stopped on a failure (waiting for an operator's
// retrigger) keeps its binding RENEWING; without this, the access would
// stay granted past the grant's expiry for as long as nobody looks at it.
// The expiry scan withdraws such a renewal once its grant has expired
// (docs/workflow.md, "Renewal"): the renewal moves to RENEW_EXPIRED with
// the withdraw action due, which closes its MR and hands the row back to
// the grant — VALIDATED and expired, so the next scan revokes it — or
// finds the MR merged and lets the renewal follow its merge ("merged
// wins": it is then in effect with its new expiry). The binding is not
// moved here: until the MR is known closed, a merge by hand could still
// put the renewal's entry on main, and the row must still want it.

// RenewalLapsed is a stopped renewal whose grant has expired, as read.
type RenewalLapsed struct {
	// Renewal is the renewal's operationId, Step and Version as read.
	Renewal string
	Step    int
	Version int64
	// GrantOperationID is the grant it renews.
	GrantOperationID string
	Subject          string
	TargetKey        string
}

// renewalLapsable are the steps a stopped renewal may be withdrawn from
// by the scan: every stopped step (failed or pending) from which the
// transition table lets a renewal move to RENEW_EXPIRED — the table
// decides, so a step added there is covered here.
func renewalLapsable() []domain.StepStatus {
	var out []domain.StepStatus
	for _, s := range domain.Steps() {
		if s.Stopped() && slices.Contains(domain.StepNext(s), domain.StepRenewExpired) {
			out = append(out, s)
		}
	}
	return out
}

// RenewalLapsedCandidates returns up to limit renewals that stopped on a
// failure outside a batch — no lease, nothing due, no batch, no waiting
// row — on a RENEWING binding whose grant's expires_at has passed by the
// database clock, in (expires_at, id) order on idx_binding_status_expires.
// Rare, so one statement per scan. A member of an active batch is left
// to its batch (settlement re-admits it, or an operator unblocks it).
func (s *Store) RenewalLapsedCandidates(ctx context.Context, limit int) ([]RenewalLapsed, error) {
	if limit <= 0 || limit > InChunkSize {
		limit = InChunkSize
	}
	d := s.dialect
	steps := renewalLapsable()
	args := []any{string(domain.BindingRenewing)}
	for _, st := range steps {
		args = append(args, int(st))
	}
	args = append(args, limit)
	rows, err := s.db.QueryContext(ctx,
		"SELECT o.operation_id, o.step_status, o.version, o.grant_operation_id, b.subject_id, b.target_key"+
			" FROM binding b"+d.forceIndex("idx_binding_status_expires")+
			" JOIN operation o ON o.operation_id = b.operation_id"+
			" WHERE b.status = ? AND b.expires_at IS NOT NULL AND b.expires_at <= "+d.Now()+
			" AND o.grant_operation_id IS NOT NULL AND o.step_status IN ("+placeholders(len(steps))+")"+
			" AND o.batch_id IS NULL AND o.due_at IS NULL AND o.lease_owner IS NULL"+
			" AND NOT EXISTS (SELECT 1 FROM merge_batch_request m WHERE m.operation_id = o.operation_id)"+
			" ORDER BY b.expires_at, b.id LIMIT ?", args...)
	if err != nil {
		return nil, fmt.Errorf("stopped renewals of expired grants: %w", translate(err))
	}
	defer rows.Close()
	var out []RenewalLapsed
	for rows.Next() {
		var c RenewalLapsed
		if err := rows.Scan(&c.Renewal, &c.Step, &c.Version, &c.GrantOperationID, &c.Subject, &c.TargetKey); err != nil {
			return nil, fmt.Errorf("stopped renewals of expired grants: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("stopped renewals of expired grants: %w", translate(err))
	}
	return out, nil
}

// RenewalLapseParams withdraws Rows for the expiry scan.
type RenewalLapseParams struct {
	// Action is made due at once on each (the workflow's withdraw).
	Action string
	Actor  string
	Rows   []RenewalLapsed
}

// RenewalLapse moves every row to RENEW_EXPIRED with p.Action due, in one
// transaction and one guarded UPDATE (the step and version read, still
// stopped: no lease, nothing due, no batch) plus their history. A row an
// operator retriggered meanwhile fails the guard and the whole call
// rolls back (domain.ErrPreempted): the next scan reads again, and a
// retriggered renewal is no longer stopped. Every move is checked against
// the transition table first (I7).
func (s *Store) RenewalLapse(ctx context.Context, p RenewalLapseParams) error {
	if p.Action == "" {
		return errors.New("lapse renewals: the action is required")
	}
	if len(p.Rows) == 0 {
		return nil
	}
	if len(p.Rows) > InChunkSize {
		return fmt.Errorf("lapse renewals: at most %d rows", InChunkSize)
	}
	var checks []error
	for _, r := range p.Rows {
		checks = append(checks, domain.CheckStep(domain.StepStatus(r.Step), domain.StepRenewExpired))
	}
	if err := errors.Join(checks...); err != nil {
		return fmt.Errorf("lapse renewals: %w", err)
	}
	d := s.dialect
	steps := renewalLapsable()
	err := s.InTx(ctx, nil, func(tx *sql.Tx) error {
		due, dueArg := d.NowAdd(0)
		args := []any{int(domain.StepRenewExpired), p.Action, dueArg}
		for _, st := range steps {
			args = append(args, int(st))
		}
		var hist []operationStepRow
		for _, r := range p.Rows {
			args = append(args, r.Renewal, r.Version)
			hist = append(hist, operationStepRow{operationID: r.Renewal, fromStep: r.Step, toStep: int(domain.StepRenewExpired), actor: p.Actor,
				note: fmt.Sprintf("the grant %s expired while this renewal was stopped at %s: expiry wins; its MR is closed and the access revoked (merged wins)",
					r.GrantOperationID, domain.StepStatus(r.Step))})
		}
		if err := execN(ctx, tx, int64(len(p.Rows)),
			"UPDATE operation"+d.forceIndex("uk_operation_operation_id")+" SET step_status = ?, version = version + 1,"+
				" next_action = ?, due_at = "+due+", attempts = 0, lease_owner = NULL, lease_expires_at = NULL, expedite_action = NULL"+
				" WHERE step_status IN ("+placeholders(len(steps))+") AND batch_id IS NULL AND due_at IS NULL AND lease_owner IS NULL AND "+
				d.keyTuplesIn(len(p.Rows), "operation_id", "version"), args...); err != nil {
			return fmt.Errorf("move stopped renewals to RENEW_EXPIRED: %w", err)
		}
		return operationStepInsert(ctx, tx, hist)
	})
	if err != nil {
		return fmt.Errorf("lapse renewals: %w", err)
	}
	return nil
}
