package store

import (
	"context"
	"fmt"
	"time"

	"changeflow/internal/domain"
)

// OperationFindParams asks for one page of the operators' search over
// every request (GET /ops/requests). Every filter left empty matches all.
type OperationFindParams struct {
	Subject   string
	TargetKey string
	// Status keeps the requests that hold their binding in this state now
	// (the request a relationship's row names: a grant or renewal in
	// effect is VALIDATED, an access being removed is its revocation's
	// REVOKING). A request whose row a later one took over holds none.
	Status domain.BindingStatus
	// Attention, when set, keeps only what waits on a person.
	Attention *OperationAttention
	// Limit is the page size, clamped to 1..MaxOperationPage.
	Limit int
	// After is the cursor of the previous page's last row.
	After OperationCursor
}

// OperationAttention says what waits on a person: a request stopped at
// one of Stopped, one whose binding is in one of Bindings, a member of a
// BLOCKED batch, or one that has sat at a step of a Slow rule since
// before its Before.
type OperationAttention struct {
	Stopped  []domain.StepStatus
	Bindings []domain.BindingStatus
	Slow     []SlowStep
}

// SlowStep is a set of steps and the time before which a request still
// at one of them has waited far past its bound.
type SlowStep struct {
	Steps  []domain.StepStatus
	Before time.Time
}

// OperationFind returns one page of every request matching p, newest
// first. It is a keyset page over (created_at, id) read in an index's
// order — idx_operation_subject_created for a person,
// idx_operation_target_created for a target, idx_operation_created
// otherwise — so no page sorts and none costs more the deeper it is; the
// status and attention conditions filter the rows as they are read.
func (s *Store) OperationFind(ctx context.Context, p OperationFindParams) (OperationPage, error) {
	limit := min(max(p.Limit, 1), MaxOperationPage)
	q, vals := s.operationFindQuery(p, limit)
	rows, err := s.db.QueryContext(ctx, q, vals...)
	if err != nil {
		return OperationPage{}, fmt.Errorf("find operations: %w", translate(err))
	}
	defer rows.Close()
	var page OperationPage
	for rows.Next() {
		o, err := scanOperation(rows)
		if err != nil {
			return OperationPage{}, fmt.Errorf("find operations: %w", err)
		}
		page.Items = append(page.Items, o)
	}
	if err := rows.Err(); err != nil {
		return OperationPage{}, fmt.Errorf("find operations: %w", translate(err))
	}
	if len(page.Items) > limit {
		page.Items = page.Items[:limit]
		last := page.Items[limit-1]
		page.Next = OperationCursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	return page, nil
}

// operationFindQuery is OperationFind's statement and arguments.
func (s *Store) operationFindQuery(p OperationFindParams, limit int) (string, []any) {
	index := "idx_operation_created"
	switch {
	case p.Subject != "":
		index = "idx_operation_subject_created"
	case p.TargetKey != "":
		index = "idx_operation_target_created"
	}
	q := "SELECT " + operationColumns + " FROM operation" + s.dialect.forceIndex(index) + " WHERE 1 = 1"
	var vals []any
	if p.Subject != "" {
		q += " AND subject = ?"
		vals = append(vals, p.Subject)
	}
	if p.TargetKey != "" {
		q += " AND target_key = ?"
		vals = append(vals, p.TargetKey)
	}
	if p.Status != "" {
		q += " AND operation_id IN (SELECT operation_id FROM binding WHERE status = ?)"
		vals = append(vals, string(p.Status))
	}
	if a := p.Attention; a != nil {
		var conds []string
		if len(a.Stopped) > 0 {
			conds = append(conds, "step_status IN ("+placeholders(len(a.Stopped))+")")
			for _, st := range a.Stopped {
				vals = append(vals, int(st))
			}
		}
		if len(a.Bindings) > 0 {
			conds = append(conds, "operation_id IN (SELECT operation_id FROM binding WHERE status IN ("+placeholders(len(a.Bindings))+"))")
			for _, b := range a.Bindings {
				vals = append(vals, string(b))
			}
		}
		conds = append(conds, "batch_id IN (SELECT id FROM merge_batch WHERE status = ?)")
		vals = append(vals, int(domain.BatchBlocked))
		for _, sl := range a.Slow {
			if len(sl.Steps) == 0 {
				continue
			}
			conds = append(conds, "(step_status IN ("+placeholders(len(sl.Steps))+") AND updated_at < ?)")
			for _, st := range sl.Steps {
				vals = append(vals, int(st))
			}
			vals = append(vals, s.dialect.Time(sl.Before))
		}
		q += " AND ("
		for i, c := range conds {
			if i > 0 {
				q += " OR "
			}
			q += c
		}
		q += ")"
	}
	if !p.After.IsZero() {
		at := s.dialect.Time(p.After.CreatedAt)
		q += " AND created_at <= ? AND (created_at < ? OR id < ?)"
		vals = append(vals, at, at, p.After.ID)
	}
	q += " ORDER BY created_at DESC, id DESC LIMIT ?"
	vals = append(vals, limit+1)
	return q, vals
}
