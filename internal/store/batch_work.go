package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"changeflow/internal/domain"
)

// BatchMemberState is one member of a batch with the state and versions a
// TransitionMany of the batch's members needs.
type BatchMemberState struct {
	OperationID string
	Step        int
	Version     int64
	NextAction  string
	// Binding and BindingVersion are the binding the operation owns; ""
	// and 0 when it no longer owns one (re-applied for a newer request).
	// A revocation's binding reads in the grant's vocabulary
	// (domain.OperationKind.GrantView: REVOKING at HANDLE_MERGED is
	// MERGED), so the batch path's milestones hold for both kinds;
	// TransitionMany maps its moves back per row.
	Binding        domain.BindingStatus
	BindingVersion int64
	Kind           domain.OperationKind
}

// BatchMemberStates returns the state of every member a batch ever had
// (membership history, claim order), in one statement.
func (s *Store) BatchMemberStates(ctx context.Context, batchID int64) ([]BatchMemberState, error) {
	rows, err := s.db.QueryContext(ctx,
		"SELECT o.operation_id, o.step_status, o.version, o.next_action, b.status, b.version, "+kindOf("o")+
			" FROM merge_batch_history h JOIN operation o ON o.operation_id = h.operation_id"+
			" LEFT JOIN binding b ON b.subject_id = o.subject AND b.target_key = o.target_key AND b.operation_id = o.operation_id"+
			" WHERE h.batch_id = ? ORDER BY h.id", batchID)
	if err != nil {
		return nil, fmt.Errorf("member states of batch %d: %w", batchID, translate(err))
	}
	defer rows.Close()
	var out []BatchMemberState
	for rows.Next() {
		var (
			m      BatchMemberState
			next   sql.NullString
			status sql.NullString
			bv     sql.NullInt64
		)
		if err := rows.Scan(&m.OperationID, &m.Step, &m.Version, &next, &status, &bv, &m.Kind); err != nil {
			return nil, err
		}
		m.NextAction, m.Binding, m.BindingVersion = next.String, domain.BindingStatus(status.String), bv.Int64
		if m.Binding != "" {
			m.Binding = m.Kind.GrantView(m.Binding, domain.StepStatus(m.Step))
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(err)
	}
	return out, nil
}

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
		return batchSettleTx(ctx, tx, d, p)
	}
	return nil, nil
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

