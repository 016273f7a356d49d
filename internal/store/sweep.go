package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"changeflow/internal/domain"
)

// BatchFailureTimeout is the failure code the timeout sweep writes unless
// BatchSweepParams.FailureCode says otherwise.
const BatchFailureTimeout = "BATCH_TIMEOUT"

// BatchSweepDefaultLimit is how many batches one sweep settles at most
// when BatchSweepParams.Limit is zero.
const BatchSweepDefaultLimit = 100

// BatchSweepParams configures one timeout sweep.
type BatchSweepParams struct {
	// MaxAge is how long a batch may stay RUNNING, measured from its
	// creation (the claim) on the database clock. Must be positive.
	MaxAge time.Duration
	// FailureCode defaults to BatchFailureTimeout; FailureMessage to a
	// sentence naming MaxAge.
	FailureCode    string
	FailureMessage string
	Limit          int // default BatchSweepDefaultLimit
}

// BatchSweepTimedOut settles as FAILED every RUNNING batch created more
// than MaxAge ago on the database clock, and returns the settlements it
// made. It is how a crashed holder's slot comes back (seed §3.1): the
// mutual exclusion is the batch's own state, so there is no lease to expire
// — a batch stuck RUNNING is visible, and this moves it on.
//
// Age is counted from created_at, not updated_at: a batch must finish
// within MaxAge of its claim however often its task touches the row, so a
// task that loops while writing progress cannot hold the slot forever, and
// idx_merge_batch_status_created serves the query. BLOCKED batches are
// left alone: they wait for a person by definition.
//
// Each candidate is settled by BatchSettleFailed guarded on the status and
// version the sweep read, so the sweep races safely with the running task
// and with other sweepers: whoever writes first wins, the others get
// domain.ErrPreempted and skip the batch without touching it. A batch whose
// settlement is busy (a lock wait ran out) is left for the next sweep.
//
// The sweep does not look at the batch's MR: it is the backstop for a
// crashed holder, and the workflow closes and re-reads the MR of every
// batch it returns before deciding about the members ("merged wins", seed
// §3.7; docs/architecture.md).
func (s *Store) BatchSweepTimedOut(ctx context.Context, p BatchSweepParams) ([]BatchSettlement, error) {
	if p.MaxAge <= 0 {
		return nil, fmt.Errorf("sweep batches: MaxAge must be positive, is %s", p.MaxAge)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = BatchSweepDefaultLimit
	}
	code, msg := p.FailureCode, p.FailureMessage
	if code == "" {
		code = BatchFailureTimeout
	}
	if msg == "" {
		msg = fmt.Sprintf("batch still RUNNING %s after its claim", p.MaxAge)
	}

	type candidate struct{ id, version int64 }
	cutoff, arg := s.dialect.NowMinus(p.MaxAge)
	rows, err := s.db.QueryContext(ctx,
		"SELECT id, version FROM merge_batch WHERE status = ? AND created_at < "+cutoff+
			" ORDER BY created_at, id LIMIT ?", domain.BatchRunning, arg, limit)
	if err != nil {
		return nil, fmt.Errorf("sweep batches: %w", translate(err))
	}
	var found []candidate
	for rows.Next() {
		var c candidate
		if err := rows.Scan(&c.id, &c.version); err != nil {
			_ = rows.Close()
			return nil, fmt.Errorf("sweep batches: %w", err)
		}
		found = append(found, c)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, fmt.Errorf("sweep batches: %w", translate(err))
	}

	var settled []BatchSettlement
	for _, c := range found {
		st, err := s.BatchSettleFailed(ctx, BatchSettleParams{
			ID: c.id, From: domain.BatchRunning, Version: c.version,
			FailureCode: code, FailureMessage: msg,
		})
		switch {
		case errors.Is(err, domain.ErrPreempted), errors.Is(err, domain.ErrBusy):
			continue
		case err != nil:
			return settled, fmt.Errorf("sweep batches: %w", err)
		}
		settled = append(settled, st)
	}
	return settled, nil
}

