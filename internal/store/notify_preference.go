package store

import (
	"context"
	"fmt"
	"maps"
	"slices"
)

// maxPreferenceKindLen is notify_preference.kind's VARCHAR(48).
const maxPreferenceKindLen = 48

// NotifyPreferences returns the kinds account chose (kind → on). A kind
// missing from the map was never chosen; what that means is the notify
// package's rule (notify.Allowed), not the store's.
func (s *Store) NotifyPreferences(ctx context.Context, account string) (map[string]bool, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT kind, enabled FROM notify_preference WHERE account = ?", account)
	if err != nil {
		return nil, fmt.Errorf("read notification preferences of %s: %w", account, translate(err))
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var (
			kind string
			on   int
		)
		if err := rows.Scan(&kind, &on); err != nil {
			return nil, fmt.Errorf("read notification preferences of %s: %w", account, err)
		}
		out[kind] = on == 1
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read notification preferences of %s: %w", account, translate(err))
	}
	return out, nil
}

// NotifyPreferencesSet records account's choices (kind → on), replacing
// earlier choices of the same kinds and leaving the others, in one
// statement: a partial write cannot leave half a save behind. The caller
// validates the kinds; an over-long kind or account is an error here.
func (s *Store) NotifyPreferencesSet(ctx context.Context, account string, set map[string]bool) error {
	if account == "" || len(account) > maxInstanceIDLen {
		return fmt.Errorf("save notification preferences: account %q is empty or too long", account)
	}
	if len(set) == 0 {
		return nil
	}
	kinds := slices.Sorted(maps.Keys(set))
	vals := make([]any, 0, 3*len(kinds))
	for _, k := range kinds {
		if k == "" || len(k) > maxPreferenceKindLen {
			return fmt.Errorf("save notification preferences of %s: kind %q is empty or too long", account, k)
		}
		on := 0
		if set[k] {
			on = 1
		}
		vals = append(vals, account, k, on)
	}
	q := "INSERT INTO notify_preference (account, kind, enabled) VALUES " + valuesRows(len(kinds), 3)
	if s.dialect.IsMySQL() {
		q += " ON DUPLICATE KEY UPDATE enabled = VALUES(enabled), updated_at = " + s.dialect.Now()
	} else {
		q += " ON CONFLICT (account, kind) DO UPDATE SET enabled = excluded.enabled, updated_at = " + s.dialect.Now()
	}
	if _, err := s.db.ExecContext(ctx, q, vals...); err != nil {
		return fmt.Errorf("save notification preferences of %s: %w", account, translate(err))
	}
	return nil
}
