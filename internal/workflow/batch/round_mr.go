package batch

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"changeflow/internal/bindingfile"
	"changeflow/internal/domain"
	"changeflow/internal/gitlab"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flow"
	"changeflow/internal/workflow/single"
)

// startBatch builds the batch's MR and hands the batch to the engine:
//
//  1. the MR by the deterministic branch changeflow/batch-<id> (any
//     state): opened or merged → adopt; closed → settle the batch;
//  2. the branch's head (else the target branch's head: the pin), then
//     every member's binding file at that commit: the members' entries are
//     added per file — several members of one file are one edit — and
//     committed from exactly that commit (start_sha) as ONE commit with a
//     Changeflow-Operation trailer per member, unless the branch already
//     holds them all (commitBatch);
//  3. CreateMR (409, or no answer / 5xx: possibly ours from a lost answer
//     → look it up by the branch, and adopt it in this same round);
//  4. one transaction (store.BatchApply): the MR on the batch row (first:
//     only a batch still RUNNING or BLOCKED), the MR and batch_id on every
//     member, every member CREATE_ADMITTED → CREATE_STARTED →
//     CREATE_MR_CREATED (checked moves, batched statements), and the
//     driver's batch_poll_pipeline due now.
//
// Before 2, revocation members with nothing left to remove are settled
// at once and leave the batch (settleAbsentRemovals, round_absent.go).
// Steps 2–3 are openBatchMR, step 4 recordBatchMR; where a batch read
// again stands towards the round's MR is mrClaimOf's choice.
//
// A crash anywhere before 4 commits leaves a RUNNING batch without an MR
// recorded; the next round on any instance finds the slot occupied by it
// and runs startBatch again, which adopts what the dead one did.
func (d Flow) startBatch(ctx context.Context, b store.Batch) (mrIID int64, members int, err error) {
	ops, err := d.Store.BatchMemberOperations(ctx, b.ID)
	if err != nil {
		return 0, 0, err
	}
	if len(ops) == 0 {
		return 0, 0, fmt.Errorf("batch %d has no members", b.ID)
	}
	// Revocations a round of this batch already settled as nothing to
	// remove are no longer part of its change (round_absent.go).
	if ops = flow.RemainingMembers(ops); len(ops) == 0 {
		return 0, 0, nil // settled with the batch in one transaction
	}
	project := strconv.FormatInt(b.ProjectID, 10)

	branch, mr, found, err := d.batchBranch(ctx, b, project)
	if err != nil {
		return 0, len(ops), err
	}
	if found && mr.State == gitlab.MRStateClosed {
		_, err := d.SettleBatch(ctx, b.ID, "BATCH_MR_CLOSED", errBatchMRClosed.Error(), "round")
		return mr.IID, len(ops), err
	}
	if !found {
		opened, err := d.openBatchMR(ctx, b, project, branch, ops)
		if err != nil || opened.done {
			return opened.mr.IID, opened.members, err
		}
		mr, ops = opened.mr, opened.ops
	}
	iid, err := d.recordBatchMR(ctx, b, project, branch, mr, ops)
	return iid, len(ops), err
}

// openedMR is what openBatchMR did: the MR it opened (or found after a
// lost answer) for ops, the members still to build; done when the round
// ends there, with mr.IID and members as startBatch's answer.
type openedMR struct {
	mr      gitlab.MR
	ops     []store.Operation
	members int
	done    bool
}

// openBatchMR is startBatch's steps 2 and 3 on a branch without an MR:
// the absent removals settled, the batch's commit, then the MR opened.
func (d Flow) openBatchMR(ctx context.Context, b store.Batch, project, branch string, ops []store.Operation) (openedMR, error) {
	// Before the commit is built: revocations whose entry is gone from
	// the default branch are settled at once and leave the batch.
	ops, err := d.settleAbsentRemovals(ctx, b, project, ops)
	if errors.Is(err, errNoMembersLeft) {
		return openedMR{done: true}, nil
	}
	if err != nil {
		return openedMR{members: len(ops)}, err
	}
	title, body, err := d.commitBatch(ctx, b, project, branch, ops)
	if err != nil {
		return openedMR{members: len(ops)}, err
	}
	// The look-up above may be stale by now: another round may have
	// resumed this batch and recorded its MR (and even merged it — a
	// merged MR does not stop GitLab from opening a second one on the
	// same branch), or the batch may have ended without one. Opening
	// an MR then would leave it open for good.
	now, err := d.Store.BatchGet(ctx, b.ID)
	if err != nil {
		return openedMR{members: len(ops)}, err
	}
	if mrClaimOf(now, 0) == mrTaken {
		d.Log().Info("batch round: the batch moved on before its MR was opened; opening none",
			"batch", b.ID, "status", now.Status.String(), "mr", now.MRIID)
		return openedMR{mr: gitlab.MR{IID: now.MRIID}, members: len(ops), done: true}, nil
	}
	mr, err := d.GitLab.CreateMR(ctx, project, gitlab.CreateMRRequest{
		SourceBranch: branch, TargetBranch: d.MainBranch(), Title: title, Description: body,
	})
	if gitlab.IsConflict(err) || gitlab.IsTransient(err) {
		// A lost answer may hide a created MR: look it up by the
		// branch now rather than leave the batch to a later round.
		createErr := err
		var found bool
		mr, found, err = d.GitLab.FindMRBySourceBranch(ctx, project, branch, gitlab.StateOpened)
		if err == nil && !found {
			err = fmt.Errorf("MR of %s not found after: %w", branch, createErr)
		}
	}
	if err != nil {
		return openedMR{members: len(ops), done: true}, fmt.Errorf("open MR: %w", err)
	}
	return openedMR{mr: mr, ops: ops, members: len(ops)}, nil
}

