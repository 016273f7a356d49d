package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"changeflow/internal/domain"
)

// A renewal that may have an MR of its own when its grant expires —
// stopped on a failure (waiting for an operator's retrigger), or still
// running outside a batch: its MR being built or checked, waiting for
// its approval on the legacy flow, approved and being merged — keeps its
// binding RENEWING; without a cut, the access would stay granted past the
// grant's expiry for as long as the renewal runs or nobody looks at it.
// The expiry scan withdraws such a renewal once its grant has expired
// (docs/flows/lifecycle.md, "Renewal"): the renewal moves to RENEW_EXPIRED with
// the withdraw action due, which withdraws its approval, closes its MR and
// hands the row back to the grant — VALIDATED and expired, so the next
// scan revokes it — or finds the MR merged and lets the renewal follow
// its merge ("merged wins": it is then in effect with its new expiry).
// The binding is not moved here: until the MR is known closed, a merge
// (by the renewal's own step still in its call, or by hand) could still
// put the renewal's entry on main, and the row must still want it.

// RenewalLapsed is a renewal of an expired grant to withdraw, as read
// (ExpiredRenewal.Lapsed).
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

// renewalLapsable are the steps a renewal may be withdrawn from by the
// scan: every step from which the transition table lets it move to
// RENEW_EXPIRED except the batch set's (cut with the revocation, which
// takes it out of the set) — the table decides, so a step added there is
// covered here.
func renewalLapsable() []domain.StepStatus {
	var out []domain.StepStatus
	for _, s := range domain.ExpiryCutSteps() {
		if s != domain.StepCreateAdmitted {
			out = append(out, s)
		}
	}
	return out
}

// RenewalLapseParams withdraws Rows for the expiry scan.
type RenewalLapseParams struct {
	// Action is made due at once on each (the workflow's withdraw).
	Action string
	Actor  string
	Rows   []RenewalLapsed
}

// RenewalLapse moves every row to RENEW_EXPIRED with p.Action due at
// once, in one transaction and one guarded UPDATE (the step and version
// read, at a step it may leave from, no active batch, no waiting row) plus their
// history. The lease of a step still running is cleared, as a withdrawal
// does: that step's outcome can no longer be written (its write is
// guarded on its lease), and whatever its call did upstream is what the
// withdraw action finds and undoes (or follows, merged). A row that moved
// meanwhile — an operator's retrigger, its approval or a step's outcome
// written — fails the guard and the whole call rolls back
// (domain.ErrPreempted): the next scan reads again and decides on the new
// place. Every move is checked against the transition table first (I7).
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
		args = append(args, int(domain.BatchRunning), int(domain.BatchBlocked))
		var hist []operationStepRow
		for _, r := range p.Rows {
			args = append(args, r.Renewal, r.Version)
			hist = append(hist, operationStepRow{operationID: r.Renewal, fromStep: r.Step, toStep: int(domain.StepRenewExpired), actor: p.Actor,
				note: fmt.Sprintf("the grant %s expired while this renewal was %s at %s: expiry wins; its MR is closed and the access revoked (merged wins)",
					r.GrantOperationID, map[bool]string{true: "stopped", false: "still running"}[domain.StepStatus(r.Step).Stopped()], domain.StepStatus(r.Step))})
		}
		if err := execN(ctx, tx, int64(len(p.Rows)),
			"UPDATE operation"+d.forceIndex("uk_operation_operation_id")+" SET step_status = ?, version = version + 1,"+
				" next_action = ?, due_at = "+due+", attempts = 0, lease_owner = NULL, lease_expires_at = NULL, expedite_action = NULL, last_error = NULL"+
				" WHERE step_status IN ("+placeholders(len(steps))+") AND "+notInActiveBatch("operation")+
				" AND NOT EXISTS (SELECT 1 FROM merge_batch_request m WHERE m.operation_id = operation.operation_id) AND "+
				d.keyTuplesIn(len(p.Rows), "operation_id", "version"), args...); err != nil {
			return fmt.Errorf("move renewals of expired grants to RENEW_EXPIRED: %w", err)
		}
		return operationStepInsert(ctx, tx, d, hist)
	})
	if err != nil {
		return fmt.Errorf("lapse renewals: %w", err)
	}
	return nil
}
