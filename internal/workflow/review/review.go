// Package review runs access reviews (docs/reviews.md) on the store's
// campaigns: the scheduled opening (targets.<key>.review.every), the due
// date's default, and each revoke's removal through the ordinary removal
// path (lifecycle.Revoker, as an operator's revocation: reason OPERATOR,
// the reviewer as actor, the campaign named in the text), so it is
// batched, checked, merged and confirmed like any removal.
package review

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/periodic"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flow"
	"changeflow/internal/workflow/lifecycle"
)

// Store is what reviews read and write; *store.Store is one.
type Store interface {
	ReviewOpen(ctx context.Context, p store.ReviewOpenParams) (store.ReviewCampaign, error)
	ReviewLast(ctx context.Context, target string) (int64, time.Time, bool, error)
	ReviewDue(ctx context.Context, limit int) ([]int64, error)
	ReviewClose(ctx context.Context, id int64) (int, error)
	ReviewPendingRemovals(ctx context.Context, limit int) ([]store.ReviewPendingRemoval, error)
	ReviewRecordRemoval(ctx context.Context, itemID int64, revocationID, note string) error
	RepoRemovalCreate(ctx context.Context, p store.RepoRemovalParams) (store.RepoRemovalResult, error)
}

// Revoker creates a removal; httpapi.WorkflowRevoker (which wakes the
// engine) and lifecycle.Revoker are ones.
type Revoker interface {
	Revoke(ctx context.Context, grantOperationID string, reason domain.RevokeReason, text, actor string) (lifecycle.RevokeResult, error)
}

// ScheduleActor opens the scheduled campaigns.
const ScheduleActor = "review-schedule"

// chunk bounds each part of a pass; the next pass takes the rest.
const chunk = 200

// maxRevokeText is the removal reason's bound (an operator's revocation
// reason's).
const maxRevokeText = 500

// Reviews is the review pass over Store, run every expiry.interval on
// every instance; each of its writes happens once however many run it
// (the store's keys and guarded writes).
type Reviews struct {
	Store   Store
	Revoker Revoker
	Config  func() *config.Snapshot
	Logger  *slog.Logger
	// Now is the application clock the schedule and new due dates use;
	// nil means time.Now. The due date itself is compared with the
	// database clock (store.ReviewClose).
	Now func() time.Time
	// Wake, when set, is called after a repository entry's removal was
	// created on a target without batching (its create_mr is due now),
	// so the engine starts it at once; a grant's revocation wakes it
	// through Revoker.
	Wake func()

	svc periodic.Service
}

// PassResult counts one pass.
type PassResult struct {
	Opened, Closed, Defaulted, Removals int
}

func (r *Reviews) now() time.Time {
	if r.Now == nil {
		return time.Now()
	}
	return r.Now()
}

func (r *Reviews) log() *slog.Logger {
	if r.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return r.Logger
}

// PassOnce opens the scheduled campaigns that are due, closes the
// campaigns past their due date (undecided items take the default), and
// starts the removals of items decided revoke. Each part runs even when
// one before failed; the errors are joined.
func (r *Reviews) PassOnce(ctx context.Context) (PassResult, error) {
	var res PassResult
	err1 := r.schedule(ctx, &res)
	err2 := r.closeDue(ctx, &res)
	err3 := r.startRemovals(ctx, &res)
	return res, errors.Join(err1, err2, err3)
}

