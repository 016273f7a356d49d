package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// The deploy-callback inbox (issue 13): every deploy callback is recorded
// before anything acts on it (DeployCallbackInsert), and what became of it
// is noted on its row. Only MRs changeflow itself merged count — for the
// exact match and for reconciliation's watermark — so a callback for any
// other MR is recorded with its disposition and changes nothing.

// Dispositions of a deploy callback.
const (
	// DeployRecorded: recorded, not classified yet (no sink wired, or its
	// call failed). Reconciliation's exact match still acts on it, and
	// its watermark checks it against the MRs changeflow merged.
	DeployRecorded = "RECORDED"
	// DeployApplied: the MR is one changeflow merged; the callback (or the
	// merge step, or reconciliation's exact match, acting on it) flipped
	// its requests MERGED → VALIDATED.
	DeployApplied = "APPLIED"
	// DeployDuplicate: the MR is one changeflow merged, and its requests
	// were already validated by an earlier delivery or by reconciliation.
	DeployDuplicate = "DUPLICATE"
	// DeployEarly: the MR is changeflow's and is being merged (MERGING):
	// kept, and applied when changeflow writes MERGED.
	DeployEarly = "EARLY"
	// DeployUnknownMR: no request of changeflow has this MR.
	DeployUnknownMR = "UNKNOWN_MR"
	// DeployNotMerged: the MR is changeflow's but changeflow has not
	// merged it (closed, rejected, still open): nothing changes now; it
	// counts only if changeflow later writes MERGED for the MR.
	DeployNotMerged = "NOT_MERGED"
	// DeployIgnored: the status is not SUCCESS: no evidence of anything.
	DeployIgnored = "IGNORED"
)

// deployUncounted are the dispositions that never count as a deployment
// of a changeflow MR, whatever the MR turns out to be later: an MR iid
// that no request had when the callback came (a callback sent ahead for
// an iid changeflow will reach later) must not validate that future MR,
// and a failed deployment is no evidence. NOT_MERGED is not among them:
// the MR was changeflow's, and changeflow may still finish it as merged
// (someone merged it by hand before the bots did); whether changeflow
// merged it is what the comparisons check.
const deployUncounted = "('" + DeployUnknownMR + "', '" + DeployIgnored + "')"

// mergedByChangeflow is the SQL condition "changeflow merged the MR
// (d.project_id, d.mr_iid)": one of its requests has a step-history row
// in which changeflow wrote MERGED. Only changeflow's own merge step and
// batch finish write that status, and the history is append-only, so
// the answer holds after the binding moved on (VALIDATED, re-applied). It
// is evaluated when reconciliation reads, never taken from a callback.
const mergedByChangeflow = "EXISTS (SELECT 1 FROM operation o JOIN operation_step s ON s.operation_id = o.operation_id" +
	" WHERE o.project_id = d.project_id AND o.mr_iid = d.mr_iid AND s.to_binding_status = 'MERGED')"

// DeployCallbackRecord is one recorded deploy callback.
type DeployCallbackRecord struct {
	ID          int64
	DeliveryKey string
	ProjectID   int64
	MRIID       int64
	Status      string
	ReceivedAt  time.Time
	Disposition string
	Reason      string
	Duplicates  int
}

const deployCallbackColumns = "id, COALESCE(delivery_key, ''), project_id, mr_iid, status, received_at, disposition, reason, duplicates"

func scanDeployCallback(row scanner) (DeployCallbackRecord, error) {
	var r DeployCallbackRecord
	err := row.Scan(&r.ID, &r.DeliveryKey, &r.ProjectID, &r.MRIID, &r.Status, &r.ReceivedAt, &r.Disposition, &r.Reason, &r.Duplicates)
	return r, err
}

// DeployCallbackClassify notes the first classification of the recorded
// callback id: only a row still RECORDED takes it, so a row that the
// merge step or reconciliation marked APPLIED meanwhile keeps APPLIED
// (the callback's own look raced theirs). reason is clipped to 255.
func (s *Store) DeployCallbackClassify(ctx context.Context, id int64, disposition, reason string) error {
	if _, err := s.db.ExecContext(ctx,
		"UPDATE deploy_callback SET disposition = ?, reason = ? WHERE id = ? AND disposition = ?",
		clipRunes(disposition, 24), clipRunes(reason, 255), id, DeployRecorded); err != nil {
		return fmt.Errorf("classify deploy callback %d: %w", id, translate(err))
	}
	return nil
}

