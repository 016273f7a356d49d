package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"changeflow/internal/domain"
)

// AccessInterval is one period in which Subject had access to TargetKey
// (docs/storage.md, "access_interval"): [From, Until), Until zero while
// the access lasts.
type AccessInterval struct {
	ID        int64
	Subject   string
	TargetKey string
	From      time.Time
	// Until is zero while the period is open (the access lasts).
	Until time.Time
	// Source is AccessSourceChangeflow or AccessSourceRepo.
	Source string
	// OperationID is the grant or renewal whose confirmation opened the
	// period; ApprovalID its approval ("" for none), MRIID its MR (its
	// batch's for a batch member, 0 when unknown), MergeSHA the merge
	// commit ("" when unknown).
	OperationID string
	ApprovalID  string
	MRIID       int64
	MergeSHA    string
	// EndOperationID is the operation whose effect ended the period: the
	// removal, or the renewal that replaced it; "" while open.
	EndOperationID string
	// EndSHA is the commit that removed a repo period's entry ("" for
	// changeflow's periods and while open).
	EndSHA string
}

// Open reports whether the period still lasts.
func (a AccessInterval) Open() bool { return a.Until.IsZero() }

// MaxAccessHistory bounds the periods one AccessHistory call returns.
const MaxAccessHistory = 1000

// accessColumns is the select list scanAccess reads, in order.
const accessColumns = "id, subject, target_key, from_at, until_at, source, operation_id, approval_id, mr_iid, merge_sha, end_operation_id, end_sha"

// AccessAtTarget returns who had access to target at instant at: every
// period with from ≤ at < until, by subject. One range read of
// idx_access_interval_target: the rows of the target whose end (the open
// end the largest time) is after at, of which the index itself filters
// those starting after at.
func (s *Store) AccessAtTarget(ctx context.Context, target string, at time.Time) ([]AccessInterval, error) {
	return s.accessQuery(ctx, "access of "+target, s.accessAtQuery("target_key", "idx_access_interval_target", "subject"),
		target, s.dialect.Time(at), s.dialect.Time(at))
}

// accessAtQuery is the "at" read by col (target_key or subject) on index,
// ordered by other: its rows are few (one per subject or target at most,
// per source), so the sort after the range read costs next to nothing.
func (s *Store) accessAtQuery(col, index, other string) string {
	return " FROM access_interval" + s.dialect.forceIndex(index) +
		" WHERE " + col + " = ? AND until_key > ? AND from_at <= ? ORDER BY " + other + ", from_at, id"
}

// AccessAtSubject returns what subject had access to at instant at, by
// target; one range read of idx_access_interval_subject.
func (s *Store) AccessAtSubject(ctx context.Context, subject string, at time.Time) ([]AccessInterval, error) {
	return s.accessQuery(ctx, "access of "+subject, s.accessAtQuery("subject", "idx_access_interval_subject", "target_key"),
		subject, s.dialect.Time(at), s.dialect.Time(at))
}

// AccessHistory returns every period of target overlapping [from, to)
// — from_at < to and until > from — oldest first, at most limit of them
// (1..MaxAccessHistory); more reports whether there were more. One range
// read of idx_access_interval_target.
func (s *Store) AccessHistory(ctx context.Context, target string, from, to time.Time, limit int) (items []AccessInterval, more bool, err error) {
	if limit < 1 || limit > MaxAccessHistory {
		return nil, false, fmt.Errorf("access history of %s: limit %d is not in 1..%d", target, limit, MaxAccessHistory)
	}
	if !from.Before(to) {
		return nil, false, fmt.Errorf("access history of %s: %s is not before %s", target, from, to)
	}
	items, err = s.accessQuery(ctx, "access history of "+target, s.accessHistoryQuery(),
		target, s.dialect.Time(from), s.dialect.Time(to), limit+1)
	if err != nil {
		return nil, false, err
	}
	if len(items) > limit {
		return items[:limit], true, nil
	}
	return items, false, nil
}

// accessHistoryQuery is AccessHistory's read: the range of the target's
// periods ending after from, filtered in the index to those starting
// before to, sorted oldest first.
func (s *Store) accessHistoryQuery() string {
	return " FROM access_interval" + s.dialect.forceIndex("idx_access_interval_target") +
		" WHERE target_key = ? AND until_key > ? AND from_at < ? ORDER BY from_at, id LIMIT ?"
}

// AccessOfOperation returns the period the grant or renewal operationID
// opened, or an error wrapping domain.ErrNotFound when it opened none
// (not in effect yet, or never).
func (s *Store) AccessOfOperation(ctx context.Context, operationID string) (AccessInterval, error) {
	items, err := s.accessQuery(ctx, "access of "+operationID,
		" FROM access_interval"+s.dialect.forceIndex("idx_access_interval_operation")+
			" WHERE operation_id = ? AND source = ? ORDER BY id DESC LIMIT 1", operationID, AccessSourceChangeflow)
	if err != nil {
		return AccessInterval{}, err
	}
	if len(items) == 0 {
		return AccessInterval{}, fmt.Errorf("access of %s: %w", operationID, domain.ErrNotFound)
	}
	return items[0], nil
}

// accessQuery runs "SELECT accessColumns" + rest and scans every row.
func (s *Store) accessQuery(ctx context.Context, what, rest string, vals ...any) ([]AccessInterval, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT "+accessColumns+rest, vals...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, translate(err))
	}
	defer rows.Close()
	out := []AccessInterval{}
	for rows.Next() {
		a, err := scanAccess(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, translate(err))
	}
	return out, nil
}

// scanAccess reads one row of accessColumns.
func scanAccess(r rowScanner) (AccessInterval, error) {
	var (
		a                    AccessInterval
		from, until          dbTime
		op, appr, sha, endOp sql.NullString
		endSHA               sql.NullString
		mr                   sql.NullInt64
	)
	if err := r.Scan(&a.ID, &a.Subject, &a.TargetKey, &from, &until, &a.Source, &op, &appr, &mr, &sha, &endOp, &endSHA); err != nil {
		return AccessInterval{}, err
	}
	if !from.valid {
		return AccessInterval{}, errors.New("period without a start")
	}
	a.From, a.Until = from.t, until.t
	a.OperationID, a.ApprovalID, a.MRIID, a.MergeSHA, a.EndOperationID = op.String, appr.String, mr.Int64, sha.String, endOp.String
	a.EndSHA = endSHA.String
	return a, nil
}
