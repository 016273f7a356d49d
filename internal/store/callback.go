package store

import (
	"context"
	"errors"
	"fmt"

	"changeflow/internal/domain"
)

// Delivery dedupe (I4, the first layer): every callback and webhook is
// recorded by the id its sender gives the delivery, with a plain INSERT on
// a unique key. A duplicate key means "already delivered": the insert
// returns false and the caller answers 2xx DUPLICATE without acting again.

// ApprovalCallbackParams is one approval-system callback delivery.
type ApprovalCallbackParams struct {
	// DeliveryKey is the callback's requestId, unique per delivery.
	DeliveryKey string
	OperationID string
	ApprovalID  string
	// Result is APPROVED, REJECTED or WITHDRAWN.
	Result string
	// Source is InboxSourceCallback ("" means it) or InboxSourcePoll.
	Source string
	// MRID is the ext.mrId a callback claimed ("" for none), kept so that
	// a replay is checked against the claim (ApprovalCallbackRecord.MRID).
	// Ignored for InboxSourcePoll: a polled decision claims nothing.
	MRID string
	// DecidedBy and Comment are who decided and their comment, as the
	// delivery reports them ("" for none); clipped to
	// domain.MaxDeciderRunes and domain.MaxApproverCommentRunes.
	DecidedBy, Comment string
}

// maxClaimedMRID bounds the ext.mrId the inbox keeps. A longer claim is
// no MR number (an int64 has 19 digits); it is kept as claimTooLong, which
// no replay parses, rather than cut: a cut claim could parse as another
// number than the whole one did.
const (
	maxClaimedMRID = 64
	claimTooLong   = "(too long)"
)

// Where an inbox row came from.
const (
	InboxSourceCallback = "callback"
	InboxSourcePoll     = "poll"
)

// ApprovalCallbackInsert records an approval callback delivery once and
// reports whether this call recorded it. A duplicate is counted on the
// row first recorded under the key (ApprovalCallbackRecord.Duplicates),
// so the inbox shows that it came again.
func (s *Store) ApprovalCallbackInsert(ctx context.Context, p ApprovalCallbackParams) (inserted bool, err error) {
	if err := checkKey("delivery key", p.DeliveryKey, 128); err != nil {
		return false, fmt.Errorf("record approval callback: %w", err)
	}
	source := p.Source
	if source == "" {
		source = InboxSourceCallback
	}
	var mrID any // NULL for a polled decision
	if source != InboxSourcePoll {
		m := p.MRID
		if len(m) > maxClaimedMRID {
			m = claimTooLong
		}
		mrID = m
	}
	inserted, err = insertOnce(ctx, s.db,
		"INSERT INTO approval_callback (delivery_key, operation_id, approval_id, result, source, mr_id, decided_by, comment) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
		p.DeliveryKey, p.OperationID, clipRunes(p.ApprovalID, 128), p.Result, clipRunes(source, 16), mrID, nullString(clipRunes(p.DecidedBy, domain.MaxDeciderRunes)),
		nullString(clipRunes(p.Comment, domain.MaxApproverCommentRunes)))
	if err != nil {
		return false, fmt.Errorf("record approval callback %q: %w", p.DeliveryKey, err)
	}
	if !inserted {
		if _, err := s.db.ExecContext(ctx,
			"UPDATE approval_callback SET duplicates = duplicates + 1 WHERE delivery_key = ?", p.DeliveryKey); err != nil {
			return false, fmt.Errorf("count duplicate approval callback %q: %w", p.DeliveryKey, translate(err))
		}
	}
	return inserted, nil
}

// DeployCallbackParams is one deployment-pipeline callback.
type DeployCallbackParams struct {
	// DeliveryKey is the sender's delivery id; "" when it sends none, in
	// which case every delivery is recorded (NULLs never collide) and
	// duplicates are harmless to reconciliation's watermark.
	DeliveryKey string
	ProjectID   int64
	MRIID       int64
	Status      string
}

// DeployCallbackInserted is what DeployCallbackInsert did.
type DeployCallbackInserted struct {
	// ID is the callback's inbox row: the one recorded now, or for a
	// duplicate the one first recorded under the key.
	ID int64
	// Inserted is false for a delivery key recorded before; the
	// duplicate is counted on that row (DeployCallbackRecord.Duplicates).
	Inserted bool
}

// DeployCallbackInsert records a deploy callback once per delivery key
// (RECORDED, for the workflow to classify) and reports its row.
func (s *Store) DeployCallbackInsert(ctx context.Context, p DeployCallbackParams) (DeployCallbackInserted, error) {
	if p.DeliveryKey != "" {
		if err := checkKey("delivery key", p.DeliveryKey, 128); err != nil {
			return DeployCallbackInserted{}, fmt.Errorf("record deploy callback: %w", err)
		}
	}
	res, err := s.db.ExecContext(ctx,
		"INSERT INTO deploy_callback (delivery_key, project_id, mr_iid, status) VALUES (?, ?, ?, ?)",
		nullString(p.DeliveryKey), p.ProjectID, p.MRIID, clipRunes(p.Status, 32))
	if err == nil {
		id, err := res.LastInsertId()
		if err != nil {
			return DeployCallbackInserted{}, fmt.Errorf("record deploy callback for MR !%d: %w", p.MRIID, translate(err))
		}
		return DeployCallbackInserted{ID: id, Inserted: true}, nil
	}
	if err = translate(err); !errors.Is(err, domain.ErrDuplicate) {
		return DeployCallbackInserted{}, fmt.Errorf("record deploy callback for MR !%d: %w", p.MRIID, err)
	}
	if _, err := s.db.ExecContext(ctx,
		"UPDATE deploy_callback SET duplicates = duplicates + 1 WHERE delivery_key = ?", p.DeliveryKey); err != nil {
		return DeployCallbackInserted{}, fmt.Errorf("count duplicate deploy callback %q: %w", p.DeliveryKey, translate(err))
	}
	id, err := s.deployCallbackIDByKey(ctx, p.DeliveryKey)
	if err != nil {
		return DeployCallbackInserted{}, err
	}
	return DeployCallbackInserted{ID: id}, nil
}

// GitLabEventInsert records a GitLab webhook delivery once by its
// X-Gitlab-Event-UUID and reports whether this call recorded it.
func (s *Store) GitLabEventInsert(ctx context.Context, eventUUID, kind string) (inserted bool, err error) {
	if err := checkKey("event UUID", eventUUID, 64); err != nil {
		return false, fmt.Errorf("record GitLab event: %w", err)
	}
	inserted, err = insertOnce(ctx, s.db,
		"INSERT INTO gitlab_event (event_uuid, kind) VALUES (?, ?)", eventUUID, clipRunes(kind, 32))
	if err != nil {
		return false, fmt.Errorf("record GitLab event %q: %w", eventUUID, err)
	}
	return inserted, nil
}
