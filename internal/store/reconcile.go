package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"changeflow/internal/domain"
)

// Reconciliation's reads. The scan never
// writes: every flip goes through BindingMarkValidated, the method the
// deploy callback uses, so the two paths racing flip a binding once.

// ReconcileRow is one MERGED binding in the reconciliation window with
// what the comparison needs: its MR and whether a successful deploy
// callback for exactly that MR was recorded.
type ReconcileRow struct {
	OperationID string
	// ProjectID and MRIID are the operation's MR; MRIID is 0 when the
	// operation has none recorded (it then stays MERGED).
	ProjectID int64
	MRIID     int64
	// CalledBack: a SUCCESS deploy callback for (ProjectID, MRIID) exists
	// (the exact match) that was not classified as for an MR no request
	// had when it came (UNKNOWN_MR). The row itself is MERGED, so
	// changeflow merged this MR.
	CalledBack bool
}

// ReconcileScan is what one reconciliation run compares: the rows of the
// window and, per project, the highest MR iid a SUCCESS deploy callback
// reported among the MRs changeflow itself merged (the watermark; a
// project absent from the map has none). A callback for an MR changeflow
// never merged raises no watermark: one forged {"project":1,"mrIid":99999}
// must not validate every MERGED request below !99999.
type ReconcileScan struct {
	Rows       []ReconcileRow
	Watermarks map[int64]int64
}

// ReconcileScanParams is the window (now − MaxAge, now − MinAge), by the
// database clock.
type ReconcileScanParams struct {
	MinAge time.Duration
	MaxAge time.Duration
	// ChunkSize bounds each IN list; ≤ 0 means InChunkSize (500).
	ChunkSize int
	// NoWatermarks skips the watermark query (reconcile.inference off:
	// only exact matches are used); Watermarks is then empty.
	NoWatermarks bool
}

// ReconcileWindow returns the operationIds of the MERGED bindings whose
// updated_at lies strictly inside (now − maxAge, now − minAge), oldest
// first, by idx_binding_status_updated (status, updated_at): a range scan
// of the index on one status.
func (s *Store) ReconcileWindow(ctx context.Context, minAge, maxAge time.Duration) ([]string, error) {
	if minAge < 0 || maxAge <= minAge {
		return nil, fmt.Errorf("reconcile window: need 0 ≤ minAge < maxAge, got %s, %s", minAge, maxAge)
	}
	oldest, oldestArg := s.dialect.NowMinus(maxAge)
	newest, newestArg := s.dialect.NowMinus(minAge)
	rows, err := s.db.QueryContext(ctx,
		"SELECT operation_id FROM binding WHERE status = ? AND updated_at > "+oldest+
			" AND updated_at < "+newest+" ORDER BY updated_at, id",
		string(domain.BindingMerged), oldestArg, newestArg)
	if err != nil {
		return nil, fmt.Errorf("reconcile window: %w", translate(err))
	}
	ids, err := scanIDs(rows)
	if err != nil {
		return nil, fmt.Errorf("reconcile window: %w", err)
	}
	// Merged removals and renewals: a revocation's binding is REVOKING
	// from its creation on, a renewal's RENEWING, so their window is their
	// operation's merge — HANDLE_MERGED written inside the window
	// (idx_operation_step_updated), naming a grant (both kinds, and only
	// they, have grant_operation_id).
	rows, err = s.db.QueryContext(ctx,
		"SELECT operation_id FROM operation WHERE step_status = ? AND updated_at > "+oldest+
			" AND updated_at < "+newest+" AND grant_operation_id IS NOT NULL ORDER BY updated_at, id",
		int(domain.StepHandleMerged), oldestArg, newestArg)
	if err != nil {
		return nil, fmt.Errorf("reconcile window (revocations): %w", translate(err))
	}
	revs, err := scanIDs(rows)
	if err != nil {
		return nil, fmt.Errorf("reconcile window (revocations): %w", err)
	}
	return append(ids, revs...), nil
}

// scanIDs reads one string column and closes rows.
func scanIDs(rows *sql.Rows) ([]string, error) {
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			_ = rows.Close()
			return nil, err
		}
		ids = append(ids, id)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, translate(err)
	}
	return ids, nil
}

