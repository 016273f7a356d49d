package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/identity"
	"changeflow/internal/store"
)

// Access reviews (docs/reviews.md, docs/api.md "Access reviews"): an
// operator opens a campaign for a target, its owners decide keep or revoke
// for each entry, and a revoke starts the ordinary removal. Who may decide
// is domain.MayDecide; the store decides nothing.

// ReviewStore backs the review routes; *store.Store is one.
type ReviewStore interface {
	ReviewOpen(ctx context.Context, p store.ReviewOpenParams) (store.ReviewCampaign, error)
	ReviewCampaigns(ctx context.Context, target string, limit int) ([]store.ReviewCampaign, error)
	ReviewCampaignGet(ctx context.Context, id int64) (store.ReviewCampaign, error)
	ReviewItems(ctx context.Context, id int64) ([]store.ReviewItem, error)
	ReviewOpenItems(ctx context.Context, limit int) ([]store.ReviewOpenItem, error)
	ReviewItemGet(ctx context.Context, campaignID, itemID int64) (store.ReviewItem, error)
	ReviewDecide(ctx context.Context, p store.ReviewDecideParams) (store.ReviewItem, error)
}

// ReviewRemovals starts a revoked item's removal (*review.Reviews); nil
// leaves every removal to the review pass.
type ReviewRemovals interface {
	StartRemoval(ctx context.Context, it store.ReviewPendingRemoval) (bool, error)
}

// reviewCampaignView is a campaign in every answer.
type reviewCampaignView struct {
	ID              int64                 `json:"id"`
	TargetKey       string                `json:"targetKey"`
	OpenedAt        time.Time             `json:"openedAt"`
	DueAt           time.Time             `json:"dueAt"`
	DefaultDecision domain.ReviewDecision `json:"defaultDecision"`
	// KeepByDefault flags a campaign whose undecided items are kept: the
	// report shows it, since revoke is the safer default.
	KeepByDefault bool       `json:"keepByDefault"`
	OpenedBy      string     `json:"openedBy"`
	Status        string     `json:"status"`
	ClosedAt      *time.Time `json:"closedAt,omitempty"`
	Scheduled     bool       `json:"scheduled"`
	Items         int        `json:"items"`
	Decided       int        `json:"decided"`
}

// reviewItemView is an item of a report or of GET /api/reviews.
type reviewItemView struct {
	ID       int64  `json:"id"`
	ReviewID int64  `json:"reviewId"`
	Subject  string `json:"subject"`
	// Source is "changeflow" (a grant changeflow wrote) or "repo" (an
	// entry it did not write, read from the repository's history; no
	// grant, and its revoke removes the entry itself).
	Source           string                `json:"source"`
	GrantOperationID string                `json:"grantOperationId,omitempty"`
	ApprovalID       string                `json:"approvalId,omitempty"`
	From             *time.Time            `json:"from,omitempty"`
	ExpiresAt        *time.Time            `json:"expiresAt,omitempty"`
	Decision         domain.ReviewDecision `json:"decision,omitempty"`
	DecidedBy        string                `json:"decidedBy,omitempty"`
	DecidedAt        *time.Time            `json:"decidedAt,omitempty"`
	Comment          string                `json:"comment,omitempty"`
	ByDefault        bool                  `json:"byDefault"`
	RevocationID     string                `json:"revocationId,omitempty"`
	RevokeNote       string                `json:"revokeNote,omitempty"`
	RemovalInEffect  bool                  `json:"removalInEffect"`
	// TargetKey and DueAt are set in GET /api/reviews only.
	TargetKey string     `json:"targetKey,omitempty"`
	DueAt     *time.Time `json:"dueAt,omitempty"`
}

// reviewReport is GET /ops/reviews/{id}.
type reviewReport struct {
	reviewCampaignView
	Entries []reviewItemView `json:"entries"`
}

