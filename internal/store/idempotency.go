package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"changeflow/internal/domain"
)

// IdempotencyOutcome is the answer to "may this request proceed?" for an
// idempotency key.
type IdempotencyOutcome int

// The outcomes of IdempotencyBegin.
const (
	// IdempotencyFresh: this call inserted the record; proceed, then
	// IdempotencyComplete (or IdempotencyRelease).
	IdempotencyFresh IdempotencyOutcome = iota + 1
	// IdempotencyDuplicate: the key's request completed; replay the stored
	// response with the winner's operationId.
	IdempotencyDuplicate
	// IdempotencyInFlight: the key's first request is still being
	// processed (its lease has not ended).
	IdempotencyInFlight
	// IdempotencyKeyReused: the caller used the key for a different request
	// (another body). Another caller's use of the key never answers this.
	IdempotencyKeyReused
	// IdempotencyRetryLater: the insert lost to a concurrent request whose
	// record was gone when re-read (released or expired meanwhile).
	IdempotencyRetryLater
)

// String returns the outcome's name.
func (o IdempotencyOutcome) String() string {
	switch o {
	case IdempotencyFresh:
		return "FRESH"
	case IdempotencyDuplicate:
		return "DUPLICATE"
	case IdempotencyInFlight:
		return "IN_FLIGHT"
	case IdempotencyKeyReused:
		return "KEY_REUSED"
	case IdempotencyRetryLater:
		return "RETRY_LATER"
	}
	return "UNKNOWN"
}

// Code is the API code the outcome answers with (docs/api.md, "User endpoints"): ACCEPTED
// (fresh), DUPLICATE_SUBMIT (replay), IDEMPOTENCY_IN_FLIGHT,
// IDEMPOTENCY_KEY_REUSED, RETRY_LATER.
func (o IdempotencyOutcome) Code() domain.Code {
	switch o {
	case IdempotencyFresh:
		return domain.CodeAccepted
	case IdempotencyDuplicate:
		return domain.CodeDuplicateSubmit
	case IdempotencyInFlight:
		return domain.CodeIdempotencyInFlight
	case IdempotencyKeyReused:
		return domain.CodeIdempotencyReused
	case IdempotencyRetryLater:
		return domain.CodeRetryLater
	}
	return domain.CodeInternal
}

// Idempotency record states (ck_idempotency_record_state).
const (
	idemInFlight = "IN_FLIGHT"
	idemDone     = "DONE"
)

// maxIdemKeyLen is idempotency_record.idem_key's VARCHAR length.
const maxIdemKeyLen = 128

// IdempotencyBeginParams is a request about to be processed under Key.
type IdempotencyBeginParams struct {
	// Key is the client's idempotency key. Keys are scoped per Subject:
	// the same key from another caller is another key (docs/api.md).
	Key     string
	Subject string
	// RequestHash identifies the request body (hex SHA-256 of a canonical
	// form); the same key with another hash is KEY_REUSED.
	RequestHash string
	// OperationID is the operation this request will create if it wins.
	OperationID string
	// TTL is how long the record answers for the key, from the DB clock.
	TTL time.Duration
	// Lease is how long an IN_FLIGHT record belongs to the request that
	// took it (idempotency.inFlightLease). After it, the next attempt with
	// the same key and body takes the record over, so a request that died
	// before storing anything does not hold its key until TTL.
	Lease time.Duration

	// beforeInsert and beforeReread, when set, run just before the INSERT
	// and just before the re-read of the winner; beforeTakeOver just
	// before the guarded takeover of a record whose lease ended. Tests
	// interleave a concurrent request there.
	beforeInsert, beforeReread, beforeTakeOver func()
}

// IdempotencyResult is IdempotencyBegin's answer.
type IdempotencyResult struct {
	Outcome IdempotencyOutcome
	// OperationID is the winner's operationId (ours when Fresh, unless
	// TakenOver).
	OperationID string
	// ResponseStatus and ResponseBody are the stored response to replay
	// (Duplicate only). Both are empty when Recovered.
	ResponseStatus int
	ResponseBody   []byte
	// TakenOver (Fresh only): the key's earlier request died inside its
	// lease without storing its operation; this call now owns the record
	// and must create the operation under OperationID — the earlier
	// request's id, so that if it was only slow, not dead, the two meet on
	// the operation's unique key and there is still one request.
	TakenOver bool
	// Recovered (Duplicate only): the key's earlier request stored its
	// operation and died before storing its response; the caller answers
	// as for a replay of the 202 and should store that response
	// (IdempotencyComplete).
	Recovered bool
}

