package store

import (
	"context"
	"fmt"
)

// MaxRenewalsRead bounds OperationRenewalsOf's page.
const MaxRenewalsRead = 100

// OperationRenewalsOfParams selects the renewals of one grant.
type OperationRenewalsOfParams struct {
	// GrantOperationID is the grant (or renewal) renewed.
	GrantOperationID string
	// Limit is how many renewals to return, newest first: 1 to
	// MaxRenewalsRead (clamped).
	Limit int
}

// OperationRenewalsOf returns the renewals of p.GrantOperationID — the
// operations stored as kind GRANT whose grant_operation_id names it, read
// back as domain.OperationRenew — newest first, at most p.Limit; none is
// not an error. Its revocation (kind REVOKE, which names the grant too) is
// not one of them.
//
// One statement on idx_operation_grant (grant_operation_id, id), read
// backwards for the order, so no sort: the status read of an old grant
// follows its chain of renewals one link per call (docs/flows/lifecycle.md, "The
// old request's page"). Pinned to that index like the guarded writes
// (Dialect.forceIndex), because the planner has nothing else to choose
// from on a column that is NULL on most rows and a wrong choice here would
// scan the operation table once per link.
func (s *Store) OperationRenewalsOf(ctx context.Context, p OperationRenewalsOfParams) ([]Operation, error) {
	limit := min(max(p.Limit, 1), MaxRenewalsRead)
	rows, err := s.db.QueryContext(ctx, s.operationRenewalsOfQuery(), p.GrantOperationID, limit)
	if err != nil {
		return nil, fmt.Errorf("renewals of %s: %w", p.GrantOperationID, translate(err))
	}
	defer rows.Close()
	var out []Operation
	for rows.Next() {
		o, err := scanOperation(rows)
		if err != nil {
			return nil, fmt.Errorf("renewals of %s: %w", p.GrantOperationID, translate(err))
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("renewals of %s: %w", p.GrantOperationID, translate(err))
	}
	return out, nil
}

// operationRenewalsOfQuery is OperationRenewalsOf's statement; the kind
// condition keeps the revocation out (kindOf: a renewal is a GRANT naming
// a grant).
func (s *Store) operationRenewalsOfQuery() string {
	return "SELECT " + operationColumns + " FROM operation" + s.dialect.forceIndex("idx_operation_grant") +
		" WHERE grant_operation_id = ? AND kind = 'GRANT' ORDER BY id DESC LIMIT ?"
}
