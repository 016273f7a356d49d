package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"changeflow/internal/domain"
	"changeflow/internal/notify"
)

// batchSlot is the answer of batchTakeSlot: the new RUNNING batch, or
// occupied when the project already has an active batch.
type batchSlot struct {
	batchID  int64
	occupied bool
}

// batchTakeSlot takes a project's single active slot (I1) by inserting a
// RUNNING batch, as the first write of the claim transaction (BatchClaim
// takes the slot and fills it in one transaction, so no member-less batch
// is ever committed; there is deliberately no standalone form). The
// generated active_slot column plus its unique index let the insert
// succeed for one active batch per project only; a duplicate key is the
// answer "slot occupied" (occupied, nil error), not a failure. A duplicate
// fails only this statement on both drivers, so the caller's transaction
// stays usable (TestDuplicateInsideTransactionLeavesItUsable). On MariaDB
// the insert waits while another transaction holds an uncommitted insert
// of the same slot: domain.ErrBusy after the lock wait.
//
// builder (may be empty: not recorded) is the instance whose round will
// build the batch's MR (BatchResumable).
func batchTakeSlot(ctx context.Context, q batchDB, projectID int64, builder string) (batchSlot, error) {
	res, err := q.ExecContext(ctx, "INSERT INTO merge_batch (project_id, status, builder) VALUES (?, ?, NULLIF(?, ''))",
		projectID, domain.BatchRunning, builder)
	if err != nil {
		err = translate(err)
		if errors.Is(err, domain.ErrDuplicate) {
			return batchSlot{occupied: true}, nil
		}
		return batchSlot{}, err
	}
	id, err := res.LastInsertId()
	if err != nil {
		return batchSlot{}, fmt.Errorf("new batch id: %w", err)
	}
	return batchSlot{batchID: id}, nil
}

// BatchTransitionLegal reports whether a batch may move from one status to
// another: the batch part of the central transition table (I7),
// domain.BatchTransitionLegal, where the moves are listed and explained.
// Every guarded batch write (batchSetState) checks it first.
func BatchTransitionLegal(from, to domain.BatchStatus) bool {
	return domain.BatchTransitionLegal(from, to)
}

// BatchResume moves a BLOCKED batch back to RUNNING (an operator fixed the
// cause and retriggers it), guarded on the version read. It clears the
// block's code and message and restarts the batch's clock: created_at
// becomes the database's now, because the timeout sweep measures
// batch.timeout from created_at and would otherwise settle a batch that
// was blocked for longer than that the moment it runs again. The slot is
// held throughout (BLOCKED and RUNNING both hold it). It returns the new
// version; domain.ErrPreempted when the batch is no longer BLOCKED at
// version.
func (s *Store) BatchResume(ctx context.Context, id, version int64) (int64, error) {
	err := retryConflict(ctx, func() error {
		return execN(ctx, s.db, 1,
			"UPDATE merge_batch SET status = ?, version = version + 1, failure_code = NULL, failure_message = NULL,"+
				" created_at = "+s.dialect.Now()+" WHERE id = ? AND status = ? AND version = ?",
			domain.BatchRunning, id, domain.BatchBlocked, version)
	})
	if err != nil {
		return 0, fmt.Errorf("resume batch %d: %w", id, err)
	}
	return version + 1, nil
}

// batchStateWrite is one guarded state write of a batch.
type batchStateWrite struct {
	id             int64
	from, to       domain.BatchStatus
	version        int64
	failureCode    string // written only when to is FAILED or BLOCKED
	failureMessage string
}

