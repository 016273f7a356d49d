package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"changeflow/internal/domain"
)

// State as version (I6): every write of an operation's step or a binding's
// status names the state it expects AND the row's version, bumps the
// version, and checks the affected-row count; a miss is
// domain.ErrPreempted. The status alone is not enough: a row can leave a
// state and come back to it (MERGING → HANDLE_FAILED → retrigger →
// MERGING) between a caller's read and its write, and a status-only guard
// would let the stale write through — the ABA problem.

// forUpdate returns the clause that makes a SELECT take exclusive row
// locks until the transaction ends: " FOR UPDATE" on MariaDB/MySQL, "" on
// SQLite. SQLite needs none: every write transaction begins IMMEDIATE
// (_txlock=immediate, dsn.go) and holds the database's single write lock
// from BEGIN to COMMIT, so what it reads cannot change under it.
func (d Dialect) forUpdate() string {
	if d.IsMySQL() {
		return " FOR UPDATE"
	}
	return ""
}

// forceIndex returns the hint that keeps a statement on index, placed
// right after the table name. Every guarded write is pinned to the key it
// addresses, because it must lock only the rows it names, and MariaDB
// 10.11 does not always plan it that way: with a key list covering most
// of a small table it chose a full scan of the primary key (EXPLAIN: 400
// of 500 operations → type=index on PRIMARY), and with a status condition
// next to the unique key it chose the (status, updated_at) index. Under
// REPEATABLE READ both lock every row they pass, so unrelated transitions
// wait or deadlock (see Dialect.PrimaryKeyHint). SQLite has no row locks, but
// without INDEXED BY it drives the same UPDATE from the status index and
// probes the key list per row.
func (d Dialect) forceIndex(index string) string {
	if d.IsMySQL() {
		return " FORCE INDEX (" + index + ")"
	}
	return " INDEXED BY " + index
}

// keyTuplesIn returns a condition true for rows whose cols equal one of n
// tuples, bound tuple by tuple (c1, c2, c1, c2, …):
//
//	MariaDB: ((c1 = ? AND c2 = ?) OR (c1 = ? AND c2 = ?) …)
//	SQLite:  (c1, c2) IN (VALUES (?, ?), (?, ?) …)
//
// MariaDB turns the disjunction into one range per tuple on the forced
// unique index; it has no row-value IN over VALUES that plans as well.
// SQLite's planner, in turn, spends quadratic time on a 500-term OR
// (0.65 s per statement under the race detector) but probes the index
// once per VALUES row.
func (d Dialect) keyTuplesIn(n int, cols ...string) string {
	if d.IsMySQL() {
		eq := make([]string, len(cols))
		for i, c := range cols {
			eq[i] = c + " = ?"
		}
		return "(" + orTerms(n, strings.Join(eq, " AND ")) + ")"
	}
	return "(" + strings.Join(cols, ", ") + ") IN (VALUES " + valuesRows(n, len(cols)) + ")"
}

// OperationSetStepIfVersionParams moves one operation from FromStep at
// Version to ToStep.
type OperationSetStepIfVersionParams struct {
	OperationID string
	FromStep    int
	ToStep      int
	// Version is the operation's version read together with FromStep.
	Version int64
	// Actor and Note go to the step history.
	Actor string
	Note  string
}

// OperationSetStepIfVersion writes ToStep on the operation if it is still
// in FromStep at Version, bumps the version, and appends the step-history
// row, in one transaction. It returns the new version. A miss (another
// writer got there first, even one that came back to FromStep) returns an
// error wrapping domain.ErrPreempted and writes nothing.
func (s *Store) OperationSetStepIfVersion(ctx context.Context, p OperationSetStepIfVersionParams) (int64, error) {
	res, err := s.Transition(ctx, TransitionParams{
		OperationID: p.OperationID, FromStep: p.FromStep, ToStep: p.ToStep, Version: p.Version,
		Actor: p.Actor, Note: p.Note,
	})
	if err != nil {
		return 0, err
	}
	return res.OperationVersion, nil
}

// BindingMove is the binding half of a transition: the status and version
// the caller read, and the status to write.
type BindingMove struct {
	From    domain.BindingStatus
	To      domain.BindingStatus
	Version int64
}

