package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"changeflow/internal/domain"
)

// ClaimOutcome is what a BatchClaim round ended with. Only ClaimClaimed
// wrote anything; every other outcome rolled back (or never began) and is
// an answer, not an error: the round ends and the next one tries again.
type ClaimOutcome int

// The outcomes of BatchClaim.
const (
	// ClaimClaimed: a new RUNNING batch holds the project's slot and the
	// oldest waiting requests (Claim.BatchID, Claim.Members).
	ClaimClaimed ClaimOutcome = iota + 1
	// ClaimSlotOccupied: the project already has an active (RUNNING or
	// BLOCKED) batch — seen by the pre-check, or by the slot's unique key.
	ClaimSlotOccupied
	// ClaimNothingWaiting: no request was waiting (pre-check), or none was
	// created before the database clock when the claim read (the claim
	// then rolled back its slot, so no member-less batch holds it).
	ClaimNothingWaiting
	// ClaimPreempted: the guarded UPDATE claimed fewer rows than the claim
	// read (or MariaDB reported 1020), so another writer changed the
	// waiting set in between; everything was rolled back.
	ClaimPreempted
	// ClaimBusy: a lock wait ran out (MariaDB 1205 after
	// BatchClaimParams.LockWait, SQLITE_BUSY after busy_timeout) or InnoDB
	// chose the claim as a deadlock victim on every attempt; everything was
	// rolled back.
	ClaimBusy
)

// String returns the outcome's name, for logs and metric labels.
func (o ClaimOutcome) String() string {
	switch o {
	case ClaimClaimed:
		return "claimed"
	case ClaimSlotOccupied:
		return "slot_occupied"
	case ClaimNothingWaiting:
		return "nothing_waiting"
	case ClaimPreempted:
		return "preempted"
	case ClaimBusy:
		return "busy"
	}
	return "unknown"
}

// Claim is the result of BatchClaim. BatchID and Members are set only for
// ClaimClaimed; Members are in queue order (created_at, id).
type Claim struct {
	Outcome ClaimOutcome
	BatchID int64
	Members []BatchMember
}

// DefaultClaimLockWait is the claim's lock wait on MariaDB when
// BatchClaimParams.LockWait is zero. A claim transaction lasts
// milliseconds; the only wait it should ever see is a concurrent claim's
// uncommitted slot insert, so a second is plenty, and a round that waits
// longer gives up ("busy, next round") rather than pile up behind it.
const DefaultClaimLockWait = time.Second

// BatchClaimParams configures one claim round.
type BatchClaimParams struct {
	ProjectID int64
	// MaxRequests caps the batch: the oldest MaxRequests waiting requests
	// are claimed. Must be positive; thousands are fine (IN lists and the
	// history insert are chunked at InChunkSize).
	MaxRequests int
	// LockWait is MariaDB's innodb_lock_wait_timeout for the claim's
	// session, whole seconds, at least 1 (default DefaultClaimLockWait).
	// SQLite waits for its single writer lock up to the DSN's busy_timeout.
	LockWait time.Duration
	// Only, when set, restricts the claim to these waiting requests (by
	// operationId; the oldest MaxRequests of them, queue order): culprit
	// isolation claims one half of a failed batch, whatever else waits.
	// Those not waiting (claimed, never admitted) are simply not claimed.
	Only []string
	// Builder is the instance id of the round that claims (instance.id):
	// recorded on the batch so that, if the round dies or gives up before
	// recording the MR, other rounds know whether to resume it at once
	// (BatchResumable). Empty: not recorded (such a batch is resumed only
	// after the minimum age).
	Builder string

	// afterRead, when set, runs between the read of the waiting set and the
	// guarded UPDATE, on the claim's open transaction. Tests use it to hold
	// the transaction open (I3) or to change the waiting set under it.
	afterRead func(ctx context.Context, tx *sql.Tx, batchID int64, read []BatchMember) error
	// lockingRead makes the read "… FOR UPDATE". Never set in production:
	// it exists so a test can show that the locking variant blocks
	// admissions on MariaDB — the reason the read is plain.
	lockingRead bool
}