// mrClaim is where a batch read again stands towards an MR a round is
// about to open or record.
type mrClaim int

const (
	// mrFree: the batch is active and records no MR; the round's MR is
	// the one to record.
	mrFree mrClaim = iota
	// mrSame: the batch records this same MR already (another round got
	// there first); the batch is on its way.
	mrSame
	// mrTaken: the batch records another MR, or it ended; an MR of this
	// round would be nobody's.
	mrTaken
)

// mrClaimOf places batch now, as read again, towards MR iid (0: none
// opened yet).
func mrClaimOf(now store.Batch, iid int64) mrClaim {
	switch {
	case iid != 0 && now.MRIID == iid:
		return mrSame
	case now.MRIID != 0 || !now.Status.Active():
		return mrTaken
	}
	return mrFree
}

// recordBatchMR is startBatch's step 4: one transaction links MR mr to
// the batch and its members ops and moves them on; it answers the MR the
// batch now has. Pre-empted, the batch read again decides: the same MR
// recorded by another round is fine; a batch that has another MR or ended
// leaves this one a stray, closed now.
func (d Flow) recordBatchMR(ctx context.Context, b store.Batch, project, branch string, mr gitlab.MR, ops []store.Operation) (int64, error) {
	states, err := d.Store.BatchMemberStates(ctx, b.ID)
	if err != nil {
		return mr.IID, err
	}
	ids := make([]string, len(ops))
	for i, op := range ops {
		ids[i] = op.OperationID
	}
	actor := "batch-" + strconv.FormatInt(b.ID, 10)
	moves, err := planMoves(states, msMRCreated, func(m store.BatchMemberState) bool {
		return m.Binding == domain.BindingMRCreating && domain.StepStatus(m.Step) == domain.StepCreateAdmitted
	}, actor, fmt.Sprintf("batch %d: MR !%d", b.ID, mr.IID))
	if err != nil {
		return mr.IID, err
	}
	link := &store.BatchMR{IID: mr.IID, URL: mr.WebURL, Branch: branch, SplitDepth: b.SplitDepth, ParentBatchID: b.ParentBatchID}
	_, err = d.Store.BatchApply(ctx, store.BatchApplyParams{
		BatchID: b.ID, SetMR: link, LinkMR: link, LinkOps: ids, Moves: moves,
		Schedule: &store.BatchSchedule{OperationID: ops[0].OperationID, Action: flow.ActionBatchPollPipeline},
	})
	if errors.Is(err, domain.ErrPreempted) {
		if now, gerr := d.Store.BatchGet(ctx, b.ID); gerr == nil {
			switch mrClaimOf(now, mr.IID) {
			case mrSame:
				// Another round (a resumer, or the claimer it was resuming
				// for) recorded this same MR first; the batch is on its way.
				return mr.IID, nil
			case mrTaken:
				// The batch has another MR, or ended (merged, settled,
				// nothing left to remove) while this round's creation was
				// in flight: this MR is nobody's and no step will ever
				// merge or close it (round_stray.go).
				return now.MRIID, d.closeStrayMR(ctx, now, project, mr.IID)
			}
		}
	}
	if err != nil {
		return mr.IID, fmt.Errorf("record MR !%d: %w", mr.IID, err)
	}
	return mr.IID, nil
}