func toReviewCampaign(c store.ReviewCampaign) reviewCampaignView {
	return reviewCampaignView{
		ID: c.ID, TargetKey: c.TargetKey, OpenedAt: c.OpenedAt.UTC(), DueAt: c.DueAt.UTC(), DefaultDecision: c.DefaultDecision,
		KeepByDefault: c.DefaultDecision == domain.ReviewKeep, OpenedBy: c.OpenedBy, Status: c.Status, ClosedAt: timePtr(c.ClosedAt),
		Scheduled: c.Scheduled, Items: c.Items, Decided: c.Decided,
	}
}

func toReviewItem(it store.ReviewItem) reviewItemView {
	source := "changeflow"
	if it.GrantOperationID == "" {
		source = "repo"
	}
	return reviewItemView{
		ID: it.ID, ReviewID: it.CampaignID, Subject: it.Subject, Source: source, GrantOperationID: it.GrantOperationID,
		ApprovalID: it.ApprovalID, From: timePtr(it.From), ExpiresAt: timePtr(it.ExpiresAt), Decision: it.Decision,
		DecidedBy: it.DecidedBy, DecidedAt: timePtr(it.DecidedAt), Comment: it.Comment, ByDefault: it.ByDefault,
		RevocationID: it.RevocationID, RevokeNote: it.RevokeNote, RemovalInEffect: it.RemovalInEffect,
	}
}

// reviewID parses a path id; anything but a positive integer is 404.
func reviewID(raw, what string) (int64, error) {
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id <= 0 {
		return 0, domain.Errorf(domain.CodeNotFound, "No such "+what+".", "%s id %q", what, raw)
	}
	return id, nil
}

func (s *Server) reviewStore() (ReviewStore, error) {
	if s.deps.Business.Reviews == nil {
		return nil, domain.Internal("reviews: no store wired", nil)
	}
	return s.deps.Business.Reviews, nil
}

// reviewStoreError maps the store's review errors to the error model.
func reviewStoreError(what string, err error) error {
	switch {
	case errors.Is(err, domain.ErrNotFound):
		return domain.Errorf(domain.CodeNotFound, "No such review item.", "%s: %w", what, err)
	case errors.Is(err, store.ErrReviewOpen):
		return domain.Refusef(domain.CodeReviewConflict, domain.ReasonReviewOpen,
			"This target already has an open review campaign; close it (its due date) before opening another.", "%s: %w", what, err)
	case errors.Is(err, store.ErrReviewDecided):
		return domain.Refusef(domain.CodeReviewConflict, domain.ReasonAlreadyDecided,
			"This item was decided already; a decision is taken once.", "%s: %w", what, err)
	case errors.Is(err, store.ErrReviewClosed):
		return domain.Refusef(domain.CodeReviewConflict, domain.ReasonReviewClosed,
			"This review campaign has reached its due date: its undecided items take the campaign's default, and no decision is taken any more.", "%s: %w", what, err)
	}
	return domain.Internal(what, err)
}

// handleOpsReviewOpen is POST /ops/reviews {targetKey, dueAt,
// defaultDecision}: an operator opens a campaign; audited like every ops
// write.
func (s *Server) handleOpsReviewOpen() http.Handler {
	return s.opsWrite(config.RouteOpsReviewOpen, nil, func(r *http.Request, operator identity.Identity, body map[string]any) (string, domain.Code, any, error) {
		rs, err := s.reviewStore()
		if err != nil {
			return "", "", nil, err
		}
		p, err := s.reviewOpenParams(body, operator)
		if err != nil {
			return "", "", nil, err
		}
		c, err := rs.ReviewOpen(r.Context(), p)
		if err != nil {
			return "review:" + p.TargetKey, "", nil, reviewStoreError("open review", err)
		}
		return fmt.Sprintf("review:%d", c.ID), domain.CodeOK, toReviewCampaign(c), nil
	})
}

