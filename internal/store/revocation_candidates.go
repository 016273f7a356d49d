package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"changeflow/internal/domain"
)

// RevocationCandidate is a VALIDATED binding a revocation may end, with
// what creating the revocation needs of it and of its grant.
type RevocationCandidate struct {
	BindingID      int64
	BindingVersion int64
	Subject        string
	TargetKey      string
	// GrantOperationID is the binding's owner: the grant whose entry the
	// revocation removes.
	GrantOperationID string
	ProjectID        int64
	ExpiresAt        time.Time
	// Renewal is, for a RENEWING binding, the renewal that owns it and
	// that the revocation cuts off (expiry wins over a renewal not in
	// effect; ending the access wins over extending it), with the step
	// and version it was read at; "" otherwise. A renewal read at
	// CREATE_ADMITTED (approved, in the batch set) is also taken out of
	// the waiting set, guarded on no round having claimed it.
	Renewal        string
	RenewalStep    int
	RenewalVersion int64
}

// ExpiredCursor is where the expiry scan's next chunk starts: after the
// binding (ExpiresAt, ID) in the index order. The zero cursor is the start.
type ExpiredCursor struct {
	ExpiresAt time.Time
	ID        int64
}

// RevocationCandidatesExpired returns up to limit VALIDATED bindings whose
// expires_at has passed by the database clock, after cursor, in
// (expires_at, id) order — one range of idx_binding_status_expires (status,
// expires_at, id), with the grant's project read through the operation's
// unique key in the same statement. It returns the cursor of the last row
// for the next chunk.
func (s *Store) RevocationCandidatesExpired(ctx context.Context, after ExpiredCursor, limit int) ([]RevocationCandidate, ExpiredCursor, error) {
	if limit <= 0 || limit > InChunkSize {
		limit = InChunkSize
	}
	d := s.dialect
	q := "SELECT b.id, b.version, b.subject_id, b.target_key, b.operation_id, b.expires_at, o.project_id" +
		" FROM binding b" + d.forceIndex("idx_binding_status_expires") +
		" JOIN operation o ON o.operation_id = b.operation_id" +
		" WHERE b.status = ? AND b.expires_at IS NOT NULL AND b.expires_at <= " + d.Now()
	args := []any{string(domain.BindingValidated)}
	if !after.ExpiresAt.IsZero() {
		// The keyset: SQLite plans the row-value comparison as a range of
		// the index; MariaDB plans the expanded form better (and the
		// FORCE INDEX keeps it on the index either way).
		at := d.Time(after.ExpiresAt)
		if d.IsMySQL() {
			q += " AND (b.expires_at > ? OR (b.expires_at = ? AND b.id > ?))"
			args = append(args, at, at, after.ID)
		} else {
			q += " AND (b.expires_at, b.id) > (?, ?)"
			args = append(args, at, after.ID)
		}
	}
	q += " ORDER BY b.expires_at, b.id LIMIT ?"
	args = append(args, limit)
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, after, fmt.Errorf("expired bindings: %w", translate(err))
	}
	defer rows.Close()
	var out []RevocationCandidate
	for rows.Next() {
		var c RevocationCandidate
		if err := rows.Scan(&c.BindingID, &c.BindingVersion, &c.Subject, &c.TargetKey, &c.GrantOperationID, &c.ExpiresAt, &c.ProjectID); err != nil {
			return nil, after, fmt.Errorf("expired bindings: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, after, fmt.Errorf("expired bindings: %w", translate(err))
	}
	if len(out) > 0 {
		last := out[len(out)-1]
		after = ExpiredCursor{ExpiresAt: last.ExpiresAt, ID: last.BindingID}
	}
	return out, after, nil
}

// ExpiredRenewal is a renewal whose grant's expiry has passed while the
// renewal owns the row (RENEWING), as the expiry scan read it: the
// grant's revocation candidate (Renewal and its step and version set)
// and where the renewal is, for domain.ExpiryCutOf.
type ExpiredRenewal struct {
	RevocationCandidate
	MRIID int64
	// InSet: it has a waiting-set row no round has claimed.
	InSet bool
}

// Place is where the renewal is, for domain.ExpiryCutOf. A renewal read
// here is never claimed: the read leaves claimed ones to their batch.
func (e ExpiredRenewal) Place() domain.RenewalPlace {
	return domain.RenewalPlace{Step: domain.StepStatus(e.RenewalStep), HasMR: e.MRIID != 0, InSet: e.InSet}
}

// Lapsed is the row RenewalLapse withdraws for this renewal.
func (e ExpiredRenewal) Lapsed() RenewalLapsed {
	return RenewalLapsed{Renewal: e.Renewal, Step: e.RenewalStep, Version: e.RenewalVersion,
		GrantOperationID: e.GrantOperationID, Subject: e.Subject, TargetKey: e.TargetKey}
}

// notInActiveBatch is the condition "operation alias is no member of an
// active (RUNNING or BLOCKED) batch", with two placeholders for those
// statuses. operation.batch_id keeps the last batch that linked the
// operation to its MR after that batch ended (a member re-admitted to the
// waiting set still names it), so the batch's status decides, not the
// column alone.
func notInActiveBatch(alias string) string {
	return "NOT EXISTS (SELECT 1 FROM merge_batch mb WHERE mb.id = " + alias + ".batch_id AND mb.status IN (?, ?))"
}

// ExpiredRenewals returns up to limit RENEWING bindings whose grant's
// expires_at has passed by the database clock, with their renewal at a
// step a cut may leave from (domain.ExpiryCutSteps) and not claimed by a
// batch round (no claimed waiting row, no active batch: a claimed renewal
// is left to its batch, domain.ExpiryCutLeftToBatch), in (expires_at, id)
// order on idx_binding_status_expires. The caller decides per row
// (domain.ExpiryCutOf) and applies: RevocationCreate for the rows without
// an MR, RenewalLapse for the others. Rare (a renewal not in effect past
// its grant's expiry), so one statement per scan, not chunked by a
// cursor.
func (s *Store) ExpiredRenewals(ctx context.Context, limit int) ([]ExpiredRenewal, error) {
	if limit <= 0 || limit > InChunkSize {
		limit = InChunkSize
	}
	d := s.dialect
	steps := domain.ExpiryCutSteps()
	args := []any{string(domain.BindingRenewing)}
	for _, st := range steps {
		args = append(args, int(st))
	}
	args = append(args, int(domain.BatchRunning), int(domain.BatchBlocked), limit)
	rows, err := s.db.QueryContext(ctx,
		"SELECT b.id, b.version, b.subject_id, b.target_key, o.grant_operation_id, b.expires_at, o.project_id, o.operation_id, o.step_status, o.version,"+
			" COALESCE(o.mr_iid, 0), m.operation_id IS NOT NULL"+
			" FROM binding b"+d.forceIndex("idx_binding_status_expires")+
			" JOIN operation o ON o.operation_id = b.operation_id"+
			" LEFT JOIN merge_batch_request m ON m.operation_id = o.operation_id"+
			" WHERE b.status = ? AND b.expires_at IS NOT NULL AND b.expires_at <= "+d.Now()+
			" AND o.grant_operation_id IS NOT NULL AND o.step_status IN ("+placeholders(len(steps))+")"+
			" AND m.batch_id IS NULL AND "+notInActiveBatch("o")+
			" ORDER BY b.expires_at, b.id LIMIT ?", args...)
	if err != nil {
		return nil, fmt.Errorf("renewals of expired grants: %w", translate(err))
	}
	defer rows.Close()
	var out []ExpiredRenewal
	for rows.Next() {
		var c ExpiredRenewal
		if err := rows.Scan(&c.BindingID, &c.BindingVersion, &c.Subject, &c.TargetKey, &c.GrantOperationID, &c.ExpiresAt, &c.ProjectID,
			&c.Renewal, &c.RenewalStep, &c.RenewalVersion, &c.MRIID, &c.InSet); err != nil {
			return nil, fmt.Errorf("renewals of expired grants: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("renewals of expired grants: %w", translate(err))
	}
	return out, nil
}

// RevocationCandidateOf returns the binding grantOperationID owns as a
// candidate, whatever its status (the caller decides what a status other
// than VALIDATED means), or an error wrapping domain.ErrNotFound.
func (s *Store) RevocationCandidateOf(ctx context.Context, grantOperationID string) (RevocationCandidate, domain.BindingStatus, error) {
	var (
		c      RevocationCandidate
		status string
		exp    sql.NullTime
	)
	err := s.db.QueryRowContext(ctx,
		"SELECT b.id, b.version, b.subject_id, b.target_key, b.operation_id, b.expires_at, o.project_id, b.status"+
			" FROM binding b JOIN operation o ON o.operation_id = b.operation_id WHERE b.operation_id = ?", grantOperationID).
		Scan(&c.BindingID, &c.BindingVersion, &c.Subject, &c.TargetKey, &c.GrantOperationID, &exp, &c.ProjectID, &status)
	if err != nil {
		return RevocationCandidate{}, "", fmt.Errorf("binding of %s: %w", grantOperationID, translate(err))
	}
	c.ExpiresAt = exp.Time
	return c, domain.BindingStatus(status), nil
}
