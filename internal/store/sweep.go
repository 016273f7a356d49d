package store

import (
	"context"
	"fmt"
	"time"

	"changeflow/internal/domain"
)

// BatchFailureTimeout is the failure code the workflow's timeout sweep
// writes on the batches it settles as FAILED.
const BatchFailureTimeout = "BATCH_TIMEOUT"

// BatchSweepDefaultLimit is how many rows one sweep read (BatchTimedOut,
// BatchStranded) returns at most when its limit is zero.
const BatchSweepDefaultLimit = 100

// sweepWindow checks a sweep read's age (named param in the error, which
// what starts) and defaults its limit: the shared start of BatchTimedOut
// and BatchStranded. It returns the SQL expression for "now − age" on the
// database clock with its argument, and the limit to use.
func (s *Store) sweepWindow(what, param string, age time.Duration, limit int) (expr string, arg any, n int, err error) {
	if age <= 0 {
		return "", nil, 0, fmt.Errorf("%s: %s must be positive, is %s", what, param, age)
	}
	if limit <= 0 {
		limit = BatchSweepDefaultLimit
	}
	expr, arg = s.dialect.NowMinus(age)
	return expr, arg, limit, nil
}

// BatchTimedOut returns the RUNNING batches created more than maxAge ago
// on the database clock, oldest first, at most limit (default
// BatchSweepDefaultLimit). It only reads: the workflow's sweep settles
// each one in ONE transaction with its members' moves (close and re-read
// the MR first, then the batch's guarded write, the moves and the
// re-admissions together), so that a crash anywhere leaves either a
// RUNNING batch the next sweep finds again or a settled one whose members
// are back in the waiting set — never a FAILED batch with stranded
// members, which a FAILED write followed by a separate members' move could
// leave.
//
// Age is counted from created_at, not updated_at: a batch must finish
// within maxAge of its claim however often its task touches the row, so a
// task that loops while writing progress cannot hold the slot forever, and
// idx_merge_batch_status_created serves the query. BLOCKED batches are not
// returned: they wait for a person by definition.
func (s *Store) BatchTimedOut(ctx context.Context, maxAge time.Duration, limit int) ([]Batch, error) {
	cutoff, arg, limit, err := s.sweepWindow("timed-out batches", "maxAge", maxAge, limit)
	if err != nil {
		return nil, err
	}
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
// members come only from a settlement split in two (a FAILED write
// followed by a separate members' move, as the sweep did before) that died
// in between, or from a manual edit. A culprit keeps a
// parked action and a merged member a MERGED binding, so neither is
// returned. The read starts from idx_merge_batch_status_created.
func (s *Store) BatchStranded(ctx context.Context, within time.Duration, limit int) ([]StrandedMember, error) {
	since, arg, limit, err := s.sweepWindow("stranded members", "within", within, limit)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx,
		"SELECT b.id, b.project_id, o.operation_id FROM merge_batch b"+
			" JOIN merge_batch_history h ON h.batch_id = b.id"+
			" JOIN operation o ON o.operation_id = h.operation_id AND o.batch_id = b.id"+
			" JOIN binding bd ON bd.subject_id = o.subject AND bd.target_key = o.target_key AND bd.operation_id = o.operation_id"+
			" LEFT JOIN merge_batch_request r ON r.operation_id = o.operation_id"+
			" WHERE b.status = ? AND b.created_at > "+since+
			" AND r.id IS NULL AND o.next_action IS NULL AND o.lease_owner IS NULL"+
			" AND (bd.status IN (?, ?, ?) OR (bd.status = ? AND o.step_status <> ?))"+
			" ORDER BY b.id, h.id LIMIT ?",
		domain.BatchFailed, arg, domain.BindingMRCreating, domain.BindingMRCreated, domain.BindingMerging,
		domain.BindingRevoking, int(domain.StepHandleMerged), limit)
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