// schedule opens, for every target with review.every, the campaign after
// its last one when domain.ReviewScheduleDue says so; the campaign after
// campaign N exists once (store.ReviewOpenParams.ScheduledAfter), so an
// instance that lost the race gets store.ErrReviewOpen, which is fine.
func (r *Reviews) schedule(ctx context.Context, res *PassResult) error {
	cfg := r.Config()
	var errs []error
	for _, t := range cfg.Targets() {
		key := t.Key
		if t.ReviewEvery <= 0 {
			continue
		}
		last, openedAt, open, err := r.Store.ReviewLast(ctx, key)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		now := r.now()
		if !domain.ReviewScheduleDue(t.ReviewEvery, openedAt, open, now) {
			continue
		}
		c, err := r.Store.ReviewOpen(ctx, store.ReviewOpenParams{
			TargetKey: key, DueAt: now.Add(t.ReviewDueIn), Default: domain.ReviewRevoke, OpenedBy: ScheduleActor, ScheduledAfter: &last,
			Reviewers: t.Owners,
		})
		switch {
		case err == nil:
			res.Opened++
			r.log().Info("review: scheduled campaign opened", "review", c.ID, "target", key, "items", c.Items, "due", c.DueAt)
		case !errors.Is(err, store.ErrReviewOpen):
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// closeDue closes every campaign past its due date, once (a campaign
// another instance closed first is domain.ErrPreempted).
func (r *Reviews) closeDue(ctx context.Context, res *PassResult) error {
	ids, err := r.Store.ReviewDue(ctx, chunk)
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		n, err := r.Store.ReviewClose(ctx, id)
		switch {
		case err == nil:
			res.Closed++
			res.Defaulted += n
			r.log().Info("review: campaign closed at its due date", "review", id, "defaulted", n)
		case !errors.Is(err, domain.ErrPreempted):
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// startRemovals starts the removal of every item decided revoke that has
// none recorded yet: the ones the default decided, and any whose removal
// a crash or a failure left unstarted after the decision.
func (r *Reviews) startRemovals(ctx context.Context, res *PassResult) error {
	items, err := r.Store.ReviewPendingRemovals(ctx, chunk)
	if err != nil {
		return err
	}
	var errs []error
	for _, it := range items {
		started, err := r.StartRemoval(ctx, it)
		if err != nil {
			errs = append(errs, err)
		}
		if started {
			res.Removals++
		}
	}
	return errors.Join(errs...)
}

// StartRemoval starts the removal of item it (decided revoke) through the
// operator revocation path, with the decider as actor (the campaign's
// actor, review:<id>, when the default decided) and the campaign named in
// the reason, then records the removal on the item once. An access that
// has ended already (expired, given back, revoked otherwise) gets a note
// instead. A renewal under way, or a failure, leaves the item for the
// next pass. started: a removal is recorded on the item now.
func (r *Reviews) StartRemoval(ctx context.Context, it store.ReviewPendingRemoval) (started bool, err error) {
	text := domain.ClipRunes(domain.ReviewRevokeText(it.CampaignID, it.TargetKey, it.DecidedBy, it.ByDefault, it.Comment), maxRevokeText)
	if it.GrantOperationID == "" {
		return r.startRepoRemoval(ctx, it, text)
	}
	rv, err := r.Revoker.Revoke(ctx, it.GrantOperationID, domain.RevokeOperator, text, it.DecidedBy)
	var under *lifecycle.RenewalUnderWayError
	switch {
	case err == nil:
		err = r.Store.ReviewRecordRemoval(ctx, it.ID, rv.OperationID, "")
	case errors.Is(err, lifecycle.ErrNotInEffect), errors.Is(err, domain.ErrNotFound):
		r.log().Info("review: revoked access had ended already", "review", it.CampaignID, "item", it.ID, "grant", it.GrantOperationID, "err", err)
		return false, r.record(ctx, it.ID, "", "the access was no longer in effect when the review revoked it")
	case errors.As(err, &under):
		r.log().Info("review: removal waits for a renewal", "review", it.CampaignID, "item", it.ID, "renewal", under.Renewal)
		return false, nil
	default:
		return false, fmt.Errorf("review %d item %d: revoke %s: %w", it.CampaignID, it.ID, it.GrantOperationID, err)
	}
	if errors.Is(err, domain.ErrPreempted) {
		return false, nil // another instance recorded it first
	}
	return err == nil, err
}

// startRepoRemoval starts the removal of an entry changeflow did not
// write (an item without a grant): store.RepoRemovalCreate creates it —
// or records why none is — and records it on the item in one
// transaction, once however many instances try. A request of the
// subject under way on the target leaves the item for a later pass.
func (r *Reviews) startRepoRemoval(ctx context.Context, it store.ReviewPendingRemoval, text string) (bool, error) {
	cfg := r.Config()
	t, ok := cfg.Target(it.TargetKey)
	res, err := r.Store.RepoRemovalCreate(ctx, store.RepoRemovalParams{
		ItemID: it.ID, ProjectID: projectID(cfg), Batching: ok && t.Batching, SingleAction: flow.ActionCreateMR,
		Text: text, Actor: it.DecidedBy,
	})
	switch {
	case errors.Is(err, domain.ErrPreempted):
		return false, nil // another instance started it, or recorded it, first
	case err != nil:
		return false, fmt.Errorf("review %d item %d: %w", it.CampaignID, it.ID, err)
	case res.Waiting:
		r.log().Info("review: removal of a repository entry waits for a request of its subject", "review", it.CampaignID, "item", it.ID, "subject", it.Subject)
		return false, nil
	case res.Note != "":
		r.log().Info("review: repository entry not removed", "review", it.CampaignID, "item", it.ID, "note", res.Note)
		return false, nil
	}
	r.log().Info("review: removal of a repository entry started", "review", it.CampaignID, "item", it.ID, "removal", res.OperationID)
	if !res.Batching && r.Wake != nil {
		r.Wake()
	}
	return true, nil
}

// projectID is the config repo's project: the first of gitlab.projects
// (0 when none parses), as a request's submission takes it.
func projectID(cfg *config.Snapshot) int64 {
	ps, _ := cfg.List(config.KeyGitLabProjects)
	for _, p := range ps {
		var id int64
		if _, err := fmt.Sscan(p, &id); err == nil && id > 0 {
			return id
		}
	}
	return 0
}

// record records a note once; a note another instance recorded first is
// no error.
func (r *Reviews) record(ctx context.Context, item int64, revocation, note string) error {
	if err := r.Store.ReviewRecordRemoval(ctx, item, revocation, note); err != nil && !errors.Is(err, domain.ErrPreempted) {
		return err
	}
	return nil
}

// Start runs PassOnce every expiry.interval until Stop or ctx ends.
func (r *Reviews) Start(ctx context.Context) error {
	r.svc.Start(ctx, periodic.Every{
		Interval: func() time.Duration { return r.Config().Expiry().Interval },
		Fallback: time.Minute, Pass: r.pass,
	}.Loop)
	return nil
}

// Stop stops the loop and waits for a pass in progress.
func (r *Reviews) Stop() { r.svc.Stop() }

func (r *Reviews) pass(ctx context.Context) {
	res, err := r.PassOnce(ctx)
	periodic.LogPass(ctx, r.log(), err, "review pass", res.Opened+res.Closed+res.Removals > 0, "reviews advanced",
		"opened", res.Opened, "closed", res.Closed, "defaulted", res.Defaulted, "removals", res.Removals)
}