// TransitionParams moves one operation's step and, optionally, its
// binding's status, together (two-layer state in one transaction).
type TransitionParams struct {
	OperationID string
	FromStep    int
	ToStep      int
	// Version is the operation's version read together with FromStep.
	Version int64
	// Binding moves the binding the operation owns; nil leaves it alone.
	Binding *BindingMove
	Actor   string
	Note    string
}

// TransitionResult carries the versions a transition wrote.
type TransitionResult struct {
	OperationVersion int64
	// BindingVersion is 0 when the binding was not moved.
	BindingVersion int64
}

// Transition moves one operation (and optionally its binding) in one
// transaction; see TransitionMany for the guards and the order of writes.
func (s *Store) Transition(ctx context.Context, p TransitionParams) (TransitionResult, error) {
	many := TransitionManyParams{
		FromStep: p.FromStep, ToStep: p.ToStep, Actor: p.Actor, Note: p.Note,
		Rows: []TransitionRow{{OperationID: p.OperationID, Version: p.Version}},
	}
	if p.Binding != nil {
		many.BindingFrom, many.BindingTo = p.Binding.From, p.Binding.To
		many.Rows[0].BindingVersion = p.Binding.Version
	}
	if err := s.TransitionMany(ctx, many); err != nil {
		return TransitionResult{}, err
	}
	res := TransitionResult{OperationVersion: p.Version + 1}
	if p.Binding != nil {
		res.BindingVersion = p.Binding.Version + 1
	}
	return res, nil
}

// TransitionRow is one operation of a TransitionMany, with the versions
// the caller read.
type TransitionRow struct {
	OperationID string
	Version     int64
	// BindingVersion is the version of the binding the operation owns;
	// ignored when the transition leaves bindings alone.
	BindingVersion int64
}

// TransitionManyParams moves several operations from one step to another
// (a batch's members), and optionally their bindings from one status to
// another.
type TransitionManyParams struct {
	FromStep int
	ToStep   int
	// BindingFrom and BindingTo move every row's binding; both "" leave
	// the bindings alone.
	BindingFrom domain.BindingStatus
	BindingTo   domain.BindingStatus
	Rows        []TransitionRow
	Actor       string
	Note        string

	// beforeCommit, when set, runs after the writes on the open
	// transaction; tests hold a transition open with it.
	beforeCommit func()
}

func (p TransitionManyParams) validate() error {
	switch {
	case len(p.Rows) == 0:
		return errors.New("no operations to move")
	case p.ToStep <= 0 || p.FromStep <= 0:
		return fmt.Errorf("step codes %d → %d are not steps", p.FromStep, p.ToStep)
	case (p.BindingFrom == "") != (p.BindingTo == ""):
		return errors.New("a binding move needs both its from and to status")
	case p.BindingFrom != "" && (!p.BindingFrom.Valid() || !p.BindingTo.Valid()):
		return fmt.Errorf("unknown binding status in %q → %q", p.BindingFrom, p.BindingTo)
	}
	seen := make(map[string]bool, len(p.Rows))
	for _, r := range p.Rows {
		if seen[r.OperationID] {
			return fmt.Errorf("operation %s listed twice", r.OperationID)
		}
		seen[r.OperationID] = true
	}
	return nil
}

