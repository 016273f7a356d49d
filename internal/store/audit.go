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

// AuditInsertParams is one audit record. Params must already be masked and
// length-truncated by the caller (docs/api.md, "Operations endpoints").
type AuditInsertParams struct {
	// Key dedupes the record: the same key is recorded once.
	Key      string
	Actor    string
	Action   string
	Resource string
	Params   string
	Outcome  string
	// Notify, when set, is the event the record tells of, written in the
	// same transaction and only with the record's first insert (a
	// security event's security.foreign_head).
	Notify *OutboxNew
}

// AuditRecord is one stored audit record.
type AuditRecord struct {
	ID        int64
	Key       string
	Actor     string
	Action    string
	Resource  string
	Params    string
	Outcome   string
	CreatedAt time.Time
}

// AuditInsert records p once (I4, docs/storage.md): a plain INSERT whose
// duplicate key means "already recorded" and returns inserted = false. The
// existing row is never overwritten — it may already describe a terminal
// outcome that a late retry must not replace.
//
// A plain INSERT rather than MariaDB's INSERT IGNORE: IGNORE would also
// turn a too-long value or a CHECK failure into a silent warning.
func (s *Store) AuditInsert(ctx context.Context, p AuditInsertParams) (inserted bool, err error) {
	if err := checkKey("audit key", p.Key, 128); err != nil {
		return false, fmt.Errorf("insert audit record: %w", err)
	}
	if p.Actor == "" || p.Action == "" || p.Outcome == "" {
		return false, errors.New("insert audit record: actor, action and outcome are required")
	}
	insert := func(q queryer) (bool, error) {
		return insertOnce(ctx, q,
			"INSERT INTO audit_log (audit_key, actor, action, resource, params, outcome) VALUES (?, ?, ?, ?, ?, ?)",
			p.Key, clipRunes(p.Actor, 128), clipRunes(p.Action, 64), clipRunes(p.Resource, 255),
			nullString(p.Params), clipRunes(p.Outcome, 32))
	}
	if p.Notify == nil {
		inserted, err = insert(s.db)
	} else {
		err = s.InTx(ctx, nil, func(tx *sql.Tx) error {
			if inserted, err = insert(tx); err != nil || !inserted {
				return err
			}
			return outboxAdd(ctx, tx, []OutboxNew{*p.Notify})
		})
	}
	if err != nil {
		return false, fmt.Errorf("insert audit record %q: %w", p.Key, err)
	}
	return inserted, nil
}

// AuditListByResource returns up to limit audit records of resource (an
// operationId, a batch id …), oldest first: the ops detail page's trail.
func (s *Store) AuditListByResource(ctx context.Context, resource string, limit int) ([]AuditRecord, error) {
	rows, err := s.db.QueryContext(ctx,
		"SELECT id, audit_key, actor, action, resource, params, outcome, created_at FROM audit_log "+
			"WHERE resource = ? ORDER BY id LIMIT ?", resource, max(limit, 1))
	if err != nil {
		return nil, fmt.Errorf("list audit of %q: %w", resource, translate(err))
	}
	defer rows.Close()
	var out []AuditRecord
	for rows.Next() {
		var (
			a      AuditRecord
			params sql.NullString
		)
		if err := rows.Scan(&a.ID, &a.Key, &a.Actor, &a.Action, &a.Resource, &params, &a.Outcome, &a.CreatedAt); err != nil {
			return nil, fmt.Errorf("list audit of %q: %w", resource, err)
		}
		a.Params = params.String
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list audit of %q: %w", resource, translate(err))
	}
	return out, nil
}

// insertOnce runs an INSERT whose duplicate key is an answer: it returns
// false, nil on domain.ErrDuplicate. On MariaDB and SQLite a failed
// statement leaves the surrounding transaction usable, so q may be a *sql.Tx.
func insertOnce(ctx context.Context, q queryer, query string, args ...any) (bool, error) {
	_, err := q.ExecContext(ctx, query, args...)
	if err == nil {
		return true, nil
	}
	if err = translate(err); errors.Is(err, domain.ErrDuplicate) {
		return false, nil
	}
	return false, err
}

// checkKey refuses an empty key or one longer than its VARCHAR(n) column.
// Keys are not clipped: two long keys sharing a prefix would collide into a
// false duplicate.
func checkKey(name, v string, n int) error {
	switch {
	case v == "":
		return fmt.Errorf("%s is required", name)
	case utf8.RuneCountInString(v) > n:
		return fmt.Errorf("%s longer than %d characters", name, n)
	}
	return nil
}

// nullString binds "" as NULL.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// AuditListByActionPrefix returns up to limit audit records whose action
// starts with prefix (letters, digits, dots and dashes only: no LIKE
// wildcard), newest first: GET /ops/security-events. There is no index on
// action: the read walks audit_log backwards by id until it has limit
// records, which is short when the records asked for are recent — an
// operator's page, not user traffic.
func (s *Store) AuditListByActionPrefix(ctx context.Context, prefix string, limit int) ([]AuditRecord, error) {
	for _, r := range prefix {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-') {
			return nil, fmt.Errorf("list audit by action: prefix %q may hold letters, digits, dots and dashes only", prefix)
		}
	}
	rows, err := s.db.QueryContext(ctx,
		"SELECT id, audit_key, actor, action, resource, params, outcome, created_at FROM audit_log "+
			"WHERE action LIKE ? ORDER BY id DESC LIMIT ?", prefix+"%", max(limit, 1))
	if err != nil {
		return nil, fmt.Errorf("list audit by action %q: %w", prefix, translate(err))
	}
	defer rows.Close()
	var out []AuditRecord
	for rows.Next() {
		var (
			a      AuditRecord
			params sql.NullString
		)
		if err := rows.Scan(&a.ID, &a.Key, &a.Actor, &a.Action, &a.Resource, &params, &a.Outcome, &a.CreatedAt); err != nil {
			return nil, fmt.Errorf("list audit by action %q: %w", prefix, err)
		}
		a.Params = params.String
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list audit by action %q: %w", prefix, translate(err))
	}
	return out, nil
}