// BatchClaim runs one claim round for a project (I1–I3):
//
//  1. Outside any transaction, one lock-free read answers "nothing waiting"
//     and "slot occupied" (a committed active batch) without taking the slot
//     and rolling it back every round — batches last minutes, rounds come
//     every few seconds.
//  2. In one transaction: take the slot by inserting a RUNNING batch; a
//     duplicate key is ClaimSlotOccupied.
//  3. A plain, non-locking read of the oldest waiting requests created
//     before the database clock, in (created_at, id) order. Empty: roll
//     back, so no member-less batch keeps the slot. Not FOR UPDATE: under
//     REPEATABLE READ that would next-key-lock the very range admissions
//     insert into (I3); other claimers are already kept out by the slot.
//  4. The guarded claim UPDATE … SET batch_id = ? WHERE batch_id IS NULL AND
//     id IN (…), at most InChunkSize ids per statement, pinned to the
//     primary key (Dialect.PrimaryKeyHint) so that it locks only the listed
//     rows. The summed row count must equal what was read, else everything
//     rolls back (ClaimPreempted).
//  5. The membership history, one multi-row INSERT per chunk.
//
// The statement count is constant plus two per InChunkSize requests.
// An InnoDB deadlock or a lost Galera certification (1213) re-runs the
// transaction (retryConflict): the race test meets deadlocks between a slot
// INSERT and a concurrent settlement's slot-freeing UPDATE; twin claims on
// two Galera nodes both insert the slot row and the loser, re-run, meets
// the winner's row as the duplicate key a single server gives (occupied). Lock waits that run out (MariaDB 1205, SQLITE_BUSY)
// and repeated deadlocks are ClaimBusy, "try next round"; an error is
// returned only for anything else.
//
// On SQLite the whole transaction holds the single writer lock
// (_txlock=immediate), so an admission arriving meanwhile waits the claim's
// few milliseconds and then commits; it never waits for the batch itself.
func (s *Store) BatchClaim(ctx context.Context, p BatchClaimParams) (Claim, error) {
	if p.MaxRequests <= 0 {
		return Claim{}, fmt.Errorf("claim project %d: MaxRequests must be positive, is %d", p.ProjectID, p.MaxRequests)
	}
	var waiting, occupied bool
	err := s.db.QueryRowContext(ctx,
		"SELECT EXISTS (SELECT 1 FROM merge_batch_request WHERE project_id = ? AND batch_id IS NULL),"+
			" EXISTS (SELECT 1 FROM merge_batch WHERE active_slot = ?)",
		p.ProjectID, p.ProjectID).Scan(&waiting, &occupied)
	if err != nil {
		return Claim{}, fmt.Errorf("claim project %d: pre-check: %w", p.ProjectID, translate(err))
	}
	switch {
	case !waiting:
		return Claim{Outcome: ClaimNothingWaiting}, nil
	case occupied:
		return Claim{Outcome: ClaimSlotOccupied}, nil
	}

	var claim Claim
	err = retryConflict(ctx, func() (err error) {
		claim, err = s.claimOnConn(ctx, p)
		return err
	})
	if err != nil {
		if errors.Is(err, domain.ErrBusy) {
			return Claim{Outcome: ClaimBusy}, nil
		}
		return Claim{}, fmt.Errorf("claim project %d: %w", p.ProjectID, err)
	}
	return claim, nil
}

// claimOnConn runs the claim transaction on a pinned connection whose
// session lock wait is the claim's own, restored afterwards.
func (s *Store) claimOnConn(ctx context.Context, p BatchClaimParams) (claim Claim, err error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return Claim{}, translate(err)
	}
	defer func() {
		if cErr := conn.Close(); cErr != nil && !errors.Is(cErr, sql.ErrConnDone) {
			err = errors.Join(err, cErr)
		}
	}()
	if s.dialect.IsMySQL() {
		wait := p.LockWait
		if wait <= 0 {
			wait = DefaultClaimLockWait
		}
		restore, err := setLockWait(ctx, conn, wait, s.opts.lockWaitTimeout)
		if err != nil {
			return Claim{}, err
		}
		defer restore()
	}

	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return Claim{}, translate(err)
	}
	claim, err = claimTx(ctx, tx, s.dialect, p)
	if err != nil || claim.Outcome != ClaimClaimed {
		if rbErr := tx.Rollback(); rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) {
			err = errors.Join(err, fmt.Errorf("rollback: %w", rbErr))
		}
		return claim, err
	}
	if err := tx.Commit(); err != nil {
		return Claim{}, fmt.Errorf("commit: %w", translate(err))
	}
	return claim, nil
}

// setLockWait sets MariaDB's session lock wait on conn and returns the
// function that restores the store's default. Should the restore fail
// (the server went away, say), the connection is discarded rather than
// returned to the pool with the claim's short wait.
func setLockWait(ctx context.Context, conn *sql.Conn, wait, restoreTo time.Duration) (restore func(), err error) {
	const q = "SET SESSION innodb_lock_wait_timeout = %d"
	seconds := func(d time.Duration) int { return max(1, int(d/time.Second)) }
	// The value is an integer of ours, formatted rather than bound: no
	// prepare round trip, and SET takes no placeholder on every server.
	if _, err := conn.ExecContext(ctx, fmt.Sprintf(q, seconds(wait))); err != nil {
		return nil, translate(err)
	}
	return func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := conn.ExecContext(rctx, fmt.Sprintf(q, seconds(restoreTo))); err != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}, nil
}