// TransitionMany moves every row from FromStep to ToStep — and, when
// BindingFrom/BindingTo are set, every row's binding from BindingFrom to
// BindingTo — in one transaction, or nothing:
//
//  1. the guarded operation write comes first, per chunk of ≤ 500 rows:
//     UPDATE operation SET step_status = to, version = version + 1
//     WHERE step_status = from AND (operation_id, version) IN (…tuples),
//     and the affected-row count must equal the chunk. A second path
//     settling the same operations therefore fails at its first statement
//     and rolls back before it has written anything else;
//  2. then the bindings, in the fixed lock order operation → binding:
//     UPDATE binding … WHERE status = from AND (subject_id,
//     target_key, operation_id, version) IN (…tuples), again count-checked. operation_id pins ownership: a binding re-applied for
//     a newer request is not moved by the old one;
//  3. one multi-row INSERT of step history per chunk.
//
// Both UPDATEs are pinned to their unique key (forceIndex), so they lock
// exactly the listed rows.
//
// Any miss returns an error wrapping domain.ErrPreempted. Rows are
// processed in operationId order so that two overlapping transitions take
// their row locks in the same order. The statement count is a few per
// 500 rows, never one per row.
func (s *Store) TransitionMany(ctx context.Context, p TransitionManyParams) error {
	if err := p.validate(); err != nil {
		return fmt.Errorf("transition: %w", err)
	}
	// Checked before the transaction too, so an illegal move does not take
	// the write lock (SQLite) for nothing; transitionTx checks again for
	// the callers that reach it directly.
	if err := p.checkTable(); err != nil {
		return fmt.Errorf("transition %d operation(s)%s: %w", len(p.Rows), bindingMoveText(p), err)
	}
	err := s.InTx(ctx, nil, func(tx *sql.Tx) error {
		return transitionTx(ctx, tx, s.dialect, p)
	})
	if err != nil {
		return fmt.Errorf("transition %d operation(s) %d → %d%s: %w", len(p.Rows), p.FromStep, p.ToStep, bindingMoveText(p), err)
	}
	return nil
}

func bindingMoveText(p TransitionManyParams) string {
	if p.BindingFrom == "" {
		return ""
	}
	return fmt.Sprintf(" (binding %s → %s)", p.BindingFrom, p.BindingTo)
}

// checkTable checks the move against the central transition table
// (I7): the step from FromStep to ToStep and, when bindings move, the
// binding from BindingFrom to BindingTo. The guarded UPDATEs write only
// rows that are still in exactly these from-states, so checking the
// parameters checks every row that can be written. An illegal move is a
// bug in the caller, never a race: the error wraps
// domain.ErrIllegalTransition, not domain.ErrPreempted.
func (p TransitionManyParams) checkTable() error {
	if err := domain.CheckStep(domain.StepStatus(p.FromStep), domain.StepStatus(p.ToStep)); err != nil {
		return err
	}
	if p.BindingFrom != "" {
		if err := domain.CheckBinding(p.BindingFrom, p.BindingTo); err != nil {
			return err
		}
	}
	return nil
}

// transitionTx is TransitionMany inside tx. It checks the table before its
// first write, so every caller (TransitionMany, Transition, BatchApply's
// member moves) is checked, and an illegal move leaves nothing behind: the
// caller's transaction rolls back on the error.
func transitionTx(ctx context.Context, tx *sql.Tx, d Dialect, p TransitionManyParams) error {
	if err := p.checkTable(); err != nil {
		return err
	}
	rows := slices.SortedFunc(slices.Values(p.Rows), func(a, b TransitionRow) int {
		return cmp.Compare(a.OperationID, b.OperationID)
	})
	parts := chunk(rows, InChunkSize)

	// 1. Operations: the guarded write first.
	for _, part := range parts {
		vals := []any{p.ToStep, p.FromStep}
		for _, r := range part {
			vals = append(vals, r.OperationID, r.Version)
		}
		err := execN(ctx, tx, int64(len(part)),
			"UPDATE operation"+d.forceIndex("uk_operation_operation_id")+
				" SET step_status = ?, version = version + 1 WHERE step_status = ? AND "+
				d.keyTuplesIn(len(part), "operation_id", "version"), vals...)
		if err != nil {
			return fmt.Errorf("move operations: %w", err)
		}
	}

	// 2. Bindings, after every operation lock is held.
	moved := map[string][2]domain.BindingStatus{}
	if p.BindingFrom != "" {
		for _, part := range parts {
			if err := transitionBindings(ctx, tx, d, p, part, moved); err != nil {
				return err
			}
		}
	}

	// 3. History, with each row's own binding move (a revocation's is
	// mapped, or none).
	hist := make([]operationStepRow, 0, len(rows))
	for _, r := range rows {
		from, to := p.BindingFrom, p.BindingTo
		if m, ok := moved[r.OperationID]; ok {
			from, to = m[0], m[1]
		}
		hist = append(hist, operationStepRow{
			operationID: r.OperationID, fromStep: p.FromStep, toStep: p.ToStep,
			fromBinding: from, toBinding: to, actor: p.Actor, note: p.Note,
		})
	}
	if err := operationStepInsert(ctx, tx, d, hist); err != nil {
		return err
	}
	if p.beforeCommit != nil {
		p.beforeCommit()
	}
	return nil
}