// IdempotencyBegin decides whether a request under (p.Subject, p.Key) may
// proceed (check-or-insert, with expiry and takeover):
//
//  1. look up the caller's key: a live record answers at once (Duplicate
//     with the stored response, InFlight, or KeyReused when the request
//     hash differs); an expired record is deleted and treated as absent;
//     an IN_FLIGHT record whose lease has ended is taken over (below);
//  2. INSERT an IN_FLIGHT record with a lease (Fresh);
//  3. on a duplicate key — a concurrent request inserted first — re-read
//     the winner and answer as in 1, or RetryLater if it is already gone.
//
// No lock is taken: correctness comes from the unique key on (subject,
// idem_key). Each statement runs on its own (autocommit), so the re-read
// sees the winner's committed row. The winner's transaction must commit
// before a concurrent INSERT can fail on it: MariaDB makes that INSERT
// wait, SQLite serializes writers.
//
// Another caller's use of the same key is invisible: records are looked up
// by subject, so Bob's key "k" is fresh for Bob whatever alice did with
// hers (issue: keys must not tell whether another person used them).
//
// Takeover of an IN_FLIGHT record whose lease has ended (its request died
// between taking the key and storing its operation, e.g. kill -9): first
// look for the operation stored under the record's operationId — if the
// request got that far, answer Duplicate (Recovered) with it; otherwise a
// guarded UPDATE renews the lease only if it is still over and the record
// unchanged, so of several retries racing exactly one takes the key (Fresh,
// TakenOver) and the others see a live lease (InFlight). A request that was
// only slow, not dead, still completes: the taker reuses its operationId,
// and the operation's unique key lets only one of them store it.
func (s *Store) IdempotencyBegin(ctx context.Context, p IdempotencyBeginParams) (IdempotencyResult, error) {
	switch {
	case p.Key == "" || p.Subject == "" || p.OperationID == "":
		return IdempotencyResult{}, errors.New("begin idempotent request: key, subject and operationId are required")
	case utf8.RuneCountInString(p.Key) > maxIdemKeyLen:
		return IdempotencyResult{}, fmt.Errorf("begin idempotent request: key longer than %d characters", maxIdemKeyLen)
	case p.TTL <= 0:
		return IdempotencyResult{}, fmt.Errorf("begin idempotent request: TTL %v is not positive", p.TTL)
	case p.Lease <= 0:
		return IdempotencyResult{}, fmt.Errorf("begin idempotent request: lease %v is not positive", p.Lease)
	}
	// Twin keys on two Galera nodes both pass the lookup and both INSERT;
	// the cluster aborts one with 1213 instead of the 1062 a single server
	// gives. Re-running the whole decision (retryConflict) then finds the
	// winner's row — by the lookup, or as the duplicate key — and answers
	// as on one node: DUPLICATE, IN_FLIGHT or KEY_REUSED.
	var res IdempotencyResult
	err := retryConflict(ctx, func() (err error) {
		res, err = s.idempotencyBegin(ctx, p)
		return err
	})
	if err != nil {
		return IdempotencyResult{}, fmt.Errorf("begin idempotent request %q: %w", p.Key, err)
	}
	return res, nil
}

func (s *Store) idempotencyBegin(ctx context.Context, p IdempotencyBeginParams) (IdempotencyResult, error) {
	rec, err := s.idempotencyLookup(ctx, p.Subject, p.Key)
	switch {
	case err == nil && !rec.expired:
		return s.idempotencyAnswer(ctx, p, rec)
	case err == nil:
		// Expired but not yet cleaned up: the key is free again. The delete
		// re-checks expiry, so a record that a concurrent request has just
		// replaced is not touched.
		expr := s.dialect.Now()
		if _, err := s.db.ExecContext(ctx,
			"DELETE FROM idempotency_record WHERE id = ? AND expires_at <= "+expr, rec.id); err != nil {
			return IdempotencyResult{}, fmt.Errorf("delete expired record: %w", translate(err))
		}
	case !errors.Is(err, sql.ErrNoRows):
		return IdempotencyResult{}, fmt.Errorf("look up: %w", translate(err))
	}

	if p.beforeInsert != nil {
		p.beforeInsert()
	}
	expiresAt, ttl := s.dialect.NowAdd(p.TTL)
	leaseUntil, lease := s.dialect.NowAdd(p.Lease)
	_, err = s.db.ExecContext(ctx,
		"INSERT INTO idempotency_record (idem_key, subject, request_hash, operation_id, state, lease_until, expires_at) "+
			"VALUES (?, ?, ?, ?, ?, "+leaseUntil+", "+expiresAt+")",
		p.Key, p.Subject, p.RequestHash, p.OperationID, idemInFlight, lease, ttl)
	if err == nil {
		return IdempotencyResult{Outcome: IdempotencyFresh, OperationID: p.OperationID}, nil
	}
	if err = translate(err); !errors.Is(err, domain.ErrDuplicate) {
		return IdempotencyResult{}, fmt.Errorf("insert: %w", err)
	}
	if p.beforeReread != nil {
		p.beforeReread()
	}
	rec, err = s.idempotencyLookup(ctx, p.Subject, p.Key)
	switch {
	case errors.Is(err, sql.ErrNoRows) || err == nil && rec.expired:
		return IdempotencyResult{Outcome: IdempotencyRetryLater}, nil
	case err != nil:
		return IdempotencyResult{}, fmt.Errorf("re-read winner: %w", translate(err))
	}
	return s.idempotencyAnswer(ctx, p, rec)
}

