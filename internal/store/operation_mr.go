package store

import (
	"context"
	"fmt"
)

// OperationListByMR returns the operations whose MR is (projectID, mrIID),
// oldest first: one for a single-request MR, every member for a batch MR.
// The deploy callback matches exactly through it (not by a
// watermark), using idx_operation_mr.
func (s *Store) OperationListByMR(ctx context.Context, projectID, mrIID int64) ([]Operation, error) {
	rows, err := s.db.QueryContext(ctx,
		"SELECT "+operationColumns+" FROM operation WHERE project_id = ? AND mr_iid = ? ORDER BY id", projectID, mrIID)
	if err != nil {
		return nil, fmt.Errorf("list operations of MR %d!%d: %w", projectID, mrIID, translate(err))
	}
	defer rows.Close()
	var out []Operation
	for rows.Next() {
		o, err := scanOperation(rows)
		if err != nil {
			return nil, fmt.Errorf("list operations of MR %d!%d: %w", projectID, mrIID, err)
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list operations of MR %d!%d: %w", projectID, mrIID, translate(err))
	}
	return out, nil
}

// DeployCallbackSeen reports whether a SUCCESS deploy callback for
// (projectID, mrIID) was recorded (idx_deploy_callback_mr) that counts: a
// callback classified UNKNOWN_MR never does — one
// sent ahead for an MR iid changeflow had not reached yet must not
// validate that MR once changeflow merges it. The merge step asks after
// it wrote MERGED: a callback that arrived while the binding was still
// MERGING (EARLY) found nothing to flip, and is acted on then.
func (s *Store) DeployCallbackSeen(ctx context.Context, projectID, mrIID int64) (bool, error) {
	var n int
	err := s.db.QueryRowContext(ctx,
		"SELECT COUNT(*) FROM deploy_callback WHERE project_id = ? AND mr_iid = ? AND UPPER(status) = 'SUCCESS'"+
			" AND disposition NOT IN "+deployUncounted, projectID, mrIID).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("look up deploy callback of MR %d!%d: %w", projectID, mrIID, translate(err))
	}
	return n > 0, nil
}
