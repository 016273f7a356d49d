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
// transaction. operationStepInsert calls it with what the rows it
// appended change (accessChanges) and at, their created_at bound as an
// argument (the clock read once for them). So every path that moves a
// binding — BindingAdvance (deploy callback, reconciliation),
// TransitionMany and BatchApply (a batch's members), WorkComplete (a
// removal with nothing to remove), the withdrawal and the callbacks —
// records the access by the same code, and a period exists exactly when
// the move that made it committed.
//
// domain.HadAccessChangeOf classifies each row. Rows that change
// nothing cost nothing (not even the clock read); otherwise, per chunk
// of at most InChunkSize operations, a fixed number of statements
// whatever the chunk's size:
//
//  1. one read of the operations (subject, target, approval, MR and its
//     merge commit — a batch member's are its batch's); every period of
//     the chunk starts or ends at the one instant at, the rows' history
//     time;
//  2. one plain read of the open periods of every (target, subject) the
//     chunk touches, on uk_access_interval_open, and one UPDATE ending
//     those found — a removal in effect, or the period a renewal (or any
//     newer grant) replaces — by primary key, so it locks exactly the
//     rows it ends (accessEndOpen says why not by the unique key);
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
	approvalID, mergeSHA         sql.NullString
	mrIID                        sql.NullInt64
	// repoEntry: the removal of an entry changeflow did not write
	// (operation.review_item_id): its confirmation ends the entry's repo
	// period as well.
	repoEntry bool
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
	if err := accessEndOpen(ctx, tx, d, ops, at); err != nil {
		return err
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
	const cols = 8
	ins := make([]any, 0, cols*len(opens))
	for _, o := range opens {
		ins = append(ins, o.subject, o.target, at, AccessSourceChangeflow, o.operationID, o.approvalID, o.mrIID, o.mergeSHA)
	}
	if _, err := tx.ExecContext(ctx,
		"INSERT INTO access_interval (subject, target_key, from_at, source, operation_id, approval_id, mr_iid, merge_sha) VALUES "+
			valuesRows(len(opens), cols), ins...); err != nil {
		return fmt.Errorf("open periods: %w", translate(err))
	}
	return nil
}

// accessOperations reads the operations ids name, in operationId order.
func accessOperations(ctx context.Context, tx *sql.Tx, ids []string) ([]accessOperation, error) {
	rows, err := tx.QueryContext(ctx,
		"SELECT o.operation_id, o.subject, o.target_key, o.approval_id, COALESCE(o.mr_iid, mb.mr_iid), COALESCE(o.merge_sha, mb.merge_sha),"+
			" o.review_item_id IS NOT NULL"+
			" FROM operation o LEFT JOIN merge_batch mb ON mb.id = o.batch_id"+
			" WHERE o.operation_id IN ("+placeholders(len(ids))+") ORDER BY o.operation_id", args(ids)...)
	if err != nil {
		return nil, fmt.Errorf("read operations: %w", translate(err))
	}
	defer rows.Close()
	var out []accessOperation
	for rows.Next() {
		var o accessOperation
		if err := rows.Scan(&o.operationID, &o.subject, &o.target, &o.approvalID, &o.mrIID, &o.mergeSHA, &o.repoEntry); err != nil {
			return nil, fmt.Errorf("read operations: %w", err)
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read operations: %w", translate(err))
	}
	return out, nil
}

// accessEndOpen ends the open period of each of ops' (target, subject),
// naming the operation whose effect ended it and that operation's merge
// commit (end_sha: the removal's, or the renewal's that rewrote the entry;
// NULL when it merged nothing — a removal that found no entry to remove):
// a plain read of the open
// rows through uk_access_interval_open, then one UPDATE of exactly the
// rows found, by primary key.
//
// Why not one UPDATE by the unique key: most moves that open a period
// find none open (a new grant), and on MariaDB an UPDATE whose key finds
// no row gap-locks the key's gap under REPEATABLE READ; two transactions
// confirming new grants of one target hold the same gap and then both
// insert into it — a deadlock, rolled back and retried (InTx). The plain
// read takes no lock, and it sees every period of these relationships:
// each was written by a move of the relationship's binding, which this
// transaction has locked at the version its guarded write named (I6), so
// a move committed after this transaction's snapshot would have failed
// that guard. The UPDATE is count-checked all the same: a row gone
// meanwhile is domain.ErrPreempted, never a silent miss.
func accessEndOpen(ctx context.Context, tx *sql.Tx, d Dialect, ops []accessOperation, at any) error {
	keys := make([]any, 0, 4*len(ops))
	ender := make(map[[2]string]accessOperation, len(ops))
	n := 0
	for _, o := range ops {
		keys = append(keys, o.target, o.subject, AccessSourceChangeflow, 1)
		n++
		if o.repoEntry {
			// The removal of a repo entry ends that entry's period, at the
			// removal's confirmation (the repository reader leaves it).
			keys = append(keys, o.target, o.subject, AccessSourceRepo, 1)
			n++
		}
		ender[[2]string{o.target, o.subject}] = o
	}
	rows, err := tx.QueryContext(ctx,
		"SELECT id, target_key, subject FROM access_interval"+d.forceIndex("uk_access_interval_open")+
			" WHERE "+d.keyTuplesIn(n, "target_key", "subject", "source", "open_slot"), keys...)
	if err != nil {
		return fmt.Errorf("read open periods: %w", translate(err))
	}
	defer rows.Close()
	var (
		caseSQL string
		cases   []any
		shas    []any
		ids     []any
	)
	for rows.Next() {
		var (
			id              int64
			target, subject string
		)
		if err := rows.Scan(&id, &target, &subject); err != nil {
			return fmt.Errorf("read open periods: %w", err)
		}
		e := ender[[2]string{target, subject}]
		caseSQL += " WHEN ? THEN ?"
		cases = append(cases, id, e.operationID)
		shas = append(shas, id, e.mergeSHA)
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read open periods: %w", translate(err))
	}
	_ = rows.Close()
	if len(ids) == 0 {
		return nil
	}
	vals := append(append(append([]any{at}, cases...), shas...), ids...)
	if err := execN(ctx, tx, int64(len(ids)),
		"UPDATE access_interval "+d.PrimaryKeyHint()+" SET until_at = ?, end_operation_id = CASE id"+caseSQL+" END,"+
			" end_sha = CASE id"+caseSQL+" END"+
			" WHERE until_at IS NULL AND id IN ("+placeholders(len(ids))+")", vals...); err != nil {
		return fmt.Errorf("end open periods: %w", err)
	}
	return nil
}
