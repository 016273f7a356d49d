package store

import (
	"context"
	"database/sql"
	"fmt"

	"changeflow/internal/domain"
)

// BatchMR is the merge request of a batch.
type BatchMR struct {
	IID    int64
	URL    string
	Branch string
	// SplitDepth is recorded on the batch row with SetMR (culprit
	// isolation: how many halvings led to this batch's size).
	SplitDepth int
	// ParentBatchID is recorded with SetMR too: the failed batch whose
	// half this batch is (culprit isolation); 0 for none.
	ParentBatchID int64
}

// BatchSchedule names the operation that carries a batch's next action
// (the batch's driver) and the action.
type BatchSchedule struct {
	OperationID string
	Action      string
}

// BatchApplyParams is one transaction of the batch path. Whatever is set
// is written in this order, and all or nothing:
//
//  1. the batch row first (the guarded write): SetMR (only while the batch
//     is RUNNING or BLOCKED and has no MR recorded — of two rounds that
//     built the same batch, the second to record it is preempted and
//     writes nothing, so it cannot re-schedule a driver that has moved
//     on), or a settlement to SettleTo (FAILED or
//     SUCCEEDED) guarded on From and Version — a second settlement path
//     fails here and rolls back having written nothing; FAILED also
//     deletes the members' waiting-set rows (batchReleaseMembers), so
//     that step 4 can admit them again;
//  2. LinkMR: the MR, the branch and batch_id on every listed operation,
//     ≤ 500 per statement;
//  3. Moves: TransitionMany moves in order (each ≤ 500 rows per statement);
//  4. Readmit: the listed operations admitted to the project's waiting set
//     again (a duplicate is an answer, as BatchAdmitTx);
//  5. Schedule: the driver's next action, due now.
type BatchApplyParams struct {
	BatchID int64

	// OnlyIf, when set (and neither SetMR nor SettleTo is), makes the
	// transaction's first statement a guarded write of the batch row that
	// pre-empts everything unless the batch is in this status: the
	// followers' catch-up of a RUNNING batch must not move the members of
	// a batch a settlement finished meanwhile (they are back in the
	// waiting set). The write (it bumps guard_seq, never version) conflicts
	// with the settlement's guarded write of the same row, which is also
	// its first statement: a row lock on one MariaDB server, SQLite's
	// single writer, and a certification conflict between two Galera nodes
	// (the loser re-runs and sees the other's result). A locking read
	// would do on one server but is never certified by Galera.
	OnlyIf domain.BatchStatus

	SetMR *BatchMR

	SettleTo       domain.BatchStatus
	From           domain.BatchStatus
	Version        int64
	FailureCode    string
	FailureMessage string

	LinkMR  *BatchMR
	LinkOps []string

	// MergeSHA, when set, records the batch MR's merge commit on the
	// batch row (merge_batch.merge_sha) unless one is recorded already:
	// given with the members' move to MERGED, so the access period each
	// member opens later names it (accessRecord).
	MergeSHA string

	Moves []TransitionManyParams

	Readmit   []string
	ProjectID int64

	Schedule *BatchSchedule

	// Unschedule clears these operations' next action and lease (after the
	// moves, before Schedule).
	Unschedule []string

	// Park sets an operation's next action without making it due (a
	// stopped row that remembers what a retrigger re-runs); its lease is
	// kept.
	Park *BatchSchedule

	// beforeCommit, when set, runs after all the writes on the open
	// transaction; the store's tests hold a settlement open with it (a
	// racing second settlement, admissions during a settlement).
	beforeCommit func(ctx context.Context, tx *sql.Tx) error
}

