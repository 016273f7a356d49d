package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/notify"
)

// Access reviews (docs/reviews.md): campaigns and their items. The store
// records; who may decide and what the default does are domain's rules
// (domain.MayDecide, domain.ReviewAtDue). Every write that must happen
// once — opening a target's campaign, deciding an item, applying the
// default at the due date, recording an item's removal — is a unique key
// or a guarded UPDATE, so several instances racing do it once.

// Review errors the routes tell apart.
var (
	// ErrReviewOpen: the target already has an open campaign (or the
	// scheduled campaign after the last one exists already).
	ErrReviewOpen = errors.New("the target has an open review campaign")
	// ErrReviewDecided: the item was decided already.
	ErrReviewDecided = errors.New("the review item is decided already")
	// ErrReviewClosed: the campaign is closed; its items take no decision.
	ErrReviewClosed = errors.New("the review campaign is closed")
)

// ReviewCampaign is one campaign, with its items counted.
type ReviewCampaign struct {
	ID              int64
	TargetKey       string
	OpenedAt        time.Time
	DueAt           time.Time
	DefaultDecision domain.ReviewDecision
	OpenedBy        string
	Status          string
	ClosedAt        time.Time
	// Scheduled: the schedule opened it (targets.<key>.review.every).
	Scheduled bool
	// Items and Decided count its items and the decided ones.
	Items, Decided int
}

// ReviewItem is one entry under review.
type ReviewItem struct {
	ID         int64
	CampaignID int64
	Subject    string
	// GrantOperationID is the changeflow grant reviewed; "" for an entry
	// changeflow did not write.
	GrantOperationID string
	ApprovalID       string
	// From is when the grant took effect (its first step to VALIDATED);
	// zero when unknown.
	From      time.Time
	ExpiresAt time.Time
	// Decision is "" while undecided.
	Decision  domain.ReviewDecision
	DecidedBy string
	DecidedAt time.Time
	Comment   string
	// ByDefault: the campaign's default decided it at the due date.
	ByDefault bool
	// RevocationID is the removal a revoke started; RevokeNote says why
	// none was (the access had ended already).
	RevocationID string
	RevokeNote   string
	// RemovalInEffect: the removal's deployment confirmed it (a step of
	// RevocationID to REVOKED).
	RemovalInEffect bool
}

// ReviewOpenParams opens a campaign.
type ReviewOpenParams struct {
	TargetKey string
	DueAt     time.Time
	Default   domain.ReviewDecision
	OpenedBy  string
	// ScheduledAfter, for a campaign the schedule opens, is the id of the
	// target's last campaign (0 when none): the campaign after it exists
	// once (uk_review_campaign_schedule). nil for an operator's.
	ScheduledAfter *int64
	// Reviewers are the target's owners (targets.KEY.owners): the
	// campaign's review.assigned event, written in the opening's
	// transaction, asks them to decide.
	Reviewers []string
}