// reviewOpenParams validates POST /ops/reviews' body, naming every bad
// field.
func (s *Server) reviewOpenParams(body map[string]any, operator identity.Identity) (store.ReviewOpenParams, error) {
	var f fieldErrors
	str := func(k string) string {
		v, ok := body[k].(string)
		if _, present := body[k]; present && !ok {
			f.add(k, "must be a string")
		}
		return strings.TrimSpace(v)
	}
	p := store.ReviewOpenParams{OpenedBy: operator.Account}
	p.TargetKey = str("targetKey")
	tgt, known := s.target(p.TargetKey)
	p.Reviewers = tgt.Owners
	switch {
	case f.has("targetKey"):
	case p.TargetKey == "":
		f.add("targetKey", "is required")
	case !known:
		f.add("targetKey", "is no configured target")
	}
	if due := str("dueAt"); !f.has("dueAt") {
		at, perr := time.Parse(time.RFC3339, due)
		switch {
		case due == "":
			f.add("dueAt", "is required (RFC 3339, in the future)")
		case perr != nil:
			f.add("dueAt", "must be an RFC 3339 time such as 2026-12-31T17:00:00Z")
		default:
			if problem := domain.ReviewOpenProblem(s.now(), at); problem != "" {
				f.add("dueAt", problem)
			}
			p.DueAt = at
		}
	}
	def := str("defaultDecision")
	if d, ok := domain.ParseReviewDecision(def); ok {
		p.Default = d
	} else if !f.has("defaultDecision") {
		f.add("defaultDecision", `must be "revoke" or "keep"`)
	}
	return p, f.err()
}

func (s *Server) target(key string) (config.Target, bool) {
	if key == "" || s.deps.Business.Config == nil {
		return config.Target{}, false
	}
	return s.deps.Business.Config.Current().Target(key)
}

// handleOpsReviews is GET /ops/reviews[?target=KEY]: the campaigns,
// newest first.
func (s *Server) handleOpsReviews() http.Handler {
	return s.opsCall(config.RouteOpsReviewGet, nil, func(r *http.Request) (string, any, error) {
		rs, err := s.reviewStore()
		if err != nil {
			return "", nil, err
		}
		list, err := rs.ReviewCampaigns(r.Context(), strings.TrimSpace(r.URL.Query().Get("target")), 200)
		if err != nil {
			return "", nil, domain.Internal("list reviews", err)
		}
		out := make([]reviewCampaignView, 0, len(list))
		for _, c := range list {
			out = append(out, toReviewCampaign(c))
		}
		return "reviews", map[string]any{"reviews": out}, nil
	})
}

// handleOpsReview is GET /ops/reviews/{id}[?format=csv]: the campaign's
// report.
func (s *Server) handleOpsReview() http.Handler {
	return s.opsCallWriting(config.RouteOpsReviewGet, []string{"id"}, func(r *http.Request) (string, any, error) {
		raw := r.PathValue("id")
		switch f := r.URL.Query().Get("format"); f {
		case "", "json", "csv":
		default:
			return raw, nil, invalidField("format", `must be "json" or "csv"`)
		}
		rs, err := s.reviewStore()
		if err != nil {
			return raw, nil, err
		}
		id, err := reviewID(raw, "review")
		if err != nil {
			return raw, nil, err
		}
		c, err := rs.ReviewCampaignGet(r.Context(), id)
		if errors.Is(err, domain.ErrNotFound) {
			return raw, nil, domain.Errorf(domain.CodeNotFound, "No such review.", "review %d: %w", id, err)
		} else if err != nil {
			return raw, nil, domain.Internal("review", err)
		}
		items, err := rs.ReviewItems(r.Context(), id)
		if err != nil {
			return raw, nil, domain.Internal("review items", err)
		}
		rep := reviewReport{reviewCampaignView: toReviewCampaign(c), Entries: make([]reviewItemView, 0, len(items))}
		for _, it := range items {
			rep.Entries = append(rep.Entries, toReviewItem(it))
		}
		return "review:" + raw, rep, nil
	}, func(w http.ResponseWriter, r *http.Request, data any) {
		if r.URL.Query().Get("format") == "csv" {
			writeReviewCSV(w, s.deps.Logger, data.(reviewReport))
			return
		}
		respond(w, s.deps.Logger, domain.CodeOK, data)
	})
}