// BatchTimedOut returns the RUNNING batches created more than maxAge ago
// on the database clock, oldest first, at most limit (default
// BatchSweepDefaultLimit). It only reads: the workflow's sweep settles
// each one in ONE transaction with its members' moves (close and re-read
// the MR first, then the batch's guarded write, the moves and the
// re-admissions together), so that a crash anywhere leaves either a
// RUNNING batch the next sweep finds again or a settled one whose members
// are back in the waiting set — never a FAILED batch with stranded
// members, which BatchSweepTimedOut followed by a separate members' move
// could leave.
func (s *Store) BatchTimedOut(ctx context.Context, maxAge time.Duration, limit int) ([]Batch, error) {
	if maxAge <= 0 {
		return nil, fmt.Errorf("timed-out batches: maxAge must be positive, is %s", maxAge)
	}
	if limit <= 0 {
		limit = BatchSweepDefaultLimit
	}
	cutoff, arg := s.dialect.NowMinus(maxAge)
	rows, err := s.db.QueryContext(ctx,
		"SELECT "+batchColumns+" FROM merge_batch WHERE status = ? AND created_at < "+cutoff+
			" ORDER BY created_at, id LIMIT ?", domain.BatchRunning, arg, limit)
	if err != nil {
		return nil, fmt.Errorf("timed-out batches: %w", translate(err))
	}
	defer rows.Close()
	var out []Batch
	for rows.Next() {
		b, err := scanBatch(rows)
		if err != nil {
			return nil, fmt.Errorf("timed-out batches: %w", err)
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("timed-out batches: %w", translate(err))
	}
	return out, nil
}

// StrandedMember is a member of a FAILED batch that nothing will move on:
// see BatchStranded.
type StrandedMember struct {
	BatchID     int64
	ProjectID   int64
	OperationID string
}

// BatchStranded returns members of FAILED batches created within the last
// `within` (database clock; at most limit rows, default
// BatchSweepDefaultLimit) that are stranded: the operation still names the
// failed batch as its batch, has no waiting-set row, no next action and no
// lease, and the binding it owns is still on the batch path (MR_CREATING,
// MR_CREATED or MERGING). Every settlement of the workflow moves the
// members in the same transaction as the batch's FAILED write, so such
// members come only from a settlement split in two (BatchSweepTimedOut or
// BatchSettleFailed followed by a separate members' move, as the sweep did
// before) that died in between, or from a manual edit. A culprit keeps a
// parked action and a merged member a MERGED binding, so neither is
// returned. The read starts from idx_merge_batch_status_created.
func (s *Store) BatchStranded(ctx context.Context, within time.Duration, limit int) ([]StrandedMember, error) {
	if within <= 0 {
		return nil, fmt.Errorf("stranded members: within must be positive, is %s", within)
	}
	if limit <= 0 {
		limit = BatchSweepDefaultLimit
	}
	since, arg := s.dialect.NowMinus(within)
	rows, err := s.db.QueryContext(ctx,
		"SELECT b.id, b.project_id, o.operation_id FROM merge_batch b"+
			" JOIN merge_batch_history h ON h.batch_id = b.id"+
			" JOIN operation o ON o.operation_id = h.operation_id AND o.batch_id = b.id"+
			" JOIN binding bd ON bd.subject_id = o.subject AND bd.target_key = o.target_key AND bd.operation_id = o.operation_id"+
			" LEFT JOIN merge_batch_request r ON r.operation_id = o.operation_id"+
			" WHERE b.status = ? AND b.created_at > "+since+
			" AND r.id IS NULL AND o.next_action IS NULL AND o.lease_owner IS NULL AND bd.status IN (?, ?, ?)"+
			" ORDER BY b.id, h.id LIMIT ?",
		domain.BatchFailed, arg, domain.BindingMRCreating, domain.BindingMRCreated, domain.BindingMerging, limit)
	if err != nil {
		return nil, fmt.Errorf("stranded members: %w", translate(err))
	}
	defer rows.Close()
	var out []StrandedMember
	for rows.Next() {
		var m StrandedMember
		if err := rows.Scan(&m.BatchID, &m.ProjectID, &m.OperationID); err != nil {
			return nil, fmt.Errorf("stranded members: %w", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("stranded members: %w", translate(err))
	}
	return out, nil
}
