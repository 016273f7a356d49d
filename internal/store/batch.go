package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"changeflow/internal/domain"
)

// Batch is one merge_batch row: a set of claimed requests merged by one MR.
// Version grows by one with every state write and is what the guarded
// writes of batch_state.go (BatchBlock, BatchResume, and BatchApply's
// settlement through batchSetState) check, together with Status.
type Batch struct {
	ID             int64
	ProjectID      int64
	Status         domain.BatchStatus
	Version        int64
	MRIID          int64 // 0 until the MR exists
	MRURL          string
	Branch         string
	SplitDepth     int
	ParentBatchID  int64 // 0 for a batch claimed from the waiting set
	FailureCode    string
	FailureMessage string
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// BatchMember is one request claimed by a batch: the waiting-set row it was
// claimed from and its operationId.
type BatchMember struct {
	ID          int64 // merge_batch_request.id (also merge_batch_history.request_id)
	OperationID string
}

// batchDB is what *sql.DB, *sql.Conn and *sql.Tx have in common, so one
// statement helper serves a standalone call and a step of a transaction.
type batchDB interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// batchColumns is the column list scanBatch reads, in order.
const batchColumns = "id, project_id, status, version, mr_iid, mr_url, branch, split_depth, " +
	"parent_batch_id, failure_code, failure_message, created_at, updated_at"

// scanBatch scans one row of batchColumns.
func scanBatch(row interface{ Scan(dest ...any) error }) (Batch, error) {
	var (
		b                     Batch
		mrIID, parent         sql.NullInt64
		mrURL, branch         sql.NullString
		failCode, failMessage sql.NullString
	)
	err := row.Scan(&b.ID, &b.ProjectID, &b.Status, &b.Version, &mrIID, &mrURL, &branch, &b.SplitDepth,
		&parent, &failCode, &failMessage, &b.CreatedAt, &b.UpdatedAt)
	if err != nil {
		return Batch{}, err
	}
	b.MRIID, b.ParentBatchID = mrIID.Int64, parent.Int64
	b.MRURL, b.Branch = mrURL.String, branch.String
	b.FailureCode, b.FailureMessage = failCode.String, failMessage.String
	return b, nil
}

// BatchGet returns the batch id, or domain.ErrNotFound.
func (s *Store) BatchGet(ctx context.Context, id int64) (Batch, error) {
	b, err := scanBatch(s.db.QueryRowContext(ctx, "SELECT "+batchColumns+" FROM merge_batch WHERE id = ?", id))
	if err != nil {
		return Batch{}, fmt.Errorf("get batch %d: %w", id, translate(err))
	}
	return b, nil
}

// BatchActive returns the active (RUNNING or BLOCKED) batch of a project,
// or domain.ErrNotFound when its slot is free. It reads through the unique
// slot index, so it is one index lookup.
func (s *Store) BatchActive(ctx context.Context, projectID int64) (Batch, error) {
	b, err := scanBatch(s.db.QueryRowContext(ctx,
		"SELECT "+batchColumns+" FROM merge_batch WHERE active_slot = ?", projectID))
	if err != nil {
		return Batch{}, fmt.Errorf("active batch of project %d: %w", projectID, translate(err))
	}
	return b, nil
}

// Bounds of BatchListParams.Limit.
const (
	BatchListDefaultLimit = 50
	BatchListMaxLimit     = 500
)

// BatchListParams selects a page of BatchList. Zero fields do not filter.
type BatchListParams struct {
	ProjectID int64              // 0: every project
	Status    domain.BatchStatus // 0: every status
	// BeforeID is the cursor: only batches with a smaller id, i.e. the
	// page after the one whose NextBeforeID it is. 0 starts at the newest.
	BeforeID int64
	Limit    int // default BatchListDefaultLimit, at most BatchListMaxLimit
}

// BatchPage is one page of BatchList, newest first.
type BatchPage struct {
	Items []Batch
	// NextBeforeID is the cursor of the next page, 0 when this is the last.
	NextBeforeID int64
}

// BatchList returns batches newest first (by id: ids grow with the DB
// clock's creation order), a page at a time, for the ops API. It walks the
// primary key backwards; batches are few (one per round and project), so
// the filters need no index of their own.
func (s *Store) BatchList(ctx context.Context, p BatchListParams) (BatchPage, error) {
	limit := p.Limit
	switch {
	case limit <= 0:
		limit = BatchListDefaultLimit
	case limit > BatchListMaxLimit:
		limit = BatchListMaxLimit
	}
	q := "SELECT " + batchColumns + " FROM merge_batch WHERE 1 = 1"
	var a []any
	if p.ProjectID != 0 {
		q += " AND project_id = ?"
		a = append(a, p.ProjectID)
	}
	if p.Status != 0 {
		q += " AND status = ?"
		a = append(a, p.Status)
	}
	if p.BeforeID > 0 {
		q += " AND id < ?"
		a = append(a, p.BeforeID)
	}
	// One row more than the page says whether there is a next page.
	q += " ORDER BY id DESC LIMIT ?"
	a = append(a, limit+1)
	rows, err := s.db.QueryContext(ctx, q, a...)
	if err != nil {
		return BatchPage{}, fmt.Errorf("list batches: %w", translate(err))
	}
	defer rows.Close()
	var page BatchPage
	for rows.Next() {
		b, err := scanBatch(rows)
		if err != nil {
			return BatchPage{}, fmt.Errorf("list batches: %w", err)
		}
		page.Items = append(page.Items, b)
	}
	if err := rows.Err(); err != nil {
		return BatchPage{}, fmt.Errorf("list batches: %w", translate(err))
	}
	if len(page.Items) > limit {
		page.Items = page.Items[:limit]
		page.NextBeforeID = page.Items[limit-1].ID
	}
	return page, nil
}

// BatchMembers returns the members of batch id in claim order, from the
// append-only membership history: it answers for finished batches too,
// including failed ones whose waiting-set rows were deleted. An unknown id
// has no members (nil, no error).
func (s *Store) BatchMembers(ctx context.Context, batchID int64) ([]BatchMember, error) {
	members, err := batchMembers(ctx, s.db, batchID)
	if err != nil {
		return nil, fmt.Errorf("members of batch %d: %w", batchID, err)
	}
	return members, nil
}

// batchMembers reads a batch's membership history with q (the pool, or a
// settlement's transaction). History ids grow in claim order.
func batchMembers(ctx context.Context, q batchDB, batchID int64) ([]BatchMember, error) {
	rows, err := q.QueryContext(ctx,
		"SELECT request_id, operation_id FROM merge_batch_history WHERE batch_id = ? ORDER BY id", batchID)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	var members []BatchMember
	for rows.Next() {
		var (
			m  BatchMember
			id sql.NullInt64
		)
		if err := rows.Scan(&id, &m.OperationID); err != nil {
			return nil, err
		}
		m.ID = id.Int64
		members = append(members, m)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(err)
	}
	return members, nil
}

// BatchWaitingCount returns how many requests of a project wait to be
// claimed (admitted, not yet in a batch).
func (s *Store) BatchWaitingCount(ctx context.Context, projectID int64) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx,
		"SELECT COUNT(*) FROM merge_batch_request WHERE project_id = ? AND batch_id IS NULL", projectID).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("waiting count of project %d: %w", projectID, translate(err))
	}
	return n, nil
}

