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

// BatchMemberState is one member of a batch with the state and versions a
// TransitionMany of the batch's members needs.
type BatchMemberState struct {
	OperationID string
	Step        int
	Version     int64
	NextAction  string
	// Binding and BindingVersion are the binding the operation owns; ""
	// and 0 when it no longer owns one (re-applied for a newer request).
	// A revocation's binding reads in the grant's vocabulary
	// (domain.OperationKind.GrantView: REVOKING at HANDLE_MERGED is
	// MERGED), so the batch path's milestones hold for both kinds;
	// TransitionMany maps its moves back per row.
	Binding        domain.BindingStatus
	BindingVersion int64
	Kind           domain.OperationKind
}

// BatchMemberStates returns the state of every member a batch ever had
// (membership history, claim order), in one statement.
func (s *Store) BatchMemberStates(ctx context.Context, batchID int64) ([]BatchMemberState, error) {
	rows, err := s.db.QueryContext(ctx,
		"SELECT o.operation_id, o.step_status, o.version, o.next_action, b.status, b.version, "+kindOf("o")+
			" FROM merge_batch_history h JOIN operation o ON o.operation_id = h.operation_id"+
			" LEFT JOIN binding b ON b.subject_id = o.subject AND b.target_key = o.target_key AND b.operation_id = o.operation_id"+
			" WHERE h.batch_id = ? ORDER BY h.id", batchID)
	if err != nil {
		return nil, fmt.Errorf("member states of batch %d: %w", batchID, translate(err))
	}
	defer rows.Close()
	var out []BatchMemberState
	for rows.Next() {
		var (
			m      BatchMemberState
			next   sql.NullString
			status sql.NullString
			bv     sql.NullInt64
		)
		if err := rows.Scan(&m.OperationID, &m.Step, &m.Version, &next, &status, &bv, &m.Kind); err != nil {
			return nil, err
		}
		m.NextAction, m.Binding, m.BindingVersion = next.String, domain.BindingStatus(status.String), bv.Int64
		if m.Binding != "" {
			m.Binding = m.Kind.GrantView(m.Binding, domain.StepStatus(m.Step))
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(err)
	}
	return out, nil
}

// BatchMemberOperations returns the operations of every member a batch
// ever had (membership history, claim order), in one statement.
func (s *Store) BatchMemberOperations(ctx context.Context, batchID int64) ([]Operation, error) {
	rows, err := s.db.QueryContext(ctx,
		"SELECT "+prefixColumns("o.", operationColumns)+
			" FROM merge_batch_history h JOIN operation o ON o.operation_id = h.operation_id WHERE h.batch_id = ? ORDER BY h.id", batchID)
	if err != nil {
		return nil, fmt.Errorf("member operations of batch %d: %w", batchID, translate(err))
	}
	defer rows.Close()
	var out []Operation
	for rows.Next() {
		o, err := scanOperation(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(err)
	}
	return out, nil
}

// prefixColumns qualifies every column of a comma-separated list.
func prefixColumns(prefix, cols string) string {
	parts := strings.Split(cols, ",")
	for i, c := range parts {
		parts[i] = prefix + strings.TrimSpace(c)
	}
	return strings.Join(parts, ", ")
}

// BatchResumableParams says which project's unstarted batch a round may
// finish building, and who is asking.
type BatchResumableParams struct {
	ProjectID int64
	// MinAge (batch.resumeAfter): a batch claimed longer ago than this is
	// resumable whatever its builder — the backstop for a builder that is
	// alive but stuck.
	MinAge time.Duration
	// Self is the asking instance's id: a batch whose builder is Self is
	// not being built by any round of this process unless the caller knows
	// otherwise (a restart under the same id); the caller checks its own
	// rounds in progress.
	Self string
	// LiveAfter (instance.liveAfter): a builder whose heartbeat is older
	// than this, or missing, is dead. ≤ 0: liveness is not considered.
	LiveAfter time.Duration
}

// BatchResumable returns the project's RUNNING batch that has no MR
// recorded and whose round is not building it any more, or
// domain.ErrNotFound. Resumable at once: the builder's round returned
// (builder empty), the builder is p.Self, or the builder has no heartbeat
// within p.LiveAfter (killed). Otherwise — a live builder on another
// instance, or no builder recorded — only once the batch is older than
// p.MinAge by the database clock.
//
// The liveness read is a correlated NOT EXISTS on instance_heartbeat's
// primary key; the project has at most one RUNNING batch (I1), so the
// query reads one merge_batch row and at most one heartbeat row.
func (s *Store) BatchResumable(ctx context.Context, p BatchResumableParams) (Batch, error) {
	before, beforeArg := s.dialect.NowMinus(p.MinAge)
	q := "SELECT " + batchColumns + " FROM merge_batch WHERE project_id = ? AND status = ? AND mr_iid IS NULL AND (" +
		"created_at < " + before + " OR builder = '' OR builder = ?"
	args := []any{p.ProjectID, domain.BatchRunning, beforeArg, p.Self}
	if p.LiveAfter > 0 {
		live, liveArg := s.dialect.NowMinus(p.LiveAfter)
		q += " OR (builder IS NOT NULL AND NOT EXISTS (SELECT 1 FROM instance_heartbeat h" +
			" WHERE h.instance_id = merge_batch.builder AND h.heartbeat_at > " + live + "))"
		args = append(args, liveArg)
	}
	b, err := scanBatch(s.db.QueryRowContext(ctx, q+")", args...))
	if errors.Is(err, sql.ErrNoRows) {
		return Batch{}, domain.ErrNotFound
	}
	if err != nil {
		return Batch{}, fmt.Errorf("resumable batch of project %d: %w", p.ProjectID, translate(err))
	}
	return b, nil
}

// BatchBuildTake records builder as the instance now building batch id's
// MR, while it is RUNNING without one (a round resuming it). Several
// resumers may race; each then builds, which is safe (every remote write
// is looked up first) — this only tells the others who is alive.
func (s *Store) BatchBuildTake(ctx context.Context, id int64, builder string) error {
	if _, err := s.db.ExecContext(ctx,
		"UPDATE merge_batch SET builder = ? WHERE id = ? AND status = ? AND mr_iid IS NULL",
		builder, id, domain.BatchRunning); err != nil {
		return fmt.Errorf("take building of batch %d: %w", id, translate(err))
	}
	return nil
}

// BatchBuildRelease records that builder's round for batch id returned —
// whether it recorded the MR or gave up — so that the next round on any
// instance resumes an unstarted batch at once instead of after
// batch.resumeAfter. Guarded on builder, so a round that lost the batch to
// a resumer does not release the resumer's build.
func (s *Store) BatchBuildRelease(ctx context.Context, id int64, builder string) error {
	if _, err := s.db.ExecContext(ctx,
		"UPDATE merge_batch SET builder = '' WHERE id = ? AND builder = ?", id, builder); err != nil {
		return fmt.Errorf("release building of batch %d: %w", id, translate(err))
	}
	return nil
}

// batchAdmitMany admits ids to the project's waiting set in claim order:
// one multi-row INSERT per InChunkSize ids, so a settlement re-admits a
// batch of 1,000 in 2 statements rather than 1,000. Ids grow in VALUES
// order within a statement and the rows share its clock, so the next claim
// (created_at, id) takes them in the order given. A duplicate fails only
// that statement, on both databases (its rows are undone, the transaction
// stays usable), and that chunk is then admitted row by row, a duplicate
// being the answer "already waiting" as for BatchAdmit. In a FAILED
// settlement there is none: the members' rows were deleted first.
func batchAdmitMany(ctx context.Context, tx *sql.Tx, ids []string, projectID int64) error {
	for _, part := range chunk(ids, InChunkSize) {
		a := make([]any, 0, 2*len(part))
		for _, id := range part {
			if id == "" || len(id) > batchOperationIDMax {
				return fmt.Errorf("re-admit: operationId must have 1 to %d bytes, has %d", batchOperationIDMax, len(id))
			}
			a = append(a, id, projectID)
		}
		_, err := tx.ExecContext(ctx, "INSERT INTO merge_batch_request (operation_id, project_id) VALUES "+
			strings.TrimSuffix(strings.Repeat("(?, ?), ", len(part)), ", "), a...)
		if err = translate(err); err == nil {
			continue
		} else if !errors.Is(err, domain.ErrDuplicate) {
			return fmt.Errorf("re-admit: %w", err)
		}
		for _, id := range part {
			if _, err := batchAdmit(ctx, tx, id, projectID); err != nil {
				return fmt.Errorf("re-admit %s: %w", id, err)
			}
		}
	}
	return nil
}

// nullID binds an optional id: 0 as NULL.
func nullID(id int64) any {
	if id == 0 {
		return nil
	}
	return id
}

// BatchWaiting returns those of ids that wait in the project's waiting set
// (admitted, not claimed), in the order given: culprit isolation's "the
// rest of a failed batch still to be tried".
func (s *Store) BatchWaiting(ctx context.Context, projectID int64, ids []string) ([]string, error) {
	waiting := map[string]bool{}
	for _, part := range chunk(ids, InChunkSize) {
		a := []any{projectID}
		for _, id := range part {
			a = append(a, id)
		}
		rows, err := s.db.QueryContext(ctx, "SELECT operation_id FROM merge_batch_request"+
			" WHERE project_id = ? AND batch_id IS NULL AND operation_id IN ("+placeholders(len(part))+")", a...)
		if err != nil {
			return nil, fmt.Errorf("waiting of project %d: %w", projectID, translate(err))
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				_ = rows.Close()
				return nil, err
			}
			waiting[id] = true
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return nil, fmt.Errorf("waiting of project %d: %w", projectID, translate(err))
		}
	}
	out := make([]string, 0, len(waiting))
	for _, id := range ids {
		if waiting[id] {
			out = append(out, id)
		}
	}
	return out, nil
}
