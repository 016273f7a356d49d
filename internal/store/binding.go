package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"changeflow/internal/domain"
)

// Binding is the one row of current state of a (subject, target)
// relationship (I5).
type Binding struct {
	ID        int64
	Subject   string
	TargetKey string
	Status    domain.BindingStatus
	// OperationID is the current owner: the request the row was last
	// applied for. A callback for any other operationId is stale.
	OperationID string
	// ExpiresAt is when the binding lapses; zero when it has no expiry.
	ExpiresAt time.Time
	// Version starts at 1 and grows by one with every write (I6).
	Version   int64
	CreatedAt time.Time
	UpdatedAt time.Time
	// Expired reports whether ExpiresAt had passed by the database clock
	// when the row was read. It is computed by the database, not by the
	// caller's clock, like every other time comparison (docs/storage.md, the database clock).
	Expired bool
}

// Reappliable reports whether a new request may reset this row in place:
// exactly domain.BindingStatus.Reappliable (REJECTED, CLOSED, REVOKED).
//
// A VALIDATED binding whose expiry has passed is deliberately not
// re-appliable, although its access has lapsed: its entry is still on the
// default branch until the expiry scan's revocation removes it. Resetting
// the row for a new request would hand the entry to a request that may be
// rejected, and then nothing would ever remove it (the binding REJECTED,
// no revocation: the access granted in the file for good). Such a row is
// refused as in progress (ExpiredAwaitingRemoval); the person asks again
// once it is REVOKED (docs/flows/lifecycle.md, "Re-applying after the expiry").
// BindingApply and the API both decide through this method.
func (b Binding) Reappliable() bool {
	return b.Status.Reappliable()
}

// ExpiredAwaitingRemoval reports whether the binding is VALIDATED with
// its expiry passed (database clock): the access has lapsed, and its
// removal is due from the expiry scan.
func (b Binding) ExpiredAwaitingRemoval() bool { return b.submitRow().ExpiredAwaitingRemoval() }

// InEffect reports whether the binding is VALIDATED and not expired: a new
// request is refused with ALREADY_IN_EFFECT, giving ExpiresAt.
func (b Binding) InEffect() bool { return b.submitRow().InEffect() }

// bindingColumns returns the select list scanBinding reads; the last
// column is the DB-clock expiry test.
func (d Dialect) bindingColumns() string { return d.bindingColumnsOf("") }

// bindingColumnsOf is bindingColumns with every column qualified by
// prefix ("b."), for a join.
func (d Dialect) bindingColumnsOf(prefix string) string {
	p := prefix
	return p + "id, " + p + "subject_id, " + p + "target_key, " + p + "status, " + p + "operation_id, " +
		p + "expires_at, " + p + "version, " + p + "created_at, " + p + "updated_at, " +
		"CASE WHEN " + p + "expires_at IS NOT NULL AND " + p + "expires_at <= " + d.Now() + " THEN 1 ELSE 0 END"
}

// scanBinding reads one row of bindingColumns.
func scanBinding(r rowScanner) (Binding, error) {
	var (
		b         Binding
		status    string
		expiresAt sql.NullTime
		expired   int
	)
	if err := r.Scan(&b.ID, &b.Subject, &b.TargetKey, &status, &b.OperationID, &expiresAt, &b.Version,
		&b.CreatedAt, &b.UpdatedAt, &expired); err != nil {
		return Binding{}, err
	}
	b.Status, b.ExpiresAt, b.Expired = domain.BindingStatus(status), expiresAt.Time, expired == 1
	return b, nil
}

// BindingGet returns the binding of (subject, targetKey), or an error
// wrapping domain.ErrNotFound when the relationship was never applied for.
func (s *Store) BindingGet(ctx context.Context, subject, targetKey string) (Binding, error) {
	b, err := bindingGet(ctx, s.db, s.dialect, subject, targetKey, "")
	if err != nil {
		return Binding{}, fmt.Errorf("get binding %s/%s: %w", subject, targetKey, translate(err))
	}
	return b, nil
}

// bindingGet reads the binding of (subject, targetKey), appending lock (a
// row-lock clause or "") to the SELECT.
func bindingGet(ctx context.Context, q queryer, d Dialect, subject, targetKey, lock string) (Binding, error) {
	return scanBinding(q.QueryRowContext(ctx,
		"SELECT "+d.bindingColumns()+" FROM binding WHERE subject_id = ? AND target_key = ?"+lock,
		subject, targetKey))
}

// BindingGetByOperation returns the binding whose current owner is
// operationID, or an error wrapping domain.ErrNotFound. Not found is the
// callback guard's answer for a stale operationId: the row was re-applied
// for a newer request.
func (s *Store) BindingGetByOperation(ctx context.Context, operationID string) (Binding, error) {
	b, err := scanBinding(s.queryRowPrepared(ctx, readBindingByOperation, func() string {
		return "SELECT " + s.dialect.bindingColumns() + " FROM binding WHERE operation_id = ?"
	}, operationID))
	if err != nil {
		return Binding{}, fmt.Errorf("get binding of operation %s: %w", operationID, translate(err))
	}
	return b, nil
}

// BindingApplication is one row of binding_history: one application for a
// relationship (the first, or an in-place reset).
type BindingApplication struct {
	ID          int64
	Subject     string
	TargetKey   string
	OperationID string
	Status      domain.BindingStatus
	ExpiresAt   time.Time
	CreatedAt   time.Time
}

// BindingHistoryList returns every application for (subject, targetKey),
// oldest first.
func (s *Store) BindingHistoryList(ctx context.Context, subject, targetKey string) ([]BindingApplication, error) {
	rows, err := s.db.QueryContext(ctx,
		"SELECT id, subject_id, target_key, operation_id, status, expires_at, created_at FROM binding_history "+
			"WHERE subject_id = ? AND target_key = ? ORDER BY id", subject, targetKey)
	if err != nil {
		return nil, fmt.Errorf("list applications of %s/%s: %w", subject, targetKey, translate(err))
	}
	defer rows.Close()
	var out []BindingApplication
	for rows.Next() {
		var (
			a         BindingApplication
			status    string
			expiresAt sql.NullTime
		)
		if err := rows.Scan(&a.ID, &a.Subject, &a.TargetKey, &a.OperationID, &status, &expiresAt, &a.CreatedAt); err != nil {
			return nil, fmt.Errorf("list applications of %s/%s: %w", subject, targetKey, err)
		}
		a.Status, a.ExpiresAt = domain.BindingStatus(status), expiresAt.Time
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list applications of %s/%s: %w", subject, targetKey, translate(err))
	}
	return out, nil
}