// BatchApply runs p in one transaction (see BatchApplyParams); an InnoDB
// deadlock or a lost Galera certification re-runs it (InTx). It returns the members a FAILED settlement
// released.
func (s *Store) BatchApply(ctx context.Context, p BatchApplyParams) ([]BatchMember, error) {
	if err := p.validate(); err != nil {
		return nil, fmt.Errorf("batch %d: %w", p.BatchID, err)
	}
	var released []BatchMember
	err := s.InTx(ctx, nil, func(tx *sql.Tx) error {
		var err error
		released, err = s.batchApplyTx(ctx, tx, p)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("batch %d: %w", p.BatchID, err)
	}
	return released, nil
}

// validate refuses a plan the transaction could not apply, before any
// transaction is opened: a malformed move, or a settlement to a status
// that does not settle a batch.
func (p BatchApplyParams) validate() error {
	for _, m := range p.Moves {
		if err := m.validate(); err != nil {
			return err
		}
	}
	if p.SettleTo != 0 && p.SettleTo != domain.BatchFailed && p.SettleTo != domain.BatchSucceeded {
		return fmt.Errorf("settle to %s: not a settlement", p.SettleTo)
	}
	return nil
}

// batchApplyTx writes a validated plan in the order BatchApplyParams
// documents: the batch row's guarded write first, then the members'
// writes, then the test hook.
func (s *Store) batchApplyTx(ctx context.Context, tx *sql.Tx, p BatchApplyParams) ([]BatchMember, error) {
	released, err := batchApplyRow(ctx, tx, s.dialect, p)
	if err != nil {
		return nil, err
	}
	if err := s.batchApplyOperations(ctx, tx, p); err != nil {
		return nil, err
	}
	if p.beforeCommit != nil {
		if err := p.beforeCommit(ctx, tx); err != nil {
			return nil, err
		}
	}
	return released, nil
}

// batchApplyRow is step 1 of BatchApplyParams, the guarded write of the
// batch row: the OnlyIf guard, SetMR, or the settlement. It returns the
// members a FAILED settlement released.
func batchApplyRow(ctx context.Context, tx *sql.Tx, d Dialect, p BatchApplyParams) ([]BatchMember, error) {
	switch {
	case p.OnlyIf != 0 && p.SetMR == nil && p.SettleTo == 0:
		// A write, not a locking read: see the guard_seq migration. Any
		// status but OnlyIf (or no such batch) matches no row: pre-empted.
		err := execN(ctx, tx, 1, "UPDATE merge_batch SET guard_seq = guard_seq + 1 WHERE id = ? AND status = ?",
			p.BatchID, p.OnlyIf)
		if err != nil {
			return nil, fmt.Errorf("guard batch still %s: %w", p.OnlyIf, err)
		}
	case p.SetMR != nil:
		err := execN(ctx, tx, 1,
			"UPDATE merge_batch SET mr_iid = ?, mr_url = ?, branch = ?, split_depth = ?, parent_batch_id = ? WHERE id = ? AND status IN (?, ?) AND mr_iid IS NULL",
			p.SetMR.IID, clipRunes(p.SetMR.URL, 512), clipRunes(p.SetMR.Branch, 255), p.SetMR.SplitDepth, nullID(p.SetMR.ParentBatchID), p.BatchID,
			domain.BatchRunning, domain.BatchBlocked)
		if err != nil {
			return nil, fmt.Errorf("record MR: %w", err)
		}
	case p.SettleTo != 0:
		released, err := batchSettleTx(ctx, tx, d, p)
		if err != nil {
			return nil, err
		}
		return released, batchRecordMergeSHA(ctx, tx, p)
	}
	return nil, batchRecordMergeSHA(ctx, tx, p)
}

// batchRecordMergeSHA writes p.MergeSHA on the batch row when it names
// one and the row has none. After the guarded write, so a pre-empted plan
// records nothing; a merge commit, once known, does not change.
func batchRecordMergeSHA(ctx context.Context, tx *sql.Tx, p BatchApplyParams) error {
	if p.MergeSHA == "" {
		return nil
	}
	if _, err := tx.ExecContext(ctx, "UPDATE merge_batch SET merge_sha = ? WHERE id = ? AND merge_sha IS NULL",
		clipRunes(p.MergeSHA, 64), p.BatchID); err != nil {
		return fmt.Errorf("record merge commit: %w", translate(err))
	}
	return nil
}

// batchSettleTx writes the settlement to p.SettleTo, guarded on From and
// Version; a FAILED settlement also releases the members from the
// waiting set and returns them.
func batchSettleTx(ctx context.Context, tx *sql.Tx, d Dialect, p BatchApplyParams) ([]BatchMember, error) {
	if _, err := batchSetState(ctx, tx, batchStateWrite{
		id: p.BatchID, from: p.From, to: p.SettleTo, version: p.Version,
		failureCode: p.FailureCode, failureMessage: p.FailureMessage,
	}); err != nil {
		return nil, err
	}
	if p.SettleTo != domain.BatchFailed {
		return nil, nil
	}
	members, err := batchMembers(ctx, tx, p.BatchID)
	if err != nil {
		return nil, fmt.Errorf("members: %w", err)
	}
	if err := batchReleaseMembers(ctx, tx, d, p.BatchID, members); err != nil {
		return nil, err
	}
	return members, nil
}

// batchApplyOperations is steps 2 to 5 of BatchApplyParams, the writes of
// the member operations: LinkMR, Moves, Readmit, Unschedule, Park and
// Schedule.
func (s *Store) batchApplyOperations(ctx context.Context, tx *sql.Tx, p BatchApplyParams) error {
	d := s.dialect
	if p.LinkMR != nil {
		if err := batchLinkMRTx(ctx, tx, d, p.BatchID, *p.LinkMR, p.LinkOps); err != nil {
			return err
		}
	}
	for _, m := range p.Moves {
		if err := transitionTx(ctx, tx, d, m); err != nil {
			return fmt.Errorf("move members %d → %d: %w", m.FromStep, m.ToStep, err)
		}
	}
	if err := batchAdmitMany(ctx, tx, p.Readmit, p.ProjectID); err != nil {
		return err
	}
	if len(p.Unschedule) > 0 {
		if err := batchUnscheduleTx(ctx, tx, d, p.Unschedule); err != nil {
			return err
		}
	}
	if p.Park != nil {
		if err := execN(ctx, tx, 1, "UPDATE operation"+d.forceIndex("uk_operation_operation_id")+
			" SET next_action = ?, due_at = NULL WHERE operation_id = ?", p.Park.Action, p.Park.OperationID); err != nil {
			return fmt.Errorf("park %s: %w", p.Park.OperationID, err)
		}
	}
	if p.Schedule != nil {
		if err := s.WorkScheduleTx(ctx, tx, p.Schedule.OperationID, p.Schedule.Action, 0); err != nil {
			return err
		}
	}
	return nil
}

// batchLinkMRTx records the MR, its branch and the batch on every listed
// operation, one statement per chunk of ids; each must match a row.
func batchLinkMRTx(ctx context.Context, tx *sql.Tx, d Dialect, batchID int64, mr BatchMR, ops []string) error {
	for _, part := range chunk(ops, InChunkSize) {
		a := []any{batchID, mr.IID, clipRunes(mr.URL, 512), clipRunes(mr.Branch, 255)}
		for _, id := range part {
			a = append(a, id)
		}
		if err := execN(ctx, tx, int64(len(part)),
			"UPDATE operation"+d.forceIndex("uk_operation_operation_id")+
				" SET batch_id = ?, mr_iid = ?, mr_url = ?, branch = ? WHERE operation_id IN ("+placeholders(len(part))+")",
			a...); err != nil {
			return fmt.Errorf("link MR: %w", err)
		}
	}
	return nil
}

// batchReleaseMembers deletes the waiting-set rows of a batch a FAILED
// settlement just wrote (docs/flows/batch.md, "Settlement"), one statement per
// chunk of ids, so that each request can be admitted again (the unique
// operation_id would otherwise refuse it); merge_batch_history and the
// audit log are append-only and keep the record that the request was in
// the batch. Each row must still belong to the batch: only this
// settlement removes them, and the guarded write before it admits one
// settlement per batch.
//
// Deleting rather than setting batch_id back to NULL is deliberate: a NULL
// would silently put every member — including the one that broke the
// batch — back at the head of the queue for the next round; deleting hands
// the decision to the workflow, which re-admits (Readmit) the members it
// chose, in the same transaction.
//
// It deletes by primary key, pinned on MariaDB as the claim's UPDATE is,
// so that it locks only the members' rows (I3). Both alternatives were
// measured to block admissions until 1205 on MariaDB 10.11
// (TestBatchSettlementDoesNotBlockAdmissions): a range delete over the
// waiting index (project_id, batch_id) next-key-locks the gap right after
// the project's waiting entries, where its next admission goes; and the
// unhinted "DELETE … WHERE id IN (…)" is planned as a full table scan on a
// small table, locking every row.
func batchReleaseMembers(ctx context.Context, tx *sql.Tx, d Dialect, batchID int64, members []BatchMember) error {
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

// BatchUnschedule is part of a settlement: it clears the listed operations'
// next action and lease, so that a step still running under the lease can
// no longer commit its outcome (domain.ErrPreempted).
func batchUnscheduleTx(ctx context.Context, tx *sql.Tx, d Dialect, ids []string) error {
	for _, part := range chunk(ids, InChunkSize) {
		a := make([]any, len(part))
		for i, id := range part {
			a[i] = id
		}
		if _, err := tx.ExecContext(ctx, "UPDATE operation"+d.forceIndex("uk_operation_operation_id")+
			" SET next_action = NULL, due_at = NULL, lease_owner = NULL, lease_expires_at = NULL"+
			" WHERE operation_id IN ("+placeholders(len(part))+")", a...); err != nil {
			return fmt.Errorf("unschedule: %w", translate(err))
		}
	}
	return nil
}