// idempotencyRow is a stored record as IdempotencyBegin needs it.
type idempotencyRow struct {
	id                int64
	hash, operationID string
	state             string
	status            sql.NullInt64
	body              sql.NullString
	expired           bool
	// leaseOver: an IN_FLIGHT record's lease has ended by the DB clock
	// (NULL counts as ended: such rows predate leases).
	leaseOver bool
}

// idempotencyAnswer decides what the live record rec says to request p,
// taking it over when its lease has ended.
func (s *Store) idempotencyAnswer(ctx context.Context, p IdempotencyBeginParams, rec idempotencyRow) (IdempotencyResult, error) {
	switch {
	case rec.hash != p.RequestHash:
		return IdempotencyResult{Outcome: IdempotencyKeyReused, OperationID: rec.operationID}, nil
	case rec.state == idemInFlight && rec.leaseOver:
		return s.idempotencyTakeOver(ctx, p, rec)
	case rec.state == idemInFlight:
		return IdempotencyResult{Outcome: IdempotencyInFlight, OperationID: rec.operationID}, nil
	}
	return IdempotencyResult{
		Outcome: IdempotencyDuplicate, OperationID: rec.operationID,
		ResponseStatus: int(rec.status.Int64), ResponseBody: []byte(rec.body.String),
	}, nil
}

