package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// ApprovalCallbackRecord is one recorded approval callback delivery.
type ApprovalCallbackRecord struct {
	DeliveryKey string
	OperationID string
	ApprovalID  string
	Result      string
	ReceivedAt  time.Time
	// Source is InboxSourceCallback or InboxSourcePoll.
	Source string
	// Disposition is what the workflow did with it last (Inbox*), and
	// Reason why; InboxRecorded until it acted.
	Disposition string
	Reason      string
	// Duplicates counts the deliveries (or polls) of the same key after
	// the first.
	Duplicates int
	// MRID is the ext.mrId the delivery claimed ("" for none), and
	// MRIDRecorded whether the row keeps it: a row recorded before the
	// inbox kept the claim (migration 00014), or found by polling, has
	// none, and its replay names the request's own MR.
	MRID         string
	MRIDRecorded bool
	// DecidedBy and Comment are who decided and their comment as the
	// delivery reported them ("" for none).
	DecidedBy, Comment string
}

// Dispositions of an inbox row: what the workflow did with the decision
// the last time it acted on it (a replay acts again and overwrites it).
const (
	// InboxRecorded: recorded, not acted on yet (the sink is not wired,
	// or its call failed; a replay, the SENT hook or the reconciler's
	// inbox pass acts on it later).
	InboxRecorded = "RECORDED"
	// InboxApplied: it moved its request on.
	InboxApplied = "APPLIED"
	// InboxStale: the request had moved on or was re-applied by a newer
	// request: nothing written (IGNORED_STALE).
	InboxStale = "STALE"
	// InboxUnknownOperation: no such request.
	InboxUnknownOperation = "UNKNOWN_OPERATION"
	// InboxRejectedByGuard: the guard refused it — its approvalId is not
	// the one changeflow recorded for the request, its ext.mrId is not the
	// request's MR, or the transition table refused the move it asked
	// for: nothing written, and it is never replayed.
	InboxRejectedByGuard = "REJECTED_BY_GUARD"
	// InboxUnconfirmed: with approval.verifyDecisions, the approval system
	// still reports the approval PENDING: nothing applied; read again by
	// the inbox replay and poll_approval while the request waits.
	InboxUnconfirmed = "UNCONFIRMED"
	// InboxVerifyFailed: with approval.verifyDecisions, reading the
	// approval back failed (unreachable, 5xx, breaker open, unknown id):
	// nothing applied — the callback's claim never is — and read again
	// like UNCONFIRMED.
	InboxVerifyFailed = "VERIFY_FAILED"
)

// approvalCallbackColumns are the columns scanApprovalCallback reads.
const approvalCallbackColumns = "delivery_key, operation_id, approval_id, result, received_at, source, disposition, reason, duplicates, mr_id, decided_by, comment"

type scanner interface{ Scan(dest ...any) error }

func scanApprovalCallback(row scanner) (ApprovalCallbackRecord, error) {
	var (
		r                 ApprovalCallbackRecord
		mrID, by, comment sql.NullString
	)
	err := row.Scan(&r.DeliveryKey, &r.OperationID, &r.ApprovalID, &r.Result, &r.ReceivedAt, &r.Source, &r.Disposition, &r.Reason, &r.Duplicates, &mrID, &by, &comment)
	r.MRID, r.MRIDRecorded = mrID.String, mrID.Valid
	r.DecidedBy, r.Comment = by.String, comment.String
	return r, err
}

// ApprovalCallbackDisposition records what the workflow did with the
// inbox row under deliveryKey; reason is clipped to 255 characters. An
// unknown key is no error (nothing to note).
func (s *Store) ApprovalCallbackDisposition(ctx context.Context, deliveryKey, disposition, reason string) error {
	if _, err := s.db.ExecContext(ctx,
		"UPDATE approval_callback SET disposition = ?, reason = ? WHERE delivery_key = ?",
		clipRunes(disposition, 24), clipRunes(reason, 255), deliveryKey); err != nil {
		return fmt.Errorf("note disposition of approval callback %q: %w", deliveryKey, translate(err))
	}
	return nil
}

// ApprovalCallbackLatest returns the latest recorded approval callback
// for operationID that the guard did not refuse
// (idx_approval_callback_operation); ok is false when there is none. A
// refused one is skipped so that a forged delivery recorded after the
// real one cannot hide the real one from the replay. The workflow reads it when it looks at a request waiting
// for its approval: a decision that was recorded but not acted on (the
// sink failed, or none was wired) is applied from here.
func (s *Store) ApprovalCallbackLatest(ctx context.Context, operationID string) (ApprovalCallbackRecord, bool, error) {
	r, err := scanApprovalCallback(s.db.QueryRowContext(ctx,
		"SELECT "+approvalCallbackColumns+" FROM approval_callback "+
			"WHERE operation_id = ? AND disposition <> ? ORDER BY id DESC LIMIT 1", operationID, InboxRejectedByGuard))
	if errors.Is(err, sql.ErrNoRows) {
		return ApprovalCallbackRecord{}, false, nil
	}
	if err != nil {
		return ApprovalCallbackRecord{}, false, fmt.Errorf("latest approval callback of %s: %w", operationID, translate(err))
	}
	return r, true, nil
}

// ApprovalCallbackList returns operationID's recorded approval callbacks,
// newest first, at most limit (the operations console's view of the
// inbox). The newest is the one ApprovalCallbackLatest returns, so the
// one an operator's replay applies.
func (s *Store) ApprovalCallbackList(ctx context.Context, operationID string, limit int) ([]ApprovalCallbackRecord, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("approval callbacks of %s: limit must be positive, is %d", operationID, limit)
	}
	rows, err := s.db.QueryContext(ctx,
		"SELECT "+approvalCallbackColumns+" FROM approval_callback "+
			"WHERE operation_id = ? ORDER BY id DESC LIMIT ?", operationID, limit)
	if err != nil {
		return nil, fmt.Errorf("approval callbacks of %s: %w", operationID, translate(err))
	}
	defer rows.Close()
	var out []ApprovalCallbackRecord
	for rows.Next() {
		r, err := scanApprovalCallback(rows)
		if err != nil {
			return nil, fmt.Errorf("approval callbacks of %s: %w", operationID, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("approval callbacks of %s: %w", operationID, translate(err))
	}
	return out, nil
}
