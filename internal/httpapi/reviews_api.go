package httpapi

import (
	"context"
	"encoding/csv"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/identity"
	"changeflow/internal/store"
)

// maxReviewComment bounds a decision's comment (the removal reason's
// bound, since a revoke's comment goes into it).
const maxReviewComment = 500

// reviewAuditAction is the audit action of a decision.
const reviewAuditAction = "review-decide"

// reviewer is the caller as domain.MayDecide sees them. Operator is asked
// of the permission service (the rules of POST /ops/reviews) only when
// need says the answer matters; a failed check is "not an operator".
func (s *Server) reviewer(ctx context.Context, id identity.Identity, need bool) domain.Reviewer {
	rv := domain.Reviewer{Account: id.Account}
	if need {
		granted, err := s.checkRules(ctx, config.RouteOpsReviewOpen, id.Account)
		rv.Operator = err == nil && len(granted) > 0
	}
	return rv
}

// owners is the target's owners (none for a target no longer configured).
func (s *Server) owners(key string) []string {
	t, _ := s.target(key)
	return t.Owners
}

// isOwner reports whether account is one of owners.
func isOwner(owners []string, account string) bool {
	for _, o := range owners {
		if strings.EqualFold(o, account) {
			return true
		}
	}
	return false
}

// handleReviewsMine is GET /api/reviews: the undecided items of open
// campaigns the caller may decide — of targets they own, or every one for
// an operator — never the caller's own access.
func (s *Server) handleReviewsMine() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, _ := identity.FromContext(r.Context())
		rs, err := s.reviewStore()
		if err != nil {
			writeError(w, r, s.deps.Logger, err)
			return
		}
		items, err := rs.ReviewOpenItems(r.Context(), 0)
		if err != nil {
			writeError(w, r, s.deps.Logger, domain.Internal("open review items", err))
			return
		}
		var rv *domain.Reviewer
		out := []reviewItemView{}
		for _, it := range items {
			owners := s.owners(it.TargetKey)
			if rv == nil && !isOwner(owners, res.Identity.Account) {
				// Only a caller who owns none of these targets costs a
				// permission check, once.
				v := s.reviewer(r.Context(), res.Identity, true)
				rv = &v
			}
			who := domain.Reviewer{Account: res.Identity.Account, Operator: rv != nil && rv.Operator}
			if domain.MayDecide(who, owners, it.Subject) != domain.ReviewAllowed {
				continue
			}
			v := toReviewItem(it.ReviewItem)
			v.TargetKey, v.DueAt = it.TargetKey, timePtr(it.DueAt)
			out = append(out, v)
		}
		respond(w, s.deps.Logger, domain.CodeOK, map[string]any{"items": out})
	})
}

// handleReviewDecide is POST /api/reviews/{reviewId}/items/{itemId}
// {decision, comment}: an owner (or an operator) decides one item, once;
// never their own access. A revoke starts the removal at once (the review
// pass starts it otherwise). Audited like an ops write.
func (s *Server) handleReviewDecide() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, _ := identity.FromContext(r.Context())
		params := map[string]any{"reviewId": r.PathValue("reviewId"), "itemId": r.PathValue("itemId")}
		resource := "review:" + r.PathValue("reviewId") + "/" + r.PathValue("itemId")
		data, err := s.reviewDecide(w, r, res.Identity, params)
		outcome := domain.CodeOK
		if err != nil {
			outcome = domain.ErrorCode(err)
		}
		s.audit(context.WithoutCancel(r.Context()), res.Identity, reviewAuditAction, resource, "review-"+uuid.NewString(), params, string(outcome))
		if err != nil {
			writeError(w, r, s.deps.Logger, err)
			return
		}
		respond(w, s.deps.Logger, domain.CodeOK, data)
	})
}

