package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"changeflow/internal/domain"
)

// reviewItemCols reads an item and whether its removal is in effect: a
// step of the revocation to REVOKED (the deployment confirmed it, or
// reconciliation inferred it), read through idx_operation_step_operation.
const reviewItemCols = "i.id, i.campaign_id, i.subject, i.grant_operation_id, i.approval_id, i.granted_from, i.expires_at," +
	" i.decision, i.decided_by, i.decided_at, i.comment, i.by_default, i.revocation_operation_id, i.revoke_note," +
	" (CASE WHEN i.revocation_operation_id IS NOT NULL AND EXISTS (SELECT 1 FROM operation_step s" +
	" WHERE s.operation_id = i.revocation_operation_id AND s.to_binding_status = 'REVOKED') THEN 1 ELSE 0 END)"

func scanReviewItem(sc interface{ Scan(...any) error }) (ReviewItem, error) {
	var (
		it                            ReviewItem
		grant, approval, decision, by sql.NullString
		revocation, note              sql.NullString
		from, expires, decidedAt      dbTime
		byDefault, inEffect           int
	)
	err := sc.Scan(&it.ID, &it.CampaignID, &it.Subject, &grant, &approval, &from, &expires,
		&decision, &by, &decidedAt, &it.Comment, &byDefault, &revocation, &note, &inEffect)
	if err != nil {
		return it, err
	}
	it.GrantOperationID, it.ApprovalID = grant.String, approval.String
	it.From, it.ExpiresAt, it.DecidedAt = from.t, expires.t, decidedAt.t
	it.Decision, it.DecidedBy = domain.ReviewDecision(decision.String), by.String
	it.ByDefault, it.RemovalInEffect = byDefault != 0, inEffect != 0
	it.RevocationID, it.RevokeNote = revocation.String, note.String
	return it, nil
}

func (s *Store) reviewItems(ctx context.Context, where string, args ...any) ([]ReviewItem, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT "+reviewItemCols+
		" FROM review_item i JOIN review_campaign c ON c.id = i.campaign_id WHERE "+where+" ORDER BY i.campaign_id, i.id", args...)
	if err != nil {
		return nil, fmt.Errorf("review items: %w", translate(err))
	}
	defer rows.Close()
	var out []ReviewItem
	for rows.Next() {
		it, err := scanReviewItem(rows)
		if err != nil {
			return nil, fmt.Errorf("review items: %w", err)
		}
		out = append(out, it)
	}
	return out, translate(rows.Err())
}

// ReviewItems returns campaign id's items in id order.
func (s *Store) ReviewItems(ctx context.Context, id int64) ([]ReviewItem, error) {
	return s.reviewItems(ctx, "i.campaign_id = ?", id)
}

// ReviewOpenItem is an undecided item of an open campaign, with its
// campaign's target and due date (GET /api/reviews filters them by
// domain.MayDecide).
type ReviewOpenItem struct {
	ReviewItem
	TargetKey string
	DueAt     time.Time
}

// ReviewOpenItems returns up to limit undecided items of open campaigns
// not yet due.
func (s *Store) ReviewOpenItems(ctx context.Context, limit int) ([]ReviewOpenItem, error) {
	if limit <= 0 || limit > 5000 {
		limit = 5000
	}
	rows, err := s.db.QueryContext(ctx, "SELECT "+reviewItemCols+", c.target_key, c.due_at"+
		" FROM review_campaign c JOIN review_item i ON i.campaign_id = c.id"+
		" WHERE c.status = ? AND c.due_at > "+s.dialect.Now()+" AND i.decision IS NULL ORDER BY c.id, i.id LIMIT ?", domain.ReviewOpen, limit)
	if err != nil {
		return nil, fmt.Errorf("open review items: %w", translate(err))
	}
	defer rows.Close()
	var out []ReviewOpenItem
	for rows.Next() {
		var o ReviewOpenItem
		var due dbTime
		it, err := scanReviewItem(scanTail{rows, []any{&o.TargetKey, &due}})
		if err != nil {
			return nil, fmt.Errorf("open review items: %w", err)
		}
		o.ReviewItem, o.DueAt = it, due.t
		out = append(out, o)
	}
	return out, translate(rows.Err())
}

// scanTail scans a row whose leading columns another scanner reads, with
// the trailing ones into tail.
type scanTail struct {
	rows *sql.Rows
	tail []any
}