// QueuePosition is where an admitted request stands: waiting at a place in
// its project's queue, or claimed by a batch.
type QueuePosition struct {
	OperationID string
	ProjectID   int64
	RequestID   int64 // merge_batch_request.id
	// BatchID is the claiming batch, 0 while waiting.
	BatchID int64
	// Position is the 1-based place in the project's waiting queue, in the
	// order the claim takes requests (created_at, id); 0 once claimed.
	Position   int
	AdmittedAt time.Time
}

// BatchQueuePosition returns where the request operationID stands, or
// domain.ErrNotFound when it is not admitted (never, or its failed batch
// released it). The position is counted in the same order the claim reads
// the queue, so position 1 is the next request a round takes.
func (s *Store) BatchQueuePosition(ctx context.Context, operationID string) (QueuePosition, error) {
	qp := QueuePosition{OperationID: operationID}
	var batchID sql.NullInt64
	err := s.db.QueryRowContext(ctx,
		"SELECT id, project_id, batch_id, created_at FROM merge_batch_request WHERE operation_id = ?", operationID).
		Scan(&qp.RequestID, &qp.ProjectID, &batchID, &qp.AdmittedAt)
	if err != nil {
		return QueuePosition{}, fmt.Errorf("queue position of %s: %w", operationID, translate(err))
	}
	if batchID.Valid {
		qp.BatchID = batchID.Int64
		return qp, nil
	}
	// Compare against the row itself rather than binding its created_at
	// back: no time round trip through the driver, and a concurrent claim
	// of this row makes the count 0, not wrong.
	err = s.db.QueryRowContext(ctx,
		"SELECT COUNT(*) FROM merge_batch_request w JOIN merge_batch_request me ON me.id = ?"+
			" WHERE w.project_id = me.project_id AND w.batch_id IS NULL"+
			" AND (w.created_at < me.created_at OR (w.created_at = me.created_at AND w.id <= me.id))",
		qp.RequestID).Scan(&qp.Position)
	if err != nil {
		return QueuePosition{}, fmt.Errorf("queue position of %s: %w", operationID, translate(err))
	}
	if qp.Position == 0 {
		// Claimed between the two reads: say so rather than "position 0".
		return s.BatchQueuePosition(ctx, operationID)
	}
	return qp, nil
}

// errBatchInvariant marks a state the guarded writes make impossible (a
// member row missing at settlement, a member claimed twice). It is a bug or
// a manual edit, never a race, so it is not domain.ErrPreempted.
var errBatchInvariant = errors.New("batch invariant violated")