// claimTx is steps 2–5 of BatchClaim on tx. Only ClaimClaimed may be
// committed; the caller rolls back every other outcome and every error.
func claimTx(ctx context.Context, tx *sql.Tx, d Dialect, p BatchClaimParams) (Claim, error) {
	slot, err := batchTakeSlot(ctx, tx, p.ProjectID, p.Builder)
	switch {
	case err != nil:
		return Claim{}, fmt.Errorf("take slot: %w", err)
	case slot.occupied:
		return Claim{Outcome: ClaimSlotOccupied}, nil
	}

	read, err := claimReadWaiting(ctx, tx, d, p)
	switch {
	case err != nil:
		return Claim{}, fmt.Errorf("read waiting: %w", err)
	case len(read) == 0:
		return Claim{Outcome: ClaimNothingWaiting}, nil
	}

	if p.afterRead != nil {
		if err := p.afterRead(ctx, tx, slot.batchID, read); err != nil {
			return Claim{}, fmt.Errorf("claim hook: %w", err)
		}
	}

	claimed, err := claimMark(ctx, tx, d, slot.batchID, read)
	switch {
	case errors.Is(err, domain.ErrPreempted):
		return Claim{Outcome: ClaimPreempted}, nil
	case err != nil:
		return Claim{}, fmt.Errorf("mark claimed: %w", err)
	case claimed != len(read):
		return Claim{Outcome: ClaimPreempted}, nil
	}

	if err := claimRecordHistory(ctx, tx, slot.batchID, read); err != nil {
		return Claim{}, fmt.Errorf("membership history: %w", err)
	}
	return Claim{Outcome: ClaimClaimed, BatchID: slot.batchID, Members: read}, nil
}

// claimReadWaiting is the claim's plain read: the oldest waiting requests
// of the project created strictly before the database clock. It is a range
// read of idx_merge_batch_request_waiting in index order (no filesort) and,
// being a consistent read, takes no lock.
func claimReadWaiting(ctx context.Context, tx *sql.Tx, d Dialect, p BatchClaimParams) ([]BatchMember, error) {
	q := "SELECT id, operation_id FROM merge_batch_request" +
		" WHERE project_id = ? AND batch_id IS NULL AND created_at < " + d.Now()
	a := []any{p.ProjectID}
	if len(p.Only) > 0 {
		q += " AND operation_id IN (" + placeholders(len(p.Only)) + ")"
		for _, id := range p.Only {
			a = append(a, id)
		}
	}
	q += " ORDER BY created_at, id LIMIT ?"
	a = append(a, p.MaxRequests)
	if p.lockingRead {
		q += " FOR UPDATE"
	}
	rows, err := tx.QueryContext(ctx, q, a...)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	read := make([]BatchMember, 0, min(p.MaxRequests, 64))
	for rows.Next() {
		var m BatchMember
		if err := rows.Scan(&m.ID, &m.OperationID); err != nil {
			return nil, err
		}
		read = append(read, m)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(err)
	}
	return read, nil
}

// claimMark is the guarded claim UPDATE, one statement per chunk of ids.
// It returns the summed row count; it stops at the first short chunk, since
// the transaction is rolled back anyway.
func claimMark(ctx context.Context, tx *sql.Tx, d Dialect, batchID int64, read []BatchMember) (int, error) {
	total := 0
	for _, part := range chunk(read, InChunkSize) {
		a := make([]any, 0, len(part)+1)
		a = append(a, batchID)
		for _, m := range part {
			a = append(a, m.ID)
		}
		res, err := tx.ExecContext(ctx,
			"UPDATE merge_batch_request "+d.PrimaryKeyHint()+
				" SET batch_id = ? WHERE batch_id IS NULL AND id IN ("+placeholders(len(part))+")", a...)
		if err != nil {
			return total, translate(err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("rows affected: %w", err)
		}
		total += int(n)
		if int(n) != len(part) {
			return total, nil
		}
	}
	return total, nil
}

// claimRecordHistory appends the members to merge_batch_history, one
// multi-row INSERT per chunk rather than one per row. The unique
// request_id makes a second claim of a row impossible even here.
func claimRecordHistory(ctx context.Context, tx *sql.Tx, batchID int64, members []BatchMember) error {
	for _, part := range chunk(members, InChunkSize) {
		a := make([]any, 0, 3*len(part))
		for _, m := range part {
			a = append(a, batchID, m.ID, m.OperationID)
		}
		_, err := tx.ExecContext(ctx,
			"INSERT INTO merge_batch_history (batch_id, request_id, operation_id) VALUES "+valuesRows(len(part), 3), a...)
		if err != nil {
			err = translate(err)
			if errors.Is(err, domain.ErrDuplicate) {
				return fmt.Errorf("%w: a member was claimed before: %w", errBatchInvariant, err)
			}
			return err
		}
	}
	return nil
}
