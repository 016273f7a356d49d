package store

import (
	"context"
	"database/sql"
	"fmt"

	"changeflow/internal/domain"
)

// OperationWithBinding is an operation and the binding whose current
// request it is, as one read saw them.
type OperationWithBinding struct {
	Operation Operation
	// Binding is what BindingGetByOperation(Operation.OperationID) would
	// return (only the fields OperationViewGet lists); HasBinding is false
	// when no binding names the operation (a later request took the
	// relationship over, or a revocation owns it).
	Binding    Binding
	HasBinding bool
}

// OperationViewGet is OperationGet and BindingGetByOperation in one
// statement (a LEFT JOIN on the binding's operation_id index), narrowed to
// what a request's status view shows (GET /api/requests/{operationId} and
// its event stream's authorization, the reads every person's browser
// repeats): prepared once on SQLite, it selects 21 columns instead of 38
// and reads its times without the driver's conversion (dbTime). The two
// separate reads were two thirds of the status read's cost, and one
// statement reads both rows in one snapshot, which two reads never
// promised.
//
// Only these fields are set; every other field of Operation and Binding is
// its zero value, so hand the result to nothing but the view:
//
//   - Operation: OperationID, Subject, TargetKey, Flow, Kind, GrantOperationID,
//     RevokeReason, Step, BatchID, MRIID, MRURL, Reason, Days, ExpiresAt,
//     CreatedAt, UpdatedAt;
//   - Binding (when HasBinding): ID, OperationID, Status, ExpiresAt,
//     UpdatedAt, Expired.
//
// Why a narrower read rather than the whole rows: the row conversion —
// a Go string per text column, a time per DATETIME column — was the
// largest part of the read once the statement was prepared
// (docs/benchmarks.md, "Status read"); the columns the view never shows
// (the lease, the schedule, the branch, the hash, the last error) were
// half of it. The trade-off is a second list of columns to keep in step
// with the view: httpapi's TestStatusReadNarrowMatchesFullRead compares the
// answer from this read with the one from the full rows, for requests in
// every state, so a view field that needs a column not listed here fails
// there. An error wraps domain.ErrNotFound when there is no such
// operation.
func (s *Store) OperationViewGet(ctx context.Context, operationID string) (OperationWithBinding, error) {
	// One allocation for every scan target: each would otherwise escape
	// to the heap on its own, being handed to Scan as an interface.
	r := &viewRow{}
	row := s.queryRowPrepared(ctx, readOperationView, s.operationViewQuery, operationID)
	err := row.Scan(&r.operationID, &r.subject, &r.targetKey, &r.flow, &r.kind, &r.grantOp, &r.revokeReason, &r.step,
		&r.batchID, &r.mrIID, &r.mrURL, &r.reason, &r.days, &r.expiresAt, &r.createdAt, &r.updatedAt,
		&r.bID, &r.bStatus, &r.bExpiresAt, &r.bUpdatedAt, &r.bExpired)
	if err != nil {
		return OperationWithBinding{}, fmt.Errorf("get the view of operation %s: %w", operationID, translate(err))
	}
	out := OperationWithBinding{Operation: Operation{
		OperationID: r.operationID, Subject: r.subject, TargetKey: r.targetKey, Flow: r.flow,
		Kind: domain.OperationKind(r.kind), GrantOperationID: r.grantOp.String, RevokeReason: domain.RevokeReason(r.revokeReason.String),
		Step: int(r.step), BatchID: r.batchID.Int64, MRIID: r.mrIID.Int64, MRURL: r.mrURL.String,
		Reason: r.reason, Days: int(r.days.Int64),
		ExpiresAt: r.expiresAt.t, CreatedAt: r.createdAt.t, UpdatedAt: r.updatedAt.t,
	}}
	if out.Operation.Kind == domain.OperationGrant && out.Operation.GrantOperationID != "" {
		out.Operation.Kind = domain.OperationRenew // a renewal, as scanOperation reads it (kindOf)
	}
	if r.bID.Valid {
		out.HasBinding = true
		out.Binding = Binding{
			ID: r.bID.Int64, OperationID: r.operationID, Status: domain.BindingStatus(r.bStatus.String),
			ExpiresAt: r.bExpiresAt.t, UpdatedAt: r.bUpdatedAt.t, Expired: r.bExpired == 1,
		}
	}
	return out, nil
}

// viewRow is one row of operationViewQuery as scanned; plain strings and
// int64s for the NOT NULL columns, so that database/sql assigns them
// without reflection.
type viewRow struct {
	operationID, subject, targetKey, flow, kind, reason string
	step, bExpired                                      int64
	grantOp, revokeReason, mrURL, bStatus               sql.NullString
	batchID, mrIID, days, bID                           sql.NullInt64
	expiresAt, createdAt, updatedAt                     dbTime
	bExpiresAt, bUpdatedAt                              dbTime
}

// operationViewQuery is OperationViewGet's statement, in its Scan's order;
// the binding's columns are NULL when no binding names the operation (its
// id, NOT NULL in the table, tells). The expiry test is the DB clock's, as
// in bindingColumns.
func (s *Store) operationViewQuery() string {
	d := s.dialect
	return "SELECT o.operation_id, o.subject, o.target_key, o.flow, o.kind, o.grant_operation_id, o.revoke_reason, o.step_status, " +
		"o.batch_id, o.mr_iid, o.mr_url, o.reason, o.days, " +
		d.viewTime("o.expires_at") + ", " + d.viewTime("o.created_at") + ", " + d.viewTime("o.updated_at") + ", " +
		"b.id, b.status, " + d.viewTime("b.expires_at") + ", " + d.viewTime("b.updated_at") + ", " +
		"CASE WHEN b.expires_at IS NOT NULL AND b.expires_at <= " + d.Now() + " THEN 1 ELSE 0 END" +
		" FROM operation o LEFT JOIN binding b ON b.operation_id = o.operation_id WHERE o.operation_id = ?"
}

// viewTime selects the time column col for a dbTime. On SQLite it is cast
// to BLOB: the driver converts a DATETIME column's text itself, and under
// the store's _texttotime=1 it converts an expression's text too (dsn.go),
// but it hands a BLOB over as it is, bytes that parseDBTime reads without
// allocating. What is stored does not change, only how it is read. On
// MariaDB/MySQL the driver's own conversion (parseTime) is already a
// direct parse of the bytes.
func (d Dialect) viewTime(col string) string {
	if d.IsMySQL() {
		return col
	}
	return "CAST(" + col + " AS BLOB)"
}
