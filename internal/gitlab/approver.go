package gitlab

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
)

// Approver gives one bot's approval of an MR at sha. Every
// implementation reports failures as a *Error with the real HTTP status,
// so the approval loop and its 401 handling are the same whichever runs.
type Approver interface {
	Approve(ctx context.Context, bot Bot, project string, mrIID int64, sha string) error
}

// LibraryApprover approves through the client library (no check items).
type LibraryApprover struct {
	GitLab GitLab
}

// Approve implements Approver.
func (a LibraryApprover) Approve(ctx context.Context, bot Bot, project string, mrIID int64, sha string) error {
	return a.GitLab.Approve(ctx, bot, project, mrIID, sha)
}

// CheckItemsApprover approves over plain HTTP with the project's required
// check items. The list is read from GitLab (never hard-coded) the first
// time a project is approved and cached per project; when GitLab changes
// it, the approve answers 422 with the current list in the body, and the
// approver rebuilds the request from that list, refreshes the cache and
// retries exactly once — no extra read round trip. A second 422 is
// returned as it is.
type CheckItemsApprover struct {
	api    CheckItemsAPI
	logger *slog.Logger

	mu    sync.Mutex
	cache map[string][]CheckItem
}

// NewCheckItemsApprover returns an approver over api with an empty cache.
func NewCheckItemsApprover(api CheckItemsAPI, logger *slog.Logger) *CheckItemsApprover {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &CheckItemsApprover{api: api, logger: logger, cache: map[string][]CheckItem{}}
}

// Approve implements Approver.
func (a *CheckItemsApprover) Approve(ctx context.Context, bot Bot, project string, mrIID int64, sha string) error {
	items, err := a.items(ctx, bot, project)
	if err != nil {
		return err
	}
	err = a.api.ApproveWithCheckItems(ctx, bot, project, mrIID, sha, items)
	var e *Error
	if !errors.As(err, &e) || e.Status != http.StatusUnprocessableEntity || e.CurrentCheckItems == nil {
		return err
	}
	a.logger.Info("check items changed upstream; retrying approve once with the current list",
		"project", project, "mr", mrIID, "bot", bot, "was", items, "now", e.CurrentCheckItems)
	a.store(project, e.CurrentCheckItems)
	return a.api.ApproveWithCheckItems(ctx, bot, project, mrIID, sha, e.CurrentCheckItems)
}

// CachedCheckItems returns the cached list for project (ok false: none yet).
func (a *CheckItemsApprover) CachedCheckItems(project string) ([]CheckItem, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	items, ok := a.cache[project]
	return append([]CheckItem(nil), items...), ok
}

func (a *CheckItemsApprover) items(ctx context.Context, bot Bot, project string) ([]CheckItem, error) {
	if items, ok := a.CachedCheckItems(project); ok {
		return items, nil
	}
	items, err := a.api.CheckItems(ctx, bot, project)
	if err != nil {
		return nil, err
	}
	a.store(project, items)
	return items, nil
}

func (a *CheckItemsApprover) store(project string, items []CheckItem) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cache[project] = append([]CheckItem{}, items...)
}

// SelectingApprover picks the implementation on every call from
// CheckItemsEnabled (approval.checkItems.enabled), so the switch needs no
// restart. The choice is made per Approve call, not per MR: an MR whose
// first bot approved through one implementation may get its second
// approval through the other, which GitLab does not care about.
type SelectingApprover struct {
	CheckItemsEnabled func() bool
	Library           Approver
	CheckItems        Approver
}

// Approve implements Approver.
func (s SelectingApprover) Approve(ctx context.Context, bot Bot, project string, mrIID int64, sha string) error {
	if s.CheckItemsEnabled != nil && s.CheckItemsEnabled() {
		return s.CheckItems.Approve(ctx, bot, project, mrIID, sha)
	}
	return s.Library.Approve(ctx, bot, project, mrIID, sha)
}
