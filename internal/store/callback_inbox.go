package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// ApprovalCallbackRecord is one recorded approval callback delivery.
type ApprovalCallbackRecord struct {
	DeliveryKey string
	OperationID string
	ApprovalID  string
	Result      string
	ReceivedAt  time.Time
}

// ApprovalCallbackLatest returns the latest recorded approval callback
// for operationID (idx_approval_callback_operation); ok is false when
// there is none. The workflow reads it when it looks at a request waiting
// for its approval: a decision that was recorded but not acted on (the
// sink failed, or none was wired) is applied from here.
func (s *Store) ApprovalCallbackLatest(ctx context.Context, operationID string) (ApprovalCallbackRecord, bool, error) {
	var r ApprovalCallbackRecord
	err := s.db.QueryRowContext(ctx,
		"SELECT delivery_key, operation_id, approval_id, result, received_at FROM approval_callback "+
			"WHERE operation_id = ? ORDER BY id DESC LIMIT 1", operationID).
		Scan(&r.DeliveryKey, &r.OperationID, &r.ApprovalID, &r.Result, &r.ReceivedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return ApprovalCallbackRecord{}, false, nil
	}
	if err != nil {
		return ApprovalCallbackRecord{}, false, fmt.Errorf("latest approval callback of %s: %w", operationID, translate(err))
	}
	return r, true, nil
}

// ApprovalCallbackList returns operationID's recorded approval callbacks,
// newest first, at most limit (the operations console's view of the
// inbox). The newest is the one ApprovalCallbackLatest returns, so the
// one an operator's replay applies.
func (s *Store) ApprovalCallbackList(ctx context.Context, operationID string, limit int) ([]ApprovalCallbackRecord, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("approval callbacks of %s: limit must be positive, is %d", operationID, limit)
	}
	rows, err := s.db.QueryContext(ctx,
		"SELECT delivery_key, operation_id, approval_id, result, received_at FROM approval_callback "+
			"WHERE operation_id = ? ORDER BY id DESC LIMIT ?", operationID, limit)
	if err != nil {
		return nil, fmt.Errorf("approval callbacks of %s: %w", operationID, translate(err))
	}
	defer rows.Close()
	var out []ApprovalCallbackRecord
	for rows.Next() {
		var r ApprovalCallbackRecord
		if err := rows.Scan(&r.DeliveryKey, &r.OperationID, &r.ApprovalID, &r.Result, &r.ReceivedAt); err != nil {
			return nil, fmt.Errorf("approval callbacks of %s: %w", operationID, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("approval callbacks of %s: %w", operationID, translate(err))
	}
	return out, nil
}
