package store

import (
	"context"
	"database/sql"
	"fmt"

	"changeflow/internal/domain"
)

// BatchSettleParams names the batch to settle and the state it was read
// in. The settlement's first write is guarded on exactly that state.
type BatchSettleParams struct {
	ID      int64
	From    domain.BatchStatus // RUNNING or BLOCKED, as read
	Version int64              // as read
	// FailureCode and FailureMessage explain a FAILED settlement (cut to
	// the column widths, 64 and 512 bytes); a success keeps the previous
	// ones, e.g. why it had been BLOCKED.
	FailureCode    string
	FailureMessage string

	// beforeCommit, when set, runs after the settlement's writes on its
	// open transaction; tests hold a settlement open with it.
	beforeCommit func(ctx context.Context, tx *sql.Tx) error
}

// BatchSettlement is a batch that this call moved to a terminal state.
type BatchSettlement struct {
	BatchID int64
	Status  domain.BatchStatus // SUCCEEDED or FAILED
	Version int64              // the new version
	// Members are the batch's members in claim order. After a FAILED
	// settlement their waiting-set rows are gone: the workflow decides
	// which to re-admit (BatchAdmit) and which to fail.
	Members []BatchMember
}

// BatchSettleFailed is the storage half of settling a failed batch (seed
// §3.7, "closed, or no MR"): in one transaction it
//
//  1. marks the batch FAILED, guarded on From and Version — first, so that
//     a second settlement path (the timeout sweep, an operator, the running
//     task) fails here with domain.ErrPreempted and rolls back before it
//     has done anything;
//  2. deletes the members' merge_batch_request rows, so each request can be
//     admitted again (the unique operation_id would otherwise refuse it);
//     merge_batch_history and the audit log are append-only and keep the
//     record that the request was in this batch.
//
// The slot is freed by step 1 (active_slot is generated from status).
// Deleting rather than setting batch_id back to NULL is deliberate: a NULL
// would silently put every member — including the one that broke the
// batch — back at the head of the queue for the next round; deleting hands
// the decision to the workflow, which knows why the batch failed.
//
// Step 2 deletes by primary key, pinned on MariaDB as the claim's UPDATE
// is, so that it locks only the members' rows (I3). Both alternatives were
// measured to block admissions until 1205 on MariaDB 10.11
// (TestBatchSettlementDoesNotBlockAdmissions): a range delete over the
// waiting index (project_id, batch_id) next-key-locks the gap right after
// the project's waiting entries, where its next admission goes; and the
// unhinted "DELETE … WHERE id IN (…)" is planned as a full table scan on a
// small table, locking every row.
//
// An InnoDB deadlock (see retryDeadlock) re-runs the whole transaction.
func (s *Store) BatchSettleFailed(ctx context.Context, p BatchSettleParams) (BatchSettlement, error) {
	out := BatchSettlement{BatchID: p.ID, Status: domain.BatchFailed}
	err := retryDeadlock(func() error {
		return s.InTx(ctx, nil, func(tx *sql.Tx) error {
			v, err := batchSetState(ctx, tx, batchStateWrite{
				id: p.ID, from: p.From, to: domain.BatchFailed, version: p.Version,
				failureCode: p.FailureCode, failureMessage: p.FailureMessage,
			})
			if err != nil {
				return err
			}
			out.Version = v
			if out.Members, err = batchMembers(ctx, tx, p.ID); err != nil {
				return fmt.Errorf("members: %w", err)
			}
			if err := settleReleaseMembers(ctx, tx, s.dialect, p.ID, out.Members); err != nil {
				return err
			}
			if p.beforeCommit != nil {
				return p.beforeCommit(ctx, tx)
			}
			return nil
		})
	})
	if err != nil {
		return BatchSettlement{}, fmt.Errorf("settle batch %d as failed: %w", p.ID, err)
	}
	return out, nil
}

// settleReleaseMembers deletes the waiting-set rows of a failed batch's
// members, one statement per chunk of ids. Each row must still belong to
// the batch: only this settlement removes them, and the guarded write
// before it admits one settlement per batch.
func settleReleaseMembers(ctx context.Context, tx *sql.Tx, d Dialect, batchID int64, members []BatchMember) error {
	// MariaDB refuses an index hint on a single-table DELETE (1064); the
	// multi-table form takes one. SQLite has neither the form nor the need
	// (single writer).
	del := "DELETE FROM merge_batch_request WHERE"
	if d.IsMySQL() {
		del = "DELETE r FROM merge_batch_request AS r " + d.PrimaryKeyHint() + " WHERE"
	}
	for _, part := range chunk(members, InChunkSize) {
		a := make([]any, 0, len(part)+1)
		a = append(a, batchID)
		for _, m := range part {
			a = append(a, m.ID)
		}
		res, err := tx.ExecContext(ctx, del+" batch_id = ? AND id IN ("+placeholders(len(part))+")", a...)
		if err != nil {
			return fmt.Errorf("release members: %w", translate(err))
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("release members: rows affected: %w", err)
		}
		if int(n) != len(part) {
			return fmt.Errorf("release members of batch %d: %d of %d rows still in the batch: %w",
				batchID, n, len(part), errBatchInvariant)
		}
	}
	return nil
}

// BatchSettleSucceeded marks a batch SUCCEEDED — its MR merged ("merged
// wins", seed §3.7) — guarded on From and Version like every batch write,
// and frees the project's slot in the same statement. The members' rows
// stay claimed: the requests are done and may not be admitted again under
// the same operationId. A losing concurrent settlement gets
// domain.ErrPreempted; an InnoDB deadlock re-runs the transaction.
func (s *Store) BatchSettleSucceeded(ctx context.Context, p BatchSettleParams) (BatchSettlement, error) {
	out := BatchSettlement{BatchID: p.ID, Status: domain.BatchSucceeded}
	err := retryDeadlock(func() error {
		return s.InTx(ctx, nil, func(tx *sql.Tx) error {
			v, err := batchSetState(ctx, tx, batchStateWrite{
				id: p.ID, from: p.From, to: domain.BatchSucceeded, version: p.Version,
			})
			if err != nil {
				return err
			}
			out.Version = v
			if out.Members, err = batchMembers(ctx, tx, p.ID); err != nil {
				return fmt.Errorf("members: %w", err)
			}
			if p.beforeCommit != nil {
				return p.beforeCommit(ctx, tx)
			}
			return nil
		})
	})
	if err != nil {
		return BatchSettlement{}, fmt.Errorf("settle batch %d as succeeded: %w", p.ID, err)
	}
	return out, nil
}
