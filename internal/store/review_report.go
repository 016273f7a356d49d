package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"changeflow/internal/domain"
)

// reviewReportTx writes the report of campaign id, just closed in tx, as
// review-report audit records (domain.ReviewReportParams: one, or one
// per part of a report longer than audit_log.params holds), keyed
// review-report-<id>-<part> and audited like the close (actor and
// resource review:<id>), so the audit chain copies the report and the
// export carries it. In the close's transaction: the report exists
// exactly when the close does, once, and says what every item was at the
// close — the default's revokes are "pending" (their removals start
// right after, in the same pass, and are chained as their own steps).
func reviewReportTx(ctx context.Context, tx *sql.Tx, id int64) error {
	c, err := scanReviewCampaign(tx.QueryRowContext(ctx, "SELECT "+reviewCampaignCols+" FROM review_campaign c WHERE c.id = ?", id))
	if err != nil {
		return fmt.Errorf("read campaign: %w", translate(err))
	}
	rows, err := tx.QueryContext(ctx, "SELECT "+reviewItemCols+
		" FROM review_item i WHERE i.campaign_id = ? ORDER BY i.id", id)
	if err != nil {
		return fmt.Errorf("read items: %w", translate(err))
	}
	defer rows.Close()
	var items []domain.ReviewReportItem
	for rows.Next() {
		it, err := scanReviewItem(rows)
		if err != nil {
			return fmt.Errorf("read items: %w", err)
		}
		items = append(items, reviewReportItemOf(it))
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read items: %w", translate(err))
	}
	_ = rows.Close()
	parts, err := domain.ReviewReportParams(domain.ReviewReportHeader{
		Campaign: c.ID, TargetKey: c.TargetKey, OpenedAt: reportTime(c.OpenedAt), OpenedBy: c.OpenedBy, DueAt: reportTime(c.DueAt),
		DefaultDecision: string(c.DefaultDecision), KeepByDefault: c.DefaultDecision == domain.ReviewKeep,
	}, items, domain.ReviewReportMaxBytes)
	if err != nil {
		return err
	}
	for i, p := range parts {
		if err := reviewAudit(ctx, tx, fmt.Sprintf("review-report-%d-%d", id, i+1), domain.ReviewActor(id), domain.ReviewReportAction,
			domain.ReviewActor(id), p); err != nil {
			return fmt.Errorf("write report part %d: %w", i+1, err)
		}
	}
	return nil
}

// reviewReportItemOf is it as the report carries it.
func reviewReportItemOf(it ReviewItem) domain.ReviewReportItem {
	source := AccessSourceChangeflow
	if it.GrantOperationID == "" {
		source = AccessSourceRepo
	}
	return domain.ReviewReportItem{
		Subject: it.Subject, Source: source, GrantOperationID: it.GrantOperationID, ApprovalID: it.ApprovalID,
		From: reportTime(it.From), Until: reportTime(it.ExpiresAt),
		Decision: string(it.Decision), DecidedBy: it.DecidedBy, DecidedAt: reportTime(it.DecidedAt), ByDefault: it.ByDefault,
		Comment: it.Comment, Removal: domain.ReviewRemovalOf(it.Decision, it.RevocationID, it.RevokeNote),
		RemovalOperationID: it.RevocationID, RemovalNote: it.RevokeNote,
	}
}

// reportTime is t in RFC 3339 in UTC, to the stored precision; "" for
// the zero time.
func reportTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}