// idempotencyTakeOver handles an IN_FLIGHT record whose lease has ended
// (see IdempotencyBegin).
func (s *Store) idempotencyTakeOver(ctx context.Context, p IdempotencyBeginParams, rec idempotencyRow) (IdempotencyResult, error) {
	// The earlier request may have stored its operation and died before
	// storing its response: then the request exists and this is a replay.
	// Only an operation of this caller with this body counts; anything
	// else under that id is left to the operation's unique key.
	var subject, hash string
	err := s.db.QueryRowContext(ctx,
		"SELECT subject, request_hash FROM operation WHERE operation_id = ?", rec.operationID).Scan(&subject, &hash)
	switch {
	case err == nil && subject == p.Subject && hash == p.RequestHash:
		return IdempotencyResult{Outcome: IdempotencyDuplicate, OperationID: rec.operationID, Recovered: true}, nil
	case err != nil && !errors.Is(err, sql.ErrNoRows):
		return IdempotencyResult{}, fmt.Errorf("look for the operation of a lapsed key: %w", translate(err))
	}
	if p.beforeTakeOver != nil {
		p.beforeTakeOver()
	}
	now := s.dialect.Now()
	leaseUntil, lease := s.dialect.NowAdd(p.Lease)
	res, err := s.db.ExecContext(ctx,
		"UPDATE idempotency_record SET lease_until = "+leaseUntil+
			" WHERE id = ? AND state = ? AND operation_id = ? AND (lease_until IS NULL OR lease_until <= "+now+")",
		lease, rec.id, idemInFlight, rec.operationID)
	if err != nil {
		return IdempotencyResult{}, fmt.Errorf("take over lapsed key: %w", translate(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return IdempotencyResult{}, fmt.Errorf("take over lapsed key: %w", err)
	}
	if n == 1 {
		return IdempotencyResult{Outcome: IdempotencyFresh, OperationID: rec.operationID, TakenOver: true}, nil
	}
	// Someone else took it over, completed or released it meanwhile:
	// answer from what is there now. A record whose lease is over again
	// already (a lease shorter than this round trip) is reported in
	// flight rather than chased in a loop.
	again, err := s.idempotencyLookup(ctx, p.Subject, p.Key)
	switch {
	case errors.Is(err, sql.ErrNoRows) || err == nil && again.expired:
		return IdempotencyResult{Outcome: IdempotencyRetryLater}, nil
	case err != nil:
		return IdempotencyResult{}, fmt.Errorf("re-read lapsed key: %w", translate(err))
	}
	if again.hash == p.RequestHash && again.state == idemInFlight {
		return IdempotencyResult{Outcome: IdempotencyInFlight, OperationID: again.operationID}, nil
	}
	again.leaseOver = false
	return s.idempotencyAnswer(ctx, p, again)
}

func (s *Store) idempotencyLookup(ctx context.Context, subject, key string) (idempotencyRow, error) {
	var (
		rec               idempotencyRow
		expired, leaseEnd int
	)
	now := s.dialect.Now()
	err := s.db.QueryRowContext(ctx,
		"SELECT id, request_hash, operation_id, state, response_status, response_body, "+
			"CASE WHEN expires_at <= "+now+" THEN 1 ELSE 0 END, "+
			"CASE WHEN lease_until IS NULL OR lease_until <= "+now+" THEN 1 ELSE 0 END "+
			"FROM idempotency_record WHERE subject = ? AND idem_key = ?", subject, key).
		Scan(&rec.id, &rec.hash, &rec.operationID, &rec.state, &rec.status, &rec.body, &expired, &leaseEnd)
	rec.expired = expired == 1
	rec.leaseOver = leaseEnd == 1
	return rec, err
}

// IdempotencyCompleteParams is the response to store for replays.
type IdempotencyCompleteParams struct {
	Subject     string
	Key         string
	OperationID string
	// Status and Body are the HTTP status and the JSON body (UTF-8, at
	// most 64 KiB on MariaDB's TEXT) a duplicate will be answered with.
	Status int
	Body   []byte
}

// IdempotencyComplete stores the original response of the request that won
// Key and marks the record DONE, guarded by the record still being
// IN_FLIGHT for OperationID. A miss — the record was released, expired and
// was replaced, or completed already — returns an error wrapping
// domain.ErrPreempted.
func (s *Store) IdempotencyComplete(ctx context.Context, p IdempotencyCompleteParams) error {
	err := execOne(ctx, s.db,
		"UPDATE idempotency_record SET state = ?, response_status = ?, response_body = ? "+
			"WHERE subject = ? AND idem_key = ? AND operation_id = ? AND state = ?",
		idemDone, p.Status, string(p.Body), p.Subject, p.Key, p.OperationID, idemInFlight)
	if err != nil {
		return fmt.Errorf("complete idempotent request %q: %w", p.Key, err)
	}
	return nil
}

// IdempotencyRelease deletes subject's IN_FLIGHT record of key owned by
// operationID, so that a retry with the same key proceeds afresh. For
// failures that must not be replayed (a 503, a crash caught by the safety
// net); a completed record is never released. It reports whether a record
// was deleted.
func (s *Store) IdempotencyRelease(ctx context.Context, subject, key, operationID string) (bool, error) {
	res, err := s.db.ExecContext(ctx,
		"DELETE FROM idempotency_record WHERE subject = ? AND idem_key = ? AND operation_id = ? AND state = ?",
		subject, key, operationID, idemInFlight)
	if err != nil {
		return false, fmt.Errorf("release idempotent request %q: %w", key, translate(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("release idempotent request %q: %w", key, err)
	}
	return n == 1, nil
}

// IdempotencyDeleteExpired deletes up to limit records whose expiry has
// passed by the DB clock, and returns how many it deleted; the cleanup job
// calls it until it returns less than limit. Each chunk of ≤ 500 is a range
// read of idx_idempotency_record_expires followed by a DELETE by primary
// key that re-checks the expiry, so no statement scans the table or locks
// more than the rows it removes. A limit ≤ 0 deletes nothing.
func (s *Store) IdempotencyDeleteExpired(ctx context.Context, limit int) (int, error) {
	deleted := 0
	for deleted < limit {
		n := min(limit-deleted, InChunkSize)
		ids, err := s.idempotencyExpiredIDs(ctx, n)
		if err != nil {
			return deleted, fmt.Errorf("delete expired idempotency records: %w", err)
		}
		if len(ids) == 0 {
			break
		}
		res, err := s.db.ExecContext(ctx,
			"DELETE FROM idempotency_record WHERE id IN ("+placeholders(len(ids))+") AND expires_at <= "+s.dialect.Now(),
			args(ids)...)
		if err != nil {
			return deleted, fmt.Errorf("delete expired idempotency records: %w", translate(err))
		}
		got, err := res.RowsAffected()
		if err != nil {
			return deleted, fmt.Errorf("delete expired idempotency records: %w", err)
		}
		deleted += int(got)
		if len(ids) < n || got == 0 {
			break
		}
	}
	return deleted, nil
}

func (s *Store) idempotencyExpiredIDs(ctx context.Context, n int) ([]int64, error) {
	rows, err := s.db.QueryContext(ctx,
		"SELECT id FROM idempotency_record WHERE expires_at <= "+s.dialect.Now()+" ORDER BY expires_at LIMIT ?", n)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, translate(rows.Err())
}
