package store

import (
	"context"
	"fmt"
	"time"

	"changeflow/internal/domain"
)

// OperationOwner is who and what an operation was for: enough to tell
// whether an entry of a binding file is one changeflow wrote (an entry
// names the operation that wrote it).
type OperationOwner struct {
	OperationID string
	Subject     string
	TargetKey   string
	Kind        domain.OperationKind
}

// OperationOwnersOf returns the owners of the operations ids names
// (unknown ids are absent), in one statement per InChunkSize ids on the
// operation_id unique key — a file's entries are checked together, not
// one read each.
func (s *Store) OperationOwnersOf(ctx context.Context, ids []string) ([]OperationOwner, error) {
	var out []OperationOwner
	for start := 0; start < len(ids); start += InChunkSize {
		chunk := ids[start:min(start+InChunkSize, len(ids))]
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		rows, err := s.db.QueryContext(ctx,
			"SELECT operation_id, subject, target_key, kind FROM operation WHERE operation_id IN ("+placeholders(len(chunk))+")", args...)
		if err != nil {
			return nil, fmt.Errorf("read operation owners: %w", translate(err))
		}
		for rows.Next() {
			var o OperationOwner
			if err := rows.Scan(&o.OperationID, &o.Subject, &o.TargetKey, &o.Kind); err != nil {
				rows.Close()
				return nil, fmt.Errorf("read operation owners: %w", err)
			}
			out = append(out, o)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("read operation owners: %w", translate(err))
		}
	}
	return out, nil
}

// DatabaseNow is the database clock (Dialect.Now), the clock every expiry
// is judged by: a read that says what has expired uses it, so it agrees
// with the expiry scan whatever the skew between application hosts.
func (s *Store) DatabaseNow(ctx context.Context) (time.Time, error) {
	var v any
	if err := s.db.QueryRowContext(ctx, "SELECT "+s.dialect.Now()).Scan(&v); err != nil {
		return time.Time{}, fmt.Errorf("read the database clock: %w", translate(err))
	}
	return clockValue(v)
}

// clockValue is the database clock as the driver handed it over: a
// time.Time (MariaDB) or the text of SQLite's strftime.
func clockValue(v any) (time.Time, error) {
	switch x := v.(type) {
	case time.Time:
		return x.UTC(), nil
	case string:
		return parseClock(x)
	case []byte:
		return parseClock(string(x))
	}
	return time.Time{}, fmt.Errorf("read the database clock: unexpected %T", v)
}

// parseClock reads a clock value the driver returned as text: SQLite's
// strftime layout (an expression has no declared type to convert by), or
// MariaDB's DATETIME(6) text.
func parseClock(v string) (time.Time, error) {
	for _, layout := range []string{sqliteTimeLayout, "2006-01-02 15:04:05.999999"} {
		if t, err := time.ParseInLocation(layout, v, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("read the database clock: %q is not a time", v)
}
