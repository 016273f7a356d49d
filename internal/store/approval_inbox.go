package store

import (
	"context"
	"fmt"
	"time"
)

// ApprovalInboxPending returns up to limit operationIds whose binding
// still waits for its approval (APPROVAL_SENDING or APPROVAL_SENT, owned
// by that operation) although an approval decision for the operation was
// recorded more than minAge ago by the database clock. The HTTP layer
// records a callback before the workflow applies it, and a redelivery of a
// recorded callback is answered DUPLICATE; a process that died between the
// two therefore leaves such a row, which only a replay from the inbox
// moves on. Rows the guard refused are left out (they are never
// replayed). The binding side is a range scan of idx_binding_status_updated
// (the requests waiting for approval); each is joined to its decisions by
// idx_approval_callback_operation.
func (s *Store) ApprovalInboxPending(ctx context.Context, minAge time.Duration, limit int) ([]string, error) {
	if limit <= 0 {
		return nil, nil
	}
	before, arg := s.dialect.NowMinus(minAge)
	rows, err := s.db.QueryContext(ctx,
		"SELECT DISTINCT b.operation_id FROM binding b JOIN approval_callback c ON c.operation_id = b.operation_id"+
			" WHERE b.status IN ('APPROVAL_SENDING', 'APPROVAL_SENT') AND c.received_at < "+before+
			" AND c.disposition <> ? ORDER BY b.operation_id LIMIT ?", arg, InboxRejectedByGuard, limit)
	if err != nil {
		return nil, fmt.Errorf("pending approval decisions: %w", translate(err))
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("pending approval decisions: %w", translate(err))
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pending approval decisions: %w", translate(err))
	}
	return out, nil
}