// batchBranch picks the branch batch b is built on and its MR, if any:
// the first of its branches (BatchBranchName, then FreshBranchName 2, 3 …)
// that holds nothing changeflow did not write. A branch with an MR the
// committer bot did not open (foreign_mr), or with a commit by anyone else
// (foreign_branch), is a security event and is skipped — never adopted,
// never built on. The choice is made from the repository's state alone,
// the same on every run, so a crash or a lost answer finds the branch and
// MR a dead round made; a branch that turns foreign after changeflow used
// it is skipped too, and the MR left behind there is the stray sweep's. Past
// maxBranchAttempts branches the batch is blocked for a person.
func (d Flow) batchBranch(ctx context.Context, b store.Batch, project string) (string, gitlab.MR, bool, error) {
	first := flow.BatchBranchName(b.ID)
	var skipped []string
	for n := 1; n <= flow.MaxBranchAttempts; n++ {
		branch := flow.FreshBranchName(first, n)
		mr, found, err := d.GitLab.FindMRBySourceBranch(ctx, project, branch, gitlab.StateAll)
		if err != nil {
			return "", gitlab.MR{}, false, fmt.Errorf("look up MR of %s: %w", branch, err)
		}
		if found {
			bot, err := d.single().Committer(ctx)
			if err != nil {
				return "", gitlab.MR{}, false, fmt.Errorf("read the committer bot's account: %w", err)
			}
			if mr.AuthorUsername != bot.Username {
				if err := d.single().RecordSecurityEvent(ctx, single.ForeignMR(single.BatchResource(b.ID), mr)); err != nil {
					return "", gitlab.MR{}, false, err
				}
				skipped = append(skipped, branch)
				continue
			}
		}
		if found {
			return branch, mr, true, nil
		}
		br, err := d.GitLab.GetBranch(ctx, project, branch)
		if gitlab.IsNotFound(err) {
			return branch, gitlab.MR{}, false, nil
		}
		if err != nil {
			return "", gitlab.MR{}, false, fmt.Errorf("look up branch %s: %w", branch, err)
		}
		own, why, err := d.single().BranchIsOwn(ctx, project, branch)
		if err != nil {
			return "", gitlab.MR{}, false, fmt.Errorf("check branch %s: %w", branch, err)
		}
		if own {
			return branch, gitlab.MR{}, false, nil
		}
		if err := d.single().RecordSecurityEvent(ctx, single.SecurityEvent{Kind: single.SecurityForeignBranch, Resource: single.BatchResource(b.ID),
			Branch: branch, SHA: br.CommitID, Why: why}); err != nil {
			return "", gitlab.MR{}, false, err
		}
		skipped = append(skipped, branch)
	}
	why := single.OutOfBranches("the batch's branches " + strings.Join(skipped, ", ") + " hold content changeflow did not write")
	if err := d.blockBatch(ctx, b.ID, why); err != nil {
		return "", gitlab.MR{}, false, err
	}
	return "", gitlab.MR{}, false, fmt.Errorf("batch %d blocked: %w", b.ID, errBatchBlocked)
}

// staleWriteAttempts bounds how often commitBatch reads again after a
// refused commit (gitlab.IsStaleWrite) within one round. Each refusal means
// the repository moved under the round; past the bound the round ends with
// the error and the batch is resumed like any round that died half-way.
const staleWriteAttempts = 5

// commitBatch is startBatch's step 2: the batch's commit, pinned to the
// commit its files were read at. A refusal because what was read went away
// is answered by a fresh read and a new commit in the same round.
func (d Flow) commitBatch(ctx context.Context, b store.Batch, project, branch string, ops []store.Operation) (title, body string, err error) {
	title, message, body := flow.BatchText(b.ID, ops)
	for attempt := 1; ; attempt++ {
		at, err := d.PinBranch(ctx, project, branch, d.MainBranch())
		if err != nil {
			return "", "", fmt.Errorf("look up branch: %w", err)
		}
		actions, err := d.BatchFiles(ctx, project, at.SHA, ops)
		if errors.Is(err, bindingfile.ErrInvalid) || errors.Is(err, flow.ErrTargetGone) {
			// No retry fixes a file that does not parse (or a target that
			// is gone): block the batch for a person instead of failing
			// every round and re-admitting the members forever.
			ref := d.MainBranch()
			if at.BranchExists {
				ref = branch
			}
			if berr := d.blockBatch(ctx, b.ID, fmt.Sprintf("building the batch MR from %s@%s: %v", ref, flow.Short(at.SHA), err)); berr != nil {
				return "", "", errors.Join(err, berr)
			}
			return "", "", fmt.Errorf("batch %d blocked: %w", b.ID, errBatchBlocked)
		}
		if err != nil {
			return "", "", err
		}
		if len(actions) == 0 {
			return title, body, nil
		}
		_, err = d.GitLab.CreateCommit(ctx, project, at.Commit(branch, message, actions))
		if err == nil {
			return title, body, nil
		}
		if !gitlab.IsStaleWrite(err) || attempt >= staleWriteAttempts {
			return "", "", fmt.Errorf("commit: %w", err)
		}
		d.Log().Info("batch commit refused, reading again", "batch", b.ID, "attempt", attempt, "err", err)
	}
}