// BatchMemberOperations returns the operations of every member a batch
// ever had (membership history, claim order), in one statement.
func (s *Store) BatchMemberOperations(ctx context.Context, batchID int64) ([]Operation, error) {
	rows, err := s.db.QueryContext(ctx,
		"SELECT "+prefixColumns("o.", operationColumns)+
			" FROM merge_batch_history h JOIN operation o ON o.operation_id = h.operation_id WHERE h.batch_id = ? ORDER BY h.id", batchID)
	if err != nil {
		return nil, fmt.Errorf("member operations of batch %d: %w", batchID, translate(err))
	}
	defer rows.Close()
	var out []Operation
	for rows.Next() {
		o, err := scanOperation(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(err)
	}
	return out, nil
}

// prefixColumns qualifies every column of a comma-separated list.
func prefixColumns(prefix, cols string) string {
	parts := strings.Split(cols, ",")
	for i, c := range parts {
		parts[i] = prefix + strings.TrimSpace(c)
	}
	return strings.Join(parts, ", ")
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

// BatchResumableParams says which project's unstarted batch a round may
// finish building, and who is asking.
type BatchResumableParams struct {
	ProjectID int64
	// MinAge (batch.resumeAfter): a batch claimed longer ago than this is
	// resumable whatever its builder — the backstop for a builder that is
	// alive but stuck.
	MinAge time.Duration
	// Self is the asking instance's id: a batch whose builder is Self is
	// not being built by any round of this process unless the caller knows
	// otherwise (a restart under the same id); the caller checks its own
	// rounds in progress.
	Self string
	// LiveAfter (instance.liveAfter): a builder whose heartbeat is older
	// than this, or missing, is dead. ≤ 0: liveness is not considered.
	LiveAfter time.Duration
}

// BatchResumable returns the project's RUNNING batch that has no MR
// recorded and whose round is not building it any more, or
// domain.ErrNotFound. Resumable at once: the builder's round returned
// (builder empty), the builder is p.Self, or the builder has no heartbeat
// within p.LiveAfter (killed). Otherwise — a live builder on another
// instance, or no builder recorded — only once the batch is older than
// p.MinAge by the database clock.
//
// The liveness read is a correlated NOT EXISTS on instance_heartbeat's
// primary key; the project has at most one RUNNING batch (I1), so the
// query reads one merge_batch row and at most one heartbeat row.
func (s *Store) BatchResumable(ctx context.Context, p BatchResumableParams) (Batch, error) {
	before, beforeArg := s.dialect.NowMinus(p.MinAge)
	q := "SELECT " + batchColumns + " FROM merge_batch WHERE project_id = ? AND status = ? AND mr_iid IS NULL AND (" +
		"created_at < " + before + " OR builder = '' OR builder = ?"
	args := []any{p.ProjectID, domain.BatchRunning, beforeArg, p.Self}
	if p.LiveAfter > 0 {
		live, liveArg := s.dialect.NowMinus(p.LiveAfter)
		q += " OR (builder IS NOT NULL AND NOT EXISTS (SELECT 1 FROM instance_heartbeat h" +
			" WHERE h.instance_id = merge_batch.builder AND h.heartbeat_at > " + live + "))"
		args = append(args, liveArg)
	}
	b, err := scanBatch(s.db.QueryRowContext(ctx, q+")", args...))
	if errors.Is(err, sql.ErrNoRows) {
		return Batch{}, domain.ErrNotFound
	}
	if err != nil {
		return Batch{}, fmt.Errorf("resumable batch of project %d: %w", p.ProjectID, translate(err))
	}
	return b, nil
}

// BatchBuildTake records builder as the instance now building batch id's
// MR, while it is RUNNING without one (a round resuming it). Several
// resumers may race; each then builds, which is safe (every remote write
// is looked up first) — this only tells the others who is alive.
func (s *Store) BatchBuildTake(ctx context.Context, id int64, builder string) error {
	if _, err := s.db.ExecContext(ctx,
		"UPDATE merge_batch SET builder = ? WHERE id = ? AND status = ? AND mr_iid IS NULL",
		builder, id, domain.BatchRunning); err != nil {
		return fmt.Errorf("take building of batch %d: %w", id, translate(err))
	}
	return nil
}

// BatchBuildRelease records that builder's round for batch id returned —
// whether it recorded the MR or gave up — so that the next round on any
// instance resumes an unstarted batch at once instead of after
// batch.resumeAfter. Guarded on builder, so a round that lost the batch to
// a resumer does not release the resumer's build.
func (s *Store) BatchBuildRelease(ctx context.Context, id int64, builder string) error {
	if _, err := s.db.ExecContext(ctx,
		"UPDATE merge_batch SET builder = '' WHERE id = ? AND builder = ?", id, builder); err != nil {
		return fmt.Errorf("release building of batch %d: %w", id, translate(err))
	}
	return nil
}

// batchAdmitMany admits ids to the project's waiting set in claim order:
// one multi-row INSERT per InChunkSize ids, so a settlement re-admits a
// batch of 1,000 in 2 statements rather than 1,000. Ids grow in VALUES
// order within a statement and the rows share its clock, so the next claim
// (created_at, id) takes them in the order given. A duplicate fails only
// that statement, on both databases (its rows are undone, the transaction
// stays usable), and that chunk is then admitted row by row, a duplicate
// being the answer "already waiting" as for BatchAdmit. In a FAILED
// settlement there is none: the members' rows were deleted first.
func batchAdmitMany(ctx context.Context, tx *sql.Tx, ids []string, projectID int64) error {
	for _, part := range chunk(ids, InChunkSize) {
		a := make([]any, 0, 2*len(part))
		for _, id := range part {
			if id == "" || len(id) > batchOperationIDMax {
				return fmt.Errorf("re-admit: operationId must have 1 to %d bytes, has %d", batchOperationIDMax, len(id))
			}
			a = append(a, id, projectID)
		}
		_, err := tx.ExecContext(ctx, "INSERT INTO merge_batch_request (operation_id, project_id) VALUES "+
			strings.TrimSuffix(strings.Repeat("(?, ?), ", len(part)), ", "), a...)
		if err = translate(err); err == nil {
			continue
		} else if !errors.Is(err, domain.ErrDuplicate) {
			return fmt.Errorf("re-admit: %w", err)
		}
		for _, id := range part {
			if _, err := batchAdmit(ctx, tx, id, projectID); err != nil {
				return fmt.Errorf("re-admit %s: %w", id, err)
			}
		}
	}
	return nil
}

// nullID binds an optional id: 0 as NULL.
func nullID(id int64) any {
	if id == 0 {
		return nil
	}
	return id
}

// BatchWaiting returns those of ids that wait in the project's waiting set
// (admitted, not claimed), in the order given: culprit isolation's "the
// rest of a failed batch still to be tried".
func (s *Store) BatchWaiting(ctx context.Context, projectID int64, ids []string) ([]string, error) {
	waiting := map[string]bool{}
	for _, part := range chunk(ids, InChunkSize) {
		a := []any{projectID}
		for _, id := range part {
			a = append(a, id)
		}
		rows, err := s.db.QueryContext(ctx, "SELECT operation_id FROM merge_batch_request"+
			" WHERE project_id = ? AND batch_id IS NULL AND operation_id IN ("+placeholders(len(part))+")", a...)
		if err != nil {
			return nil, fmt.Errorf("waiting of project %d: %w", projectID, translate(err))
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				_ = rows.Close()
				return nil, err
			}
			waiting[id] = true
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return nil, fmt.Errorf("waiting of project %d: %w", projectID, translate(err))
		}
	}
	out := make([]string, 0, len(waiting))
	for _, id := range ids {
		if waiting[id] {
			out = append(out, id)
		}
	}
	return out, nil
}