func (t scanTail) Scan(dest ...any) error { return t.rows.Scan(append(dest, t.tail...)...) }

// ReviewItemGet reads item itemID of campaign campaignID;
// domain.ErrNotFound when it is not one.
func (s *Store) ReviewItemGet(ctx context.Context, campaignID, itemID int64) (ReviewItem, error) {
	items, err := s.reviewItems(ctx, "i.id = ? AND i.campaign_id = ?", itemID, campaignID)
	if err != nil {
		return ReviewItem{}, err
	}
	if len(items) == 0 {
		return ReviewItem{}, fmt.Errorf("review %d item %d: %w", campaignID, itemID, domain.ErrNotFound)
	}
	return items[0], nil
}

// ReviewDecideParams decides one item.
type ReviewDecideParams struct {
	CampaignID, ItemID int64
	Decision           domain.ReviewDecision
	By, Comment        string
}

// ReviewDecide records a decision once: a guarded UPDATE of an undecided
// item of an open campaign not yet due (by the database clock: at the due
// date the default decides, even before the pass has closed it). A
// decided item is ErrReviewDecided, an item of a closed or due campaign
// ErrReviewClosed, an unknown one domain.ErrNotFound;
// nothing is written then. Racing the due date's close, one of the two
// wins the item's row (the close decides only undecided items).
func (s *Store) ReviewDecide(ctx context.Context, p ReviewDecideParams) (ReviewItem, error) {
	if _, ok := domain.ParseReviewDecision(string(p.Decision)); !ok || p.By == "" {
		return ReviewItem{}, fmt.Errorf("decide review item: decision %q by %q", p.Decision, p.By)
	}
	d := s.dialect
	res, err := s.db.ExecContext(ctx, "UPDATE review_item SET decision = ?, decided_by = ?, decided_at = "+d.Now()+", comment = ?"+
		" WHERE id = ? AND campaign_id = ? AND decision IS NULL"+
		" AND EXISTS (SELECT 1 FROM review_campaign c WHERE c.id = ? AND c.status = ? AND c.due_at > "+d.Now()+")",
		string(p.Decision), clipRunes(p.By, 128), clipRunes(p.Comment, 1024), p.ItemID, p.CampaignID, p.CampaignID, domain.ReviewOpen)
	if err != nil {
		return ReviewItem{}, fmt.Errorf("decide review %d item %d: %w", p.CampaignID, p.ItemID, translate(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return ReviewItem{}, fmt.Errorf("decide review %d item %d: %w", p.CampaignID, p.ItemID, err)
	}
	it, gerr := s.ReviewItemGet(ctx, p.CampaignID, p.ItemID)
	if gerr != nil || n == 1 {
		return it, gerr
	}
	if it.Decision != "" {
		return it, fmt.Errorf("review %d item %d (%s by %s): %w", p.CampaignID, p.ItemID, it.Decision, it.DecidedBy, ErrReviewDecided)
	}
	return it, fmt.Errorf("review %d item %d: %w", p.CampaignID, p.ItemID, ErrReviewClosed)
}

// ReviewDue returns up to limit open campaigns whose due date has passed
// by the database clock (idx_review_campaign_due).
func (s *Store) ReviewDue(ctx context.Context, limit int) ([]int64, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT id FROM review_campaign WHERE status = ? AND due_at <= "+s.dialect.Now()+" ORDER BY due_at, id LIMIT ?",
		domain.ReviewOpen, limit)
	if err != nil {
		return nil, fmt.Errorf("due reviews: %w", translate(err))
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("due reviews: %w", err)
		}
		out = append(out, id)
	}
	return out, translate(rows.Err())
}

// reviewAudit records, in the review write's own transaction, what no
// person's request recorded (the schedule's opening, the due date's
// close), so the audit log — and the audit chain and export built on it
// — holds a campaign's whole life. key makes it once.
func reviewAudit(ctx context.Context, tx *sql.Tx, key, actor, action, resource, params string) error {
	_, err := tx.ExecContext(ctx, "INSERT INTO audit_log (audit_key, actor, action, resource, params, outcome) VALUES (?, ?, ?, ?, ?, ?)",
		key, clipRunes(actor, 128), action, clipRunes(resource, 255), params, string(domain.CodeOK))
	return translate(err)
}