// batchSetState is the one guarded UPDATE every batch transition goes
// through (I6): it names the row, the status and the version the caller
// read, bumps the version, and must affect exactly one row. A miss is
// domain.ErrPreempted — someone else moved the batch first — and so is
// MariaDB's 1020 under snapshot isolation (translate). Entering SUCCEEDED or
// FAILED frees the project's slot in the same statement: active_slot is
// generated from status.
//
// It returns the new version. Callers that compose it with other writes
// run it first, so a losing path rolls back before it changed anything.
func batchSetState(ctx context.Context, q batchDB, w batchStateWrite) (int64, error) {
	if !BatchTransitionLegal(w.from, w.to) {
		return 0, fmt.Errorf("batch %d: illegal transition %s → %s", w.id, w.from, w.to)
	}
	var code, msg any // NULL unless the target state explains itself
	if w.to == domain.BatchFailed || w.to == domain.BatchBlocked {
		code, msg = batchText(w.failureCode, 64), batchText(w.failureMessage, 512)
	}
	res, err := q.ExecContext(ctx,
		"UPDATE merge_batch SET status = ?, version = version + 1, failure_code = COALESCE(?, failure_code),"+
			" failure_message = COALESCE(?, failure_message)"+
			" WHERE id = ? AND status = ? AND version = ?",
		w.to, code, msg, w.id, w.from, w.version)
	if err != nil {
		return 0, translate(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("rows affected: %w", err)
	}
	if n != 1 {
		return 0, fmt.Errorf("batch %d is no longer %s at version %d: %w", w.id, w.from, w.version, domain.ErrPreempted)
	}
	if w.to == domain.BatchBlocked {
		// The operators hear of it (batch.blocked), in the transaction of
		// the block: a blocked batch holds its project's slot until a
		// person settles it.
		if err := batchBlockedEvent(ctx, q, w); err != nil {
			return 0, err
		}
	}
	return w.version + 1, nil
}

// batchBlockedEvent writes the batch.blocked event of w's batch, keyed
// by the version that blocked it: one event per block, however often the
// block's transaction is retried.
func batchBlockedEvent(ctx context.Context, q batchDB, w batchStateWrite) error {
	var project int64
	if err := q.QueryRowContext(ctx, "SELECT project_id FROM merge_batch WHERE id = ?", w.id).Scan(&project); err != nil {
		return fmt.Errorf("read blocked batch %d: %w", w.id, translate(err))
	}
	why := w.failureMessage
	if why == "" {
		why = w.failureCode
	}
	return outboxAdd(ctx, q, []OutboxNew{{
		Kind: notify.KindBatchBlocked, OrderKey: "batch:" + strconv.FormatInt(w.id, 10),
		DedupeKey: fmt.Sprintf("blocked:%d:%d", w.id, w.version+1),
		Data: OutboxData{Data: notify.Data{BatchID: w.id, Project: strconv.FormatInt(project, 10),
			WhatToDo: clipRunes(why, 300)}},
	}})
}

// BatchBlockParams names the RUNNING batch to block, as read.
type BatchBlockParams struct {
	ID      int64
	Version int64 // as read; the write fails if the batch changed since
	// Why it needs a person (kept in failure_code / failure_message).
	Code    string
	Message string
}

// BatchBlock moves a RUNNING batch to BLOCKED: it needs a person and keeps
// its project's slot, so no later batch of the project starts until an
// operator settles it (BatchApply with SettleTo, From BLOCKED). It returns
// the new version, or domain.ErrPreempted when the batch was not RUNNING at
// Version any more.
func (s *Store) BatchBlock(ctx context.Context, p BatchBlockParams) (int64, error) {
	var v int64
	// One transaction: the block and its batch.blocked event.
	err := s.InTx(ctx, nil, func(tx *sql.Tx) (err error) {
		v, err = batchSetState(ctx, tx, batchStateWrite{
			id: p.ID, from: domain.BatchRunning, to: domain.BatchBlocked, version: p.Version,
			failureCode: p.Code, failureMessage: p.Message,
		})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("block batch %d: %w", p.ID, err)
	}
	return v, nil
}

// batchText binds s for a VARCHAR(n) column: "" as NULL, and cut to at
// most n bytes on a rune boundary, because MariaDB's strict mode refuses an
// over-long value rather than cutting it.
func batchText(s string, n int) any {
	if s == "" {
		return nil
	}
	if len(s) > n {
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	return s
}
