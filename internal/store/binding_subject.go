package store

import (
	"context"
	"fmt"
)

// BindingListBySubject returns every binding of subject, one per target
// the subject ever applied for, ordered by target key: what the Targets
// page shows a person about themselves (GET /api/targets, "mine") in one
// statement on the (subject_id, target_key) unique key, rather than one
// read per configured target.
func (s *Store) BindingListBySubject(ctx context.Context, subject string) ([]Binding, error) {
	rows, err := s.db.QueryContext(ctx,
		"SELECT "+s.dialect.bindingColumns()+" FROM binding WHERE subject_id = ? ORDER BY target_key", subject)
	if err != nil {
		return nil, fmt.Errorf("list bindings of %s: %w", subject, translate(err))
	}
	defer rows.Close()
	var out []Binding
	for rows.Next() {
		b, err := scanBinding(rows)
		if err != nil {
			return nil, fmt.Errorf("list bindings of %s: %w", subject, err)
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list bindings of %s: %w", subject, translate(err))
	}
	return out, nil
}