// ReviewOpen opens a campaign with one item per entry in effect on the
// target, in one transaction: each changeflow grant in effect (binding
// VALIDATED, or RENEWING: the grant's access stays in effect while its
// renewal runs), and each entry changeflow did not write (an open repo
// period, reviewItemsFromRepo; its item has no grant). A target with an
// open campaign, or a scheduled campaign that another instance opened
// first, is ErrReviewOpen and writes nothing. A scheduled opening is
// audited in the same transaction (action review-open-scheduled).
func (s *Store) ReviewOpen(ctx context.Context, p ReviewOpenParams) (ReviewCampaign, error) {
	if p.TargetKey == "" || p.OpenedBy == "" || p.DueAt.IsZero() {
		return ReviewCampaign{}, errors.New("open review: target, opener and due date are required")
	}
	if _, ok := domain.ParseReviewDecision(string(p.Default)); !ok {
		return ReviewCampaign{}, fmt.Errorf("open review: default decision %q", p.Default)
	}
	d := s.dialect
	var id int64
	err := s.InTx(ctx, nil, func(tx *sql.Tx) error {
		var after any
		if p.ScheduledAfter != nil {
			after = *p.ScheduledAfter
		}
		res, err := tx.ExecContext(ctx,
			"INSERT INTO review_campaign (target_key, due_at, default_decision, opened_by, open_target, scheduled_after) VALUES (?, ?, ?, ?, ?, ?)",
			p.TargetKey, d.Time(p.DueAt), string(p.Default), clipRunes(p.OpenedBy, 128), p.TargetKey, after)
		if err != nil {
			if errors.Is(translate(err), domain.ErrDuplicate) {
				return ErrReviewOpen
			}
			return translate(err)
		}
		if id, err = res.LastInsertId(); err != nil {
			return err
		}
		res, err = tx.ExecContext(ctx, reviewItemsInEffect, id, string(domain.BindingValidated), string(domain.BindingRenewing),
			p.TargetKey, string(domain.BindingValidated), string(domain.BindingRenewing))
		if err != nil {
			return translate(err)
		}
		repo, err := tx.ExecContext(ctx, reviewItemsFromRepo, id, p.TargetKey, AccessSourceRepo,
			string(domain.BindingValidated), string(domain.BindingRenewing))
		if err != nil {
			return translate(err)
		}
		due := p.DueAt.UTC()
		if err := outboxAdd(ctx, tx, []OutboxNew{{Kind: notify.KindReviewAssigned, OrderKey: fmt.Sprintf("review:%d", id),
			Data: OutboxData{Data: notify.Data{ReviewID: strconv.FormatInt(id, 10), TargetKey: p.TargetKey,
				Reviewers: p.Reviewers, Until: &due}}}}); err != nil {
			return err
		}
		if p.ScheduledAfter == nil {
			return nil
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		m, err := repo.RowsAffected()
		if err != nil {
			return err
		}
		n += m
		// An operator's opening is audited by its route; the schedule's
		// here, in its own transaction.
		return reviewAudit(ctx, tx, fmt.Sprintf("review-open-%d", id), p.OpenedBy, "review-open-scheduled",
			fmt.Sprintf("review:%d", id), fmt.Sprintf(`{"targetKey":%q,"items":%d,"dueAt":%q}`, p.TargetKey, n, p.DueAt.UTC().Format(time.RFC3339)))
	})
	if err != nil {
		return ReviewCampaign{}, fmt.Errorf("open review of %s: %w", p.TargetKey, err)
	}
	return s.ReviewCampaignGet(ctx, id)
}

// reviewItemsInEffect copies the target's grants in effect into items:
// the binding's own grant, or for a RENEWING row the grant its renewal
// renews; from is when the grant took effect: its first step to VALIDATED
// (read through idx_operation_step_operation).
const reviewItemsInEffect = "INSERT INTO review_item (campaign_id, subject, grant_operation_id, approval_id, granted_from, expires_at)" +
	" SELECT ?, b.subject_id, g.operation_id, g.approval_id," +
	" (SELECT MIN(s.created_at) FROM operation_step s WHERE s.operation_id = g.operation_id AND s.to_binding_status = ?), b.expires_at" +
	" FROM binding b JOIN operation o ON o.operation_id = b.operation_id" +
	" JOIN operation g ON g.operation_id = (CASE WHEN b.status = ? THEN o.grant_operation_id ELSE b.operation_id END)" +
	" WHERE b.target_key = ? AND b.status IN (?, ?)"

const reviewCampaignCols = "c.id, c.target_key, c.opened_at, c.due_at, c.default_decision, c.opened_by, c.status, c.closed_at, c.scheduled_after," +
	" (SELECT COUNT(*) FROM review_item i WHERE i.campaign_id = c.id)," +
	" (SELECT COUNT(*) FROM review_item i WHERE i.campaign_id = c.id AND i.decision IS NOT NULL)"

func scanReviewCampaign(sc interface{ Scan(...any) error }) (ReviewCampaign, error) {
	var (
		c              ReviewCampaign
		opened, due    dbTime
		closed         dbTime
		def            string
		scheduledAfter sql.NullInt64
	)
	if err := sc.Scan(&c.ID, &c.TargetKey, &opened, &due, &def, &c.OpenedBy, &c.Status, &closed, &scheduledAfter, &c.Items, &c.Decided); err != nil {
		return c, err
	}
	c.OpenedAt, c.DueAt, c.ClosedAt = opened.t, due.t, closed.t
	c.DefaultDecision, c.Scheduled = domain.ReviewDecision(def), scheduledAfter.Valid
	return c, nil
}

// ReviewCampaignGet reads campaign id; domain.ErrNotFound when none.
func (s *Store) ReviewCampaignGet(ctx context.Context, id int64) (ReviewCampaign, error) {
	c, err := scanReviewCampaign(s.db.QueryRowContext(ctx, "SELECT "+reviewCampaignCols+" FROM review_campaign c WHERE c.id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return c, fmt.Errorf("review %d: %w", id, domain.ErrNotFound)
	}
	if err != nil {
		return c, fmt.Errorf("review %d: %w", id, translate(err))
	}
	return c, nil
}

// ReviewCampaigns lists up to limit campaigns, newest first, optionally of
// one target.
func (s *Store) ReviewCampaigns(ctx context.Context, target string, limit int) ([]ReviewCampaign, error) {
	if limit <= 0 || limit > 500 {
		limit = 500
	}
	q, args := "SELECT "+reviewCampaignCols+" FROM review_campaign c", []any{}
	if target != "" {
		q += " WHERE c.target_key = ?"
		args = append(args, target)
	}
	q += " ORDER BY c.id DESC LIMIT ?"
	rows, err := s.db.QueryContext(ctx, q, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("list reviews: %w", translate(err))
	}
	defer rows.Close()
	var out []ReviewCampaign
	for rows.Next() {
		c, err := scanReviewCampaign(rows)
		if err != nil {
			return nil, fmt.Errorf("list reviews: %w", err)
		}
		out = append(out, c)
	}
	return out, translate(rows.Err())
}

// ReviewLast is what the schedule needs of a target's campaigns: the
// newest one's id and opening (0 and zero when none) and whether one is
// open.
func (s *Store) ReviewLast(ctx context.Context, target string) (id int64, openedAt time.Time, open bool, err error) {
	var at dbTime
	var status string
	err = s.db.QueryRowContext(ctx,
		"SELECT id, opened_at, status FROM review_campaign WHERE target_key = ? ORDER BY id DESC LIMIT 1", target).Scan(&id, &at, &status)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, time.Time{}, false, nil
	}
	if err != nil {
		return 0, time.Time{}, false, fmt.Errorf("last review of %s: %w", target, translate(err))
	}
	return id, at.t, status == domain.ReviewOpen, nil
}
