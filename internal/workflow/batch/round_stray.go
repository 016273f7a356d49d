package batch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/gitlab"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flow"
	"changeflow/internal/workflow/single"
)

// A batch MR nobody owns (docs/flows/batch.md, "A round whose batch moved
// on"). A round opens its batch's MR only after looking it up by the
// batch's branch, but the look-up and the creation are two calls apart
// from the database: meanwhile another instance's round may resume the
// batch (its builder looked dead, or batch.resumeAfter passed on a loaded
// machine), record its own MR and merge it, or the batch may end without
// one (an operator's or the sweep's settlement that found no MR, every
// member settled as nothing to remove). GitLab refuses a second *open* MR
// for a branch, not one beside a merged or closed MR, so the late creation
// succeeds — and since only the MR recorded on the batch is ever driven or
// settled, that MR stayed open for good (the defect seen once in
// TestServeThreeInstancesRevokeEachExpiredGrantOnce: every removal merged
// and REVOKED, changeflow/batch-2 still open).
//
// The rule: the round that created (or adopted) an MR its batch does not
// record — because the batch records another MR, or ended — closes it
// before it returns. Merged wins: an MR that reads merged is left alone
// and logged. The round also reads the batch again just before it creates
// the MR and opens none when the batch moved on, which leaves only a
// creation already in flight to be closed this way. A round killed
// between such a late creation and its close leaves the MR open with no
// round left to close it; the stray sweep below closes it, on any
// instance, with no person.

// strayCloseTimeout bounds the close of a stray MR, which runs even when
// the round's context ended: it is the round's own write to undo.
const strayCloseTimeout = 30 * time.Second

// closeStrayMR closes MR iid of batch b's branch, which this round opened
// or adopted and b does not record (b records another MR, or ended).
func (d Flow) closeStrayMR(ctx context.Context, b store.Batch, project string, iid int64) error {
	_, err := d.closeStray(ctx, "batch round", b, project, iid)
	return err
}

// closeStray is closeStrayMR for who (the round, the stray sweep); it
// reports whether the MR read merged (and was left alone).
func (d Flow) closeStray(ctx context.Context, who string, b store.Batch, project string, iid int64) (merged bool, err error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), strayCloseTimeout)
	defer cancel()
	merged, _, err = d.closeAndReadMR(cctx, project, iid)
	if err != nil {
		return false, fmt.Errorf("close MR !%d of batch %d (%s, MR !%d recorded): %w", iid, b.ID, b.Status, b.MRIID, err)
	}
	if merged {
		// Nothing merges an MR no batch records but a person; its change
		// is on the default branch, and whatever the batch did with its
		// members (merged with the recorded MR, or re-admitted) stands:
		// re-applying a member's edit is idempotent.
		d.Log().Error(who+": an MR its batch does not record was merged",
			"batch", b.ID, "status", b.Status.String(), "mr", iid, "recorded", b.MRIID)
		return true, nil
	}
	d.Log().Warn(who+": closed an MR opened after its batch moved on",
		"batch", b.ID, "status", b.Status.String(), "mr", iid, "recorded", b.MRIID)
	return false, nil
}

// The stray sweep (docs/flows/batch.md, "A round whose batch moved on"): what
// converges an MR a killed round left open. It does not walk the batch
// history — that grows without bound, and an ended batch's branch would
// have to be read per batch — but the project's *open* MRs, which only
// a stray, the active batch's MR and people's own MRs make up: one list
// of open MRs into the target branch (GitLab's list API, oldest first, a
// page of 100 per call, at most the adapter's page bound), then one batch
// read per distinct batch named by an open MR's branch (usually none or
// one).
//
// Only MRs the committer bot opened are ever closed: an open MR on any
// changeflow/ branch that someone else opened is left alone and alerted
// (security event foreign_mr, the metric, a warn log; once per MR).
//
// An open MR on changeflow/batch-N is closed (close, re-read, merged
// wins) when batch N has ended, or is active and records another MR. It
// is left alone when batch N is active and records this MR, or records
// none yet: that is the window between a round's CreateMR and its
// BatchApply (or a round that died there), and the resuming round adopts
// the MR by its branch. The batch is read *after* the list, so an MR the
// list shows was created before the read; a batch can record an MR only
// while it records none (BatchApply's SetMR is guarded on mr_iid IS
// NULL) and an ended batch never becomes active again — so an MR closed
// here can never be the one its batch records or will record. An MR on
// a batch branch whose batch this database does not know (another
// installation's, a restored database) is left alone and logged.
//
// Every instance runs it (Rounds.Tick, every batch.strayInterval);
// overlapping runs are safe: a second close re-reads the MR closed.

// StraySweep is what one stray sweep of a project did.
type StraySweep struct {
	// Open is how many open MRs into the target branch were listed;
	// Truncated says the list stopped at the page bound.
	Open      int  `json:"open"`
	Truncated bool `json:"truncated,omitempty"`
	// OnBatchBranches is how many of them are on a batch branch.
	OnBatchBranches int `json:"onBatchBranches"`
	// Closed is how many this sweep closed (merged ones are left).
	Closed int `json:"closed"`
	// Foreign is how many open MRs on changeflow/ branches the committer
	// bot did not open: left alone, each a security event (foreign_mr).
	Foreign int `json:"foreign,omitempty"`
}

