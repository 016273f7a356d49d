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