// ReconcileLookup is the scan's two comparison queries for the window's
// operationIds:
//
//  1. one IN query per chunk of ≤ chunkSize ids (a bulk
//     operationId → MR map), by uk_operation_operation_id; the exact
//     match rides along as an EXISTS on idx_deploy_callback_mr;
//  2. one query for the highest mr_iid per project among SUCCESS deploy
//     callbacks for MRs changeflow merged (idx_deploy_callback_mr, then
//     idx_operation_mr and idx_operation_step_operation for the check),
//     for the projects of 1.
//
// Ids with no operation row are left out.
func (s *Store) ReconcileLookup(ctx context.Context, operationIDs []string, chunkSize int) (ReconcileScan, error) {
	return s.reconcileLookup(ctx, operationIDs, chunkSize, true)
}

// reconcileLookup is ReconcileLookup; watermarks false skips query 2.
func (s *Store) reconcileLookup(ctx context.Context, operationIDs []string, chunkSize int, watermarks bool) (ReconcileScan, error) {
	out := ReconcileScan{Watermarks: map[int64]int64{}}
	projects := map[int64]bool{}
	for _, part := range chunk(operationIDs, chunkSize) {
		rows, err := s.db.QueryContext(ctx,
			"SELECT o.operation_id, o.project_id, COALESCE(o.mr_iid, 0),"+
				" CASE WHEN o.mr_iid IS NOT NULL AND EXISTS (SELECT 1 FROM deploy_callback d"+
				" WHERE d.project_id = o.project_id AND d.mr_iid = o.mr_iid AND UPPER(d.status) = 'SUCCESS'"+
				" AND d.disposition NOT IN "+deployUncounted+")"+
				" THEN 1 ELSE 0 END"+
				" FROM operation o WHERE o.operation_id IN ("+placeholders(len(part))+")",
			args(part)...)
		if err != nil {
			return ReconcileScan{}, fmt.Errorf("reconcile lookup: %w", translate(err))
		}
		for rows.Next() {
			var r ReconcileRow
			var called int
			if err := rows.Scan(&r.OperationID, &r.ProjectID, &r.MRIID, &called); err != nil {
				_ = rows.Close()
				return ReconcileScan{}, fmt.Errorf("reconcile lookup: %w", err)
			}
			r.CalledBack = called == 1
			out.Rows = append(out.Rows, r)
			if r.MRIID > 0 {
				projects[r.ProjectID] = true
			}
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return ReconcileScan{}, fmt.Errorf("reconcile lookup: %w", translate(err))
		}
	}
	if len(projects) == 0 || !watermarks {
		return out, nil
	}
	ids := make([]int64, 0, len(projects))
	for p := range projects {
		ids = append(ids, p)
	}
	for _, part := range chunk(ids, chunkSize) {
		// Per project, the highest MR a SUCCESS callback reported among
		// the MRs changeflow merged: a backward range scan of
		// idx_deploy_callback_mr that stops at the first row passing the
		// check, which is normally the first row read (the latest
		// deployment is of an MR changeflow merged). Rows for other MRs —
		// forged, or for merges made by hand — are skipped, never taken
		// for a deployment.
		sel := make([]string, len(part))
		for i := range part {
			sel[i] = "SELECT ? AS id"
		}
		rows, err := s.db.QueryContext(ctx,
			"SELECT p.id, (SELECT d.mr_iid FROM deploy_callback d WHERE d.project_id = p.id AND UPPER(d.status) = 'SUCCESS'"+
				" AND d.disposition NOT IN "+deployUncounted+" AND "+mergedByChangeflow+
				" ORDER BY d.mr_iid DESC LIMIT 1) FROM ("+strings.Join(sel, " UNION ALL ")+") p", args(part)...)
		if err != nil {
			return ReconcileScan{}, fmt.Errorf("reconcile watermarks: %w", translate(err))
		}
		for rows.Next() {
			var (
				p int64
				m sql.NullInt64
			)
			if err := rows.Scan(&p, &m); err != nil {
				_ = rows.Close()
				return ReconcileScan{}, fmt.Errorf("reconcile watermarks: %w", err)
			}
			if m.Valid {
				out.Watermarks[p] = m.Int64
			}
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return ReconcileScan{}, fmt.Errorf("reconcile watermarks: %w", translate(err))
		}
	}
	return out, nil
}

// ReconcileScanWindow is ReconcileWindow then ReconcileLookup.
func (s *Store) ReconcileScanWindow(ctx context.Context, p ReconcileScanParams) (ReconcileScan, error) {
	ids, err := s.ReconcileWindow(ctx, p.MinAge, p.MaxAge)
	if err != nil {
		return ReconcileScan{}, err
	}
	if len(ids) == 0 {
		return ReconcileScan{Watermarks: map[int64]int64{}}, nil
	}
	return s.reconcileLookup(ctx, ids, p.ChunkSize, !p.NoWatermarks)
}