// DeployCallbackMarkApplied marks the SUCCESS callbacks of MR (projectID,
// mrIID) that were waiting (RECORDED, EARLY or NOT_MERGED) as APPLIED: the
// merge step or reconciliation validated the MR's requests on their
// evidence.
func (s *Store) DeployCallbackMarkApplied(ctx context.Context, projectID, mrIID int64, reason string) error {
	if _, err := s.db.ExecContext(ctx,
		"UPDATE deploy_callback SET disposition = ?, reason = ? WHERE project_id = ? AND mr_iid = ?"+
			" AND disposition IN (?, ?, ?) AND UPPER(status) = 'SUCCESS'",
		DeployApplied, clipRunes(reason, 255), projectID, mrIID, DeployRecorded, DeployEarly, DeployNotMerged); err != nil {
		return fmt.Errorf("mark deploy callbacks of MR %d!%d applied: %w", projectID, mrIID, translate(err))
	}
	return nil
}

// MRMergeState is what changeflow knows of one MR.
type MRMergeState struct {
	// Requests is how many requests have the MR.
	Requests int
	// Merged is how many of them changeflow wrote MERGED for (history).
	Merged int
	// Merging is how many of their bindings are MERGING right now.
	Merging int
}

// MRMergeStateGet reads MR (projectID, mrIID)'s state by idx_operation_mr,
// idx_binding_operation and idx_operation_step_operation.
func (s *Store) MRMergeStateGet(ctx context.Context, projectID, mrIID int64) (MRMergeState, error) {
	var m MRMergeState
	err := s.db.QueryRowContext(ctx,
		"SELECT COUNT(*),"+
			" COALESCE(SUM(CASE WHEN EXISTS (SELECT 1 FROM operation_step s WHERE s.operation_id = o.operation_id"+
			" AND s.to_binding_status = 'MERGED') THEN 1 ELSE 0 END), 0),"+
			" COALESCE(SUM(CASE WHEN b.status = 'MERGING' THEN 1 ELSE 0 END), 0)"+
			" FROM operation o LEFT JOIN binding b ON b.operation_id = o.operation_id"+
			" WHERE o.project_id = ? AND o.mr_iid = ?", projectID, mrIID).Scan(&m.Requests, &m.Merged, &m.Merging)
	if err != nil {
		return MRMergeState{}, fmt.Errorf("merge state of MR %d!%d: %w", projectID, mrIID, translate(err))
	}
	return m, nil
}

// DeployCallbackListByMR returns MR (projectID, mrIID)'s recorded deploy
// callbacks, newest first, at most limit (the ops request view).
func (s *Store) DeployCallbackListByMR(ctx context.Context, projectID, mrIID int64, limit int) ([]DeployCallbackRecord, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("deploy callbacks of MR %d!%d: limit must be positive, is %d", projectID, mrIID, limit)
	}
	return s.deployCallbackQuery(ctx, "deploy callbacks of MR",
		"SELECT "+deployCallbackColumns+" FROM deploy_callback WHERE project_id = ? AND mr_iid = ? ORDER BY id DESC LIMIT ?",
		projectID, mrIID, limit)
}

// DeployCallbackListParams pages the whole inbox, newest first.
type DeployCallbackListParams struct {
	// Disposition filters when not "".
	Disposition string
	// BeforeID pages: only rows with a smaller id (0 = from the newest).
	BeforeID int64
	Limit    int
}

// DeployCallbackList returns recorded deploy callbacks, newest first (the
// ops listing: where callbacks for MRs changeflow never merged show up,
// since they belong to no request).
func (s *Store) DeployCallbackList(ctx context.Context, p DeployCallbackListParams) ([]DeployCallbackRecord, error) {
	if p.Limit <= 0 {
		return nil, fmt.Errorf("deploy callbacks: limit must be positive, is %d", p.Limit)
	}
	q := "SELECT " + deployCallbackColumns + " FROM deploy_callback WHERE 1 = 1"
	var args []any
	if p.Disposition != "" {
		q += " AND disposition = ?"
		args = append(args, p.Disposition)
	}
	if p.BeforeID > 0 {
		q += " AND id < ?"
		args = append(args, p.BeforeID)
	}
	q += " ORDER BY id DESC LIMIT ?"
	return s.deployCallbackQuery(ctx, "deploy callbacks", q, append(args, p.Limit)...)
}

func (s *Store) deployCallbackQuery(ctx context.Context, what, q string, args ...any) ([]DeployCallbackRecord, error) {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, translate(err))
	}
	var out []DeployCallbackRecord
	for rows.Next() {
		r, err := scanDeployCallback(rows)
		if err != nil {
			_ = rows.Close()
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, r)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, fmt.Errorf("%s: %w", what, translate(err))
	}
	return out, nil
}

// deployCallbackIDByKey returns the row id recorded under deliveryKey.
func (s *Store) deployCallbackIDByKey(ctx context.Context, deliveryKey string) (int64, error) {
	var id int64
	err := s.db.QueryRowContext(ctx, "SELECT id FROM deploy_callback WHERE delivery_key = ?", deliveryKey).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("deploy callback %q: %w", deliveryKey, translate(err))
	}
	return id, nil
}
