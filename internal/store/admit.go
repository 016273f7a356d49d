package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"changeflow/internal/domain"
)

// batchOperationIDMax is the width of every operation_id column.
const batchOperationIDMax = 64

// BatchAdmit puts the request operationID into its project's waiting set
// (I4). Admission is a plain INSERT; the unique key on operation_id makes a
// repeat the answer "already admitted": (false, nil), never an overwrite of
// the existing row, which may already be claimed. No lock is taken beyond
// the insert's own, so admission does not wait for a claim on MariaDB (I3;
// see BatchClaim for SQLite's single writer).
//
// A request released by a failed batch (BatchApply settling it FAILED) has
// no row any more and is admitted again by the next call; whether it
// should be is the workflow's decision (it re-admits the members it chose
// in the settlement's own transaction, BatchApplyParams.Readmit).
func (s *Store) BatchAdmit(ctx context.Context, operationID string, projectID int64) (admitted bool, err error) {
	// Twin admissions on two Galera nodes both insert; the loser gets 1213
	// (a lost certification) instead of 1062. Re-run, its INSERT meets the
	// winner's row as the duplicate key: "already admitted", as on one node.
	err = retryConflict(ctx, func() (err error) {
		admitted, err = batchAdmit(ctx, s.db, operationID, projectID)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("admit %s: %w", operationID, err)
	}
	return admitted, nil
}

// BatchAdmitTx is BatchAdmit inside the caller's transaction, for a
// workflow step that admits a request in the same commit as its own state
// write. A duplicate fails only the INSERT statement, so tx stays usable
// on both databases. A lost Galera certification (1213) aborts tx as a
// whole; the caller's InTx re-runs it.
func (s *Store) BatchAdmitTx(ctx context.Context, tx *sql.Tx, operationID string, projectID int64) (admitted bool, err error) {
	admitted, err = batchAdmit(ctx, tx, operationID, projectID)
	if err != nil {
		return false, fmt.Errorf("admit %s: %w", operationID, err)
	}
	return admitted, nil
}

// batchAdmit is the admission INSERT on q.
func batchAdmit(ctx context.Context, q batchDB, operationID string, projectID int64) (bool, error) {
	if operationID == "" || len(operationID) > batchOperationIDMax {
		return false, fmt.Errorf("operationId must have 1 to %d bytes, has %d", batchOperationIDMax, len(operationID))
	}
	_, err := q.ExecContext(ctx, "INSERT INTO merge_batch_request (operation_id, project_id) VALUES (?, ?)",
		operationID, projectID)
	if err != nil {
		err = translate(err)
		if errors.Is(err, domain.ErrDuplicate) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}