// transitionBindings moves the bindings of one chunk of operations. The
// bindings are addressed through their unique key (subject, target), read
// from the operation rows this transaction already holds, so MariaDB locks
// exactly those rows and no gaps of the operation_id index.
//
// The move is named in the grant's vocabulary; a revocation's rows move by
// its mapping (domain.OperationKind.Binding), each kind in its own
// statement. Where the mapping makes the move a no-op (MR_CREATING →
// MR_CREATED is REVOKING → REVOKING) the row is still written — version+1,
// guarded on its status, owner and version like any other — so the
// caller's version bookkeeping holds for both kinds and the write still
// pins ownership. moved receives each row's real move ("" → "" for the
// no-op) for the history.
func transitionBindings(ctx context.Context, tx *sql.Tx, d Dialect, p TransitionManyParams, part []TransitionRow, moved map[string][2]domain.BindingStatus) error {
	ids := make([]string, len(part))
	for i, r := range part {
		ids[i] = r.OperationID
	}
	keys, err := operationKeys(ctx, tx, ids)
	if err != nil {
		return err
	}
	byKind := map[domain.OperationKind][]TransitionRow{}
	var kinds []domain.OperationKind
	for _, r := range part {
		k, ok := keys[r.OperationID]
		if !ok {
			return fmt.Errorf("operation %s vanished under its lock: %w", r.OperationID, domain.ErrPreempted)
		}
		if _, seen := byKind[k.kind]; !seen {
			kinds = append(kinds, k.kind)
		}
		byKind[k.kind] = append(byKind[k.kind], r)
	}
	for _, kind := range kinds {
		rows := byKind[kind]
		from, to := kind.Binding(p.BindingFrom), kind.Binding(p.BindingTo)
		if from != to {
			if err := domain.CheckBinding(from, to); err != nil {
				return err
			}
		}
		vals := []any{string(to), string(from)}
		for _, r := range rows {
			k := keys[r.OperationID]
			vals = append(vals, k.subject, k.target, r.OperationID, r.BindingVersion)
			if kind != domain.OperationGrant {
				if from == to {
					moved[r.OperationID] = [2]domain.BindingStatus{}
				} else {
					moved[r.OperationID] = [2]domain.BindingStatus{from, to}
				}
			}
		}
		err = execN(ctx, tx, int64(len(rows)),
			"UPDATE binding"+d.forceIndex("uk_binding_subject_target")+
				" SET status = ?, version = version + 1 WHERE status = ? AND "+
				d.keyTuplesIn(len(rows), "subject_id", "target_key", "operation_id", "version"), vals...)
		if err != nil {
			return fmt.Errorf("move bindings: %w", err)
		}
	}
	return nil
}

// relationshipKey is a binding's unique key, and the kind of the
// operation that owns it.
type relationshipKey struct {
	subject, target string
	kind            domain.OperationKind
}

// operationKeys returns the (subject, target) of each operation in ids.
func operationKeys(ctx context.Context, tx *sql.Tx, ids []string) (map[string]relationshipKey, error) {
	rows, err := tx.QueryContext(ctx,
		"SELECT operation_id, subject, target_key, "+kindOf("")+" FROM operation WHERE operation_id IN ("+placeholders(len(ids))+")",
		args(ids)...)
	if err != nil {
		return nil, fmt.Errorf("read relationships: %w", translate(err))
	}
	defer rows.Close()
	out := make(map[string]relationshipKey, len(ids))
	for rows.Next() {
		var id string
		var k relationshipKey
		if err := rows.Scan(&id, &k.subject, &k.target, &k.kind); err != nil {
			return nil, fmt.Errorf("read relationships: %w", err)
		}
		out[id] = k
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read relationships: %w", translate(err))
	}
	return out, nil
}

// orTerms returns n copies of "(term)" joined by " OR ".
func orTerms(n int, term string) string {
	if n <= 0 {
		return ""
	}
	t := "(" + term + ")"
	return strings.Repeat(t+" OR ", n-1) + t
}