// ReviewClose closes campaign id at its due date, once: the guarded close
// of the campaign (open, due by the database clock) and, in the same
// transaction, every undecided item takes the campaign's default
// (domain.ReviewAtDue) with by_default set and decided_by
// domain.ReviewActor. Another instance that closed it first, or a
// campaign not yet due, is domain.ErrPreempted and writes nothing. The
// close is audited in the same transaction (action review-close, actor
// review:<id>), and so is the campaign's report (review-report,
// reviewReportTx). defaulted counts the items the default decided.
func (s *Store) ReviewClose(ctx context.Context, id int64) (defaulted int, err error) {
	d := s.dialect
	err = s.InTx(ctx, nil, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "UPDATE review_campaign SET status = ?, closed_at = "+d.Now()+", open_target = NULL"+
			" WHERE id = ? AND status = ? AND due_at <= "+d.Now(), domain.ReviewClosed, id, domain.ReviewOpen)
		if err != nil {
			return translate(err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return errors.Join(err, domain.ErrPreempted)
		}
		var def string
		if err := tx.QueryRowContext(ctx, "SELECT default_decision FROM review_campaign WHERE id = ?", id).Scan(&def); err != nil {
			return translate(err)
		}
		res, err = tx.ExecContext(ctx, "UPDATE review_item SET decision = ?, decided_by = ?, decided_at = "+d.Now()+", by_default = 1"+
			" WHERE campaign_id = ? AND decision IS NULL", def, domain.ReviewActor(id), id)
		if err != nil {
			return translate(err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		defaulted = int(n)
		if err := reviewAudit(ctx, tx, fmt.Sprintf("review-close-%d", id), domain.ReviewActor(id), "review-close",
			fmt.Sprintf("review:%d", id), fmt.Sprintf(`{"defaulted":%d,"defaultDecision":%q}`, n, def)); err != nil {
			return err
		}
		return reviewReportTx(ctx, tx, id)
	})
	if err != nil {
		return 0, fmt.Errorf("close review %d: %w", id, err)
	}
	return defaulted, nil
}

// ReviewPendingRemoval is an item decided revoke whose removal is not yet
// recorded, with its campaign's target.
type ReviewPendingRemoval struct {
	ReviewItem
	TargetKey string
}

// ReviewPendingRemovals returns up to limit items decided revoke with
// neither a removal nor a note recorded (idx_review_item_revoke): what
// the review pass still has to start — a grant's revocation, or for an
// item without a grant the removal of its repository entry
// (RepoRemovalCreate).
func (s *Store) ReviewPendingRemovals(ctx context.Context, limit int) ([]ReviewPendingRemoval, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT "+reviewItemCols+", c.target_key"+
		" FROM review_item i JOIN review_campaign c ON c.id = i.campaign_id"+
		" WHERE i.decision = ? AND i.revocation_operation_id IS NULL AND i.revoke_note IS NULL"+
		" ORDER BY i.id LIMIT ?", string(domain.ReviewRevoke), limit)
	if err != nil {
		return nil, fmt.Errorf("pending review removals: %w", translate(err))
	}
	defer rows.Close()
	var out []ReviewPendingRemoval
	for rows.Next() {
		var p ReviewPendingRemoval
		it, err := scanReviewItem(scanTail{rows, []any{&p.TargetKey}})
		if err != nil {
			return nil, fmt.Errorf("pending review removals: %w", err)
		}
		p.ReviewItem = it
		out = append(out, p)
	}
	return out, translate(rows.Err())
}

// ReviewRecordRemoval records on item itemID the removal its revoke
// started (revocationID) or why none was (note), once: a second record
// is domain.ErrPreempted.
func (s *Store) ReviewRecordRemoval(ctx context.Context, itemID int64, revocationID, note string) error {
	if (revocationID == "") == (note == "") {
		return errors.New("record review removal: exactly one of revocation and note")
	}
	res, err := s.db.ExecContext(ctx, "UPDATE review_item SET revocation_operation_id = ?, revoke_note = ?"+
		" WHERE id = ? AND decision = ? AND revocation_operation_id IS NULL AND revoke_note IS NULL",
		nullString(revocationID), nullString(clipRunes(note, 512)), itemID, string(domain.ReviewRevoke))
	if err != nil {
		return fmt.Errorf("record removal of review item %d: %w", itemID, translate(err))
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("record removal of review item %d: %w", itemID, errors.Join(err, domain.ErrPreempted))
	}
	return nil
}
