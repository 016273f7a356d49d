package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"changeflow/internal/domain"
)

// OperationWithBinding is an operation and the binding whose current
// request it is, as one read saw them.
type OperationWithBinding struct {
	Operation Operation
	// Binding is what BindingGetByOperation(Operation.OperationID) would
	// return; HasBinding is false when no binding names the operation (a
	// later request took the relationship over, or a revocation owns it).
	Binding    Binding
	HasBinding bool
}

// OperationGetWithBinding is OperationGet and BindingGetByOperation in one
// statement (a LEFT JOIN on the binding's operation_id index), prepared
// once on SQLite (prepared.go): the status read's two reads were two
// thirds of its cost. The two rows are read in one snapshot, which the two separate
// reads never promised. An error wraps domain.ErrNotFound when there is no
// such operation.
func (s *Store) OperationGetWithBinding(ctx context.Context, operationID string) (OperationWithBinding, error) {
	var (
		out                                OperationWithBinding
		bID, bVersion, bExpired            sql.NullInt64
		bSubject, bTarget, bStatus, bOpID  sql.NullString
		bExpiresAt, bCreatedAt, bUpdatedAt sql.NullTime
	)
	row := s.queryRowPrepared(ctx, readOperationWithBinding, s.operationWithBindingQuery, operationID)
	op, err := scanOperation(appendScan{row, []any{&bID, &bSubject, &bTarget, &bStatus, &bOpID,
		&bExpiresAt, &bVersion, &bCreatedAt, &bUpdatedAt, &bExpired}})
	if err != nil {
		return OperationWithBinding{}, fmt.Errorf("get operation %s with its binding: %w", operationID, translate(err))
	}
	out.Operation = op
	if bID.Valid {
		out.HasBinding = true
		out.Binding = Binding{
			ID: bID.Int64, Subject: bSubject.String, TargetKey: bTarget.String,
			Status: domain.BindingStatus(bStatus.String), OperationID: bOpID.String,
			ExpiresAt: bExpiresAt.Time, Version: bVersion.Int64,
			CreatedAt: bCreatedAt.Time, UpdatedAt: bUpdatedAt.Time, Expired: bExpired.Int64 == 1,
		}
	}
	return out, nil
}

// operationWithBindingQuery is OperationGetWithBinding's statement: the
// operation's columns (scanOperation's order), then the binding's
// (scanBinding's order), NULL when no binding names it.
func (s *Store) operationWithBindingQuery() string {
	cols := strings.Split(operationColumns, ", ")
	for i, c := range cols {
		cols[i] = "o." + c
	}
	return "SELECT " + strings.Join(cols, ", ") + ", " + s.dialect.bindingColumnsOf("b.") +
		" FROM operation o LEFT JOIN binding b ON b.operation_id = o.operation_id WHERE o.operation_id = ?"
}

// appendScan scans the columns its caller names, then extra: one row read
// by two scanners that each know only their own columns.
type appendScan struct {
	r     rowScanner
	extra []any
}

func (a appendScan) Scan(dest ...any) error {
	return a.r.Scan(append(dest, a.extra...)...)
}