func (s *Server) reviewDecide(w http.ResponseWriter, r *http.Request, caller identity.Identity, params map[string]any) (any, error) {
	rs, err := s.reviewStore()
	if err != nil {
		return nil, err
	}
	cid, err := reviewID(r.PathValue("reviewId"), "review item")
	if err != nil {
		return nil, err
	}
	iid, err := reviewID(r.PathValue("itemId"), "review item")
	if err != nil {
		return nil, err
	}
	decision, comment, err := decodeDecision(w, r, params)
	if err != nil {
		return nil, err
	}
	ctx := r.Context()
	c, err := rs.ReviewCampaignGet(ctx, cid)
	if err != nil {
		return nil, reviewStoreError("decide", err)
	}
	it, err := rs.ReviewItemGet(ctx, cid, iid)
	if err != nil {
		return nil, reviewStoreError("decide", err)
	}
	owners := s.owners(c.TargetKey)
	rv := s.reviewer(ctx, caller, !isOwner(owners, caller.Account) && !strings.EqualFold(caller.Account, it.Subject))
	if refusal := domain.MayDecide(rv, owners, it.Subject); refusal != domain.ReviewAllowed {
		return nil, domain.Refusef(domain.CodeReviewNotAllowed, refusal.Reason(), refusal.Message(),
			"review %d item %d of %s: %s may not decide", cid, iid, it.Subject, caller.Account)
	}
	it, err = rs.ReviewDecide(ctx, store.ReviewDecideParams{CampaignID: cid, ItemID: iid, Decision: decision, By: caller.Account, Comment: comment})
	if err != nil {
		return nil, reviewStoreError("decide", err)
	}
	if decision == domain.ReviewRevoke && s.deps.Business.ReviewRemovals != nil {
		if _, err := s.deps.Business.ReviewRemovals.StartRemoval(ctx, store.ReviewPendingRemoval{ReviewItem: it, TargetKey: c.TargetKey}); err != nil {
			// Decided and recorded: the review pass starts the removal.
			s.deps.Logger.Warn("review: removal not started; the review pass retries", "review", cid, "item", iid, "err", err)
		}
		if again, err := rs.ReviewItemGet(ctx, cid, iid); err == nil {
			it = again
		}
	}
	return toReviewItem(it), nil
}

// decodeDecision reads {decision, comment}, naming every bad field.
func decodeDecision(w http.ResponseWriter, r *http.Request, params map[string]any) (domain.ReviewDecision, string, error) {
	raw, err := readBody(w, r)
	if err != nil {
		return "", "", err
	}
	body := map[string]any{}
	if len(strings.TrimSpace(string(raw))) > 0 {
		if err := decodeJSON(raw, &body); err != nil {
			return "", "", err
		}
	}
	var f fieldErrors
	ds, _ := body["decision"].(string)
	d, ok := domain.ParseReviewDecision(ds)
	if !ok {
		f.add("decision", `must be "keep" or "revoke"`)
	}
	comment, isString := body["comment"].(string)
	comment = strings.TrimSpace(comment)
	switch {
	case body["comment"] != nil && !isString:
		f.add("comment", "must be a string")
	case utf8.RuneCountInString(comment) > maxReviewComment:
		f.add("comment", fmt.Sprintf("must be at most %d characters", maxReviewComment))
	default:
		if c, pos, bad := domain.FirstUnsafeTextRune(comment); bad {
			f.add("comment", fmt.Sprintf("must be one line of text without control or bidirectional-formatting characters (U+%04X at character %d)", c, pos+1))
		}
	}
	params["decision"], params["comment"] = ds, comment
	return d, comment, f.err()
}

// reviewCSVHeader is the report's CSV columns.
var reviewCSVHeader = []string{"reviewId", "targetKey", "defaultDecision", "itemId", "subject", "source", "grantOperationId", "approvalId",
	"from", "expiresAt", "decision", "byDefault", "decidedBy", "decidedAt", "comment", "revocationId", "removalInEffect", "note"}

// writeReviewCSV writes the report as CSV, one row per entry. A cell that
// a spreadsheet would read as a formula (=, +, -, @, tab, CR first) is
// prefixed with ' : comments and names are people's text.
func writeReviewCSV(w http.ResponseWriter, logger *slog.Logger, rep reviewReport) {
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="review-%d.csv"`, rep.ID))
	w.Header().Set("Cache-Control", "no-store")
	cw := csv.NewWriter(w)
	at := func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return t.Format(time.RFC3339)
	}
	_ = cw.Write(reviewCSVHeader)
	for _, e := range rep.Entries {
		row := []string{strconv.FormatInt(rep.ID, 10), rep.TargetKey, string(rep.DefaultDecision), strconv.FormatInt(e.ID, 10), e.Subject, e.Source,
			e.GrantOperationID, e.ApprovalID, at(e.From), at(e.ExpiresAt), string(e.Decision), strconv.FormatBool(e.ByDefault), e.DecidedBy,
			at(e.DecidedAt), e.Comment, e.RevocationID, strconv.FormatBool(e.RemovalInEffect), e.RevokeNote}
		for i, c := range row {
			row[i] = csvCell(c)
		}
		_ = cw.Write(row)
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		logger.Warn("write review csv", "review", rep.ID, "err", err)
	}
}

func csvCell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