// batchOfBranch returns the batch id of a batch branch (BatchBranchName,
// or one of its fresh branches FreshBranchName), exactly:
// "changeflow/batch-7" or "changeflow/r2/batch-7", not
// "changeflow/batch-07" nor "…-7x".
func batchOfBranch(branch string) (int64, bool) {
	if rest, ok := strings.CutPrefix(branch, flow.FreshPrefix); ok {
		if _, name, ok := strings.Cut(rest, "/"); ok {
			id, ok := batchOfBranch("changeflow/" + name)
			if ok {
				if _, fresh := flow.BranchAttempt(branch, flow.BatchBranchName(id)); fresh {
					return id, true
				}
			}
		}
		return 0, false
	}
	rest, ok := strings.CutPrefix(branch, flow.BatchBranchPrefix)
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(rest, 10, 64)
	if err != nil || id <= 0 || strconv.FormatInt(id, 10) != rest {
		return 0, false
	}
	return id, true
}

// SweepStrayMRs closes project's open MRs on batch branches that no
// active batch records or may still record (see above).
func (d Flow) SweepStrayMRs(ctx context.Context, projectID int64) (StraySweep, error) {
	var res StraySweep
	project := strconv.FormatInt(projectID, 10)
	mrs, truncated, err := d.GitLab.ListOpenMRs(ctx, project, d.MainBranch())
	if err != nil {
		return res, fmt.Errorf("list open MRs: %w", err)
	}
	res.Open, res.Truncated = len(mrs), truncated
	if truncated {
		d.Log().Warn("stray sweep: the open MR list stopped at its page bound; newer MRs are looked at once older ones close",
			"project", projectID, "listed", len(mrs))
	}
	found, errs, err := d.botBatchMRs(ctx, mrs, &res)
	if err != nil {
		return res, err
	}
	res.OnBatchBranches = len(found)
	errs = append(errs, d.closeStrays(ctx, projectID, found, &res)...)
	return res, errors.Join(errs...)
}

// batchMR is an open MR on the branch of batch batch.
type batchMR struct {
	batch int64
	mr    gitlab.MR
}

// botBatchMRs picks from mrs those on batch branches that the committer
// bot opened. An MR on a changeflow/ branch that someone else opened is
// counted in res.Foreign and alerted (a security event; its failure is
// among errs); err: the bot's account could not be read.
func (d Flow) botBatchMRs(ctx context.Context, mrs []gitlab.MR, res *StraySweep) (found []batchMR, errs []error, err error) {
	var bot gitlab.User
	for _, mr := range mrs {
		if !strings.HasPrefix(mr.SourceBranch, "changeflow/") {
			continue
		}
		if bot.Username == "" {
			if bot, err = d.single().Committer(ctx); err != nil {
				return nil, nil, fmt.Errorf("read the committer bot's account: %w", err)
			}
		}
		if mr.AuthorUsername != bot.Username {
			// Only MRs the committer bot opened are closed: a person's MR
			// on changeflow's namespace is theirs to close, and an alert.
			res.Foreign++
			resource := fmt.Sprintf("mr-%d", mr.IID)
			if id, ok := batchOfBranch(mr.SourceBranch); ok {
				resource = single.BatchResource(id)
			}
			if err := d.single().RecordSecurityEvent(ctx, single.ForeignMR(resource, mr)); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if id, ok := batchOfBranch(mr.SourceBranch); ok {
			found = append(found, batchMR{id, mr})
		}
	}
	return found, errs, nil
}

// closeStrays reads the batch of each of found (once per batch, in batch
// order) and closes the MRs strayOf calls strays, counted in res.Closed.
func (d Flow) closeStrays(ctx context.Context, projectID int64, found []batchMR, res *StraySweep) []error {
	project := strconv.FormatInt(projectID, 10)
	slices.SortFunc(found, func(a, b batchMR) int { return int(a.batch - b.batch) })
	var errs []error
	batches := map[int64]store.Batch{}
	for _, f := range found {
		b, seen := batches[f.batch]
		if !seen {
			var err error
			b, err = d.Store.BatchGet(ctx, f.batch)
			if errors.Is(err, domain.ErrNotFound) {
				d.Log().Warn("stray sweep: an open MR on a batch branch no batch of this database knows; left alone",
					"project", projectID, "mr", f.mr.IID, "branch", f.mr.SourceBranch)
				continue
			}
			if err != nil {
				errs = append(errs, err)
				continue
			}
			batches[f.batch] = b
		}
		if !strayOf(b, projectID, f.mr.IID) {
			continue
		}
		merged, err := d.closeStray(ctx, "stray sweep", b, project, f.mr.IID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !merged {
			res.Closed++
		}
	}
	return errs
}

// strayOf reports whether open MR iid on batch b's branch is a stray of
// project projectID: b is that project's and has ended, or is active and
// records another MR. The batch's own MR, and one an active batch without
// an MR may still record, are not; nor is an MR on another project's batch.
func strayOf(b store.Batch, projectID, iid int64) bool {
	if b.ProjectID != projectID {
		return false
	}
	return !b.Status.Active() || (b.MRIID != 0 && b.MRIID != iid)
}
