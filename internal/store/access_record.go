package store

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"time"

	"changeflow/internal/domain"
)

// Access sources (access_interval.source).
const (
	// AccessSourceChangeflow: a period changeflow's own records prove — a
	// grant or renewal whose deploy confirmation it recorded.
	AccessSourceChangeflow = "changeflow"
	// AccessSourceRepo: a period read from the binding file's history on
	// the default branch, for an entry changeflow did not write.
	AccessSourceRepo = "repo"
)

// accessRecord writes what the step-history rows of one transaction do to
// the access history (docs/storage.md, "access_interval"), in that same
// transaction: operationStepInsert calls it with what the rows it
// appended change (accessChanges) and their created_at, the clock it
// read once for them (at, bound), so every path that moves a binding — BindingAdvance (deploy
// callback, reconciliation), TransitionMany and BatchApply (a batch's
// members), WorkComplete (a removal with nothing to remove), the
// withdrawal and the callbacks — records the access by the same code, and
// a period exists exactly when the move that made it committed.
//
// domain.HadAccessChangeOf classifies each row. Rows that change
// nothing cost nothing (not even the clock read); otherwise, per chunk of at most InChunkSize
// operations, a fixed number of statements whatever the chunk's size:
//
//  1. one read of the operations (subject, target, approval, MR — a batch
//     member's MR is its batch's); every period of the chunk starts or
//     ends at the one instant at, the rows' history time;
//  2. one UPDATE ending the open period of every (target, subject) the
//     chunk touches — a removal in effect, or the period a renewal (or
//     any newer grant) replaces — pinned to uk_access_interval_open, so
//     it reads and locks exactly the open rows it names;
//  3. one multi-row INSERT of the new periods.
//
// Ending before opening keeps uk_access_interval_open true at every
// statement, and a renewal's period starts at the very instant its
// grant's ends, so an "at" question about any instant finds exactly one.
func accessRecord(ctx context.Context, tx *sql.Tx, d Dialect, change map[string]domain.HadAccessChange, at any) error {
	ids := slices.Sorted(maps.Keys(change))
	for _, part := range chunk(ids, InChunkSize) {
		if err := accessRecordChunk(ctx, tx, part, change, d, at); err != nil {
			return fmt.Errorf("record access history: %w", err)
		}
	}
	return nil
}

// accessChanges is what rows do to the access history, by operation;
// empty for rows that change nothing (almost every row).
func accessChanges(rows []operationStepRow) map[string]domain.HadAccessChange {
	var change map[string]domain.HadAccessChange
	for _, r := range rows {
		c := domain.HadAccessChangeOf(r.fromBinding, r.toBinding, domain.StepStatus(r.toStep))
		if c == domain.HadAccessUnchanged {
			continue
		}
		if change == nil {
			change = map[string]domain.HadAccessChange{}
		}
		change[r.operationID] = c
	}
	return change
}

// txNow reads the database clock inside tx.
func txNow(ctx context.Context, tx *sql.Tx, d Dialect) (time.Time, error) {
	var v any
	if err := tx.QueryRowContext(ctx, "SELECT "+d.Now()).Scan(&v); err != nil {
		return time.Time{}, fmt.Errorf("read the database clock: %w", translate(err))
	}
	return clockValue(v)
}

// accessOperation is what accessRecordChunk reads of one operation.
type accessOperation struct {
	operationID, subject, target string
	approvalID                   sql.NullString
	mrIID                        sql.NullInt64
}

// accessRecordChunk applies accessRecord's three statements to ids.
func accessRecordChunk(ctx context.Context, tx *sql.Tx, ids []string, change map[string]domain.HadAccessChange, d Dialect, at any) error {
	ops, err := accessOperations(ctx, tx, ids)
	if err != nil {
		return err
	}
	if len(ops) == 0 {
		return nil
	}
	// 2. End the open period of each (target, subject), naming the
	// operation that ended it.
	cases, keys := make([]any, 0, 3*len(ops)), make([]any, 0, 4*len(ops))
	caseSQL := ""
	for _, o := range ops {
		caseSQL += " WHEN target_key = ? AND subject = ? THEN ?"
		cases = append(cases, o.target, o.subject, o.operationID)
		keys = append(keys, o.target, o.subject, AccessSourceChangeflow, 1)
	}
	vals := append(append([]any{at}, cases...), keys...)
	if _, err := tx.ExecContext(ctx,
		"UPDATE access_interval"+d.forceIndex("uk_access_interval_open")+
			" SET until_at = ?, end_operation_id = CASE"+caseSQL+" END WHERE "+
			d.keyTuplesIn(len(ops), "target_key", "subject", "source", "open_slot"), vals...); err != nil {
		return fmt.Errorf("end open periods: %w", translate(err))
	}
	// 3. Open the periods of the grants and renewals now in effect.
	var opens []accessOperation
	for _, o := range ops {
		if change[o.operationID] == domain.HadAccessOpens {
			opens = append(opens, o)
		}
	}
	if len(opens) == 0 {
		return nil
	}
	const cols = 7
	ins := make([]any, 0, cols*len(opens))
	for _, o := range opens {
		ins = append(ins, o.subject, o.target, at, AccessSourceChangeflow, o.operationID, o.approvalID, o.mrIID)
	}
	if _, err := tx.ExecContext(ctx,
		"INSERT INTO access_interval (subject, target_key, from_at, source, operation_id, approval_id, mr_iid) VALUES "+
			valuesRows(len(opens), cols), ins...); err != nil {
		return fmt.Errorf("open periods: %w", translate(err))
	}
	return nil
}

// accessOperations reads the operations ids name, in operationId order.
func accessOperations(ctx context.Context, tx *sql.Tx, ids []string) ([]accessOperation, error) {
	rows, err := tx.QueryContext(ctx,
		"SELECT o.operation_id, o.subject, o.target_key, o.approval_id, COALESCE(o.mr_iid, mb.mr_iid)"+
			" FROM operation o LEFT JOIN merge_batch mb ON mb.id = o.batch_id"+
			" WHERE o.operation_id IN ("+placeholders(len(ids))+") ORDER BY o.operation_id", args(ids)...)
	if err != nil {
		return nil, fmt.Errorf("read operations: %w", translate(err))
	}
	defer rows.Close()
	var out []accessOperation
	for rows.Next() {
		var o accessOperation
		if err := rows.Scan(&o.operationID, &o.subject, &o.target, &o.approvalID, &o.mrIID); err != nil {
			return nil, fmt.Errorf("read operations: %w", err)
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read operations: %w", translate(err))
	}
	return out, nil
}
