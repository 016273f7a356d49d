package single

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/gitlab"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flow"
)

// maxRebases bounds merge → rebase → merge rounds of one request: a merge
// that keeps failing after fresh rebases (a pre-receive hook, a protected
// branch) is a merge failure, not a reason to loop.
const maxRebases = 3

// handle is the state of a handling step as it goes: the step the row
// shows now (the claim's, then whatever this run wrote as progress).
type handle struct {
	d       Steps
	w       engine.Work
	project string
	step    domain.StepStatus
}

func (d Steps) handle(w engine.Work) (*handle, error) {
	project, err := d.Project(w.Operation)
	if err != nil {
		return nil, err
	}
	if w.Operation.MRIID == 0 {
		return nil, fmt.Errorf("operation %s has no MR", w.Operation.OperationID)
	}
	return &handle{d: d, w: w, project: project, step: domain.StepStatus(w.Operation.Step)}, nil
}

// progress writes t now and remembers the step.
func (h *handle) progress(ctx context.Context, t engine.Transition) error {
	if err := h.w.Progress(ctx, t); err != nil {
		return err
	}
	if t.Step != 0 {
		h.step = t.Step
	}
	return nil
}

// read reads the MR (rebase_in_progress included).
func (h *handle) read(ctx context.Context) (gitlab.MR, error) {
	return h.d.GitLab.GetMR(ctx, h.project, h.w.Operation.MRIID)
}

// merged finishes as merged (an MR found merged is not approved
// or merged again — a second approve would be refused and recorded as a
// false "approval failed"). The table has HANDLE_MERGED after approval or
// a rebase; from a running pipeline the row passes HANDLE_APPROVED first.
func (h *handle) merged(ctx context.Context, mr gitlab.MR) (engine.Outcome, error) {
	if h.step == domain.StepHandlePipelineRunning {
		if err := h.progress(ctx, engine.Transition{Step: domain.StepHandleApproved, Note: "MR found merged"}); err != nil {
			return engine.Outcome{}, err
		}
	}
	return engine.Done("", engine.Transition{Step: domain.StepHandleMerged, Binding: domain.BindingMerged,
		Fields: store.WorkFields{MergeSHA: mr.MergeCommitSHA},
		Note:   fmt.Sprintf("MR !%d merged (%s)", mr.IID, mr.MergeCommitSHA)}).
		OnFlip(h.d.applier().ValidateIfDeployed(h.d.ProjectID(h.w.Operation), h.w.Operation.MRIID)), nil
}

// beginHandling is how the handling steps begin (approve, merge,
// poll_rebase, regenerate): the handle; entry written as progress unless
// the row is already at entry's step or at one of alsoAt (the step runs
// again — a retry, a lease taken over — or resumes its own later stage; a
// zero entry writes nothing); then the MR read before anything is written
// to it. A non-nil end ends the step: the MR found merged
// (finish as merged, handle.merged) or closed outside (closedOutside),
// the read failed (retry, retryOr), or a write failed.
func (d Steps) beginHandling(ctx context.Context, w engine.Work, entry engine.Transition, alsoAt ...domain.StepStatus) (*handle, gitlab.MR, *flow.StepEnd) {
	h, err := d.handle(w)
	if err != nil {
		return nil, gitlab.MR{}, &flow.StepEnd{Err: err}
	}
	if entry.Step != 0 && h.step != entry.Step && !slices.Contains(alsoAt, h.step) {
		if err := h.progress(ctx, entry); err != nil {
			return nil, gitlab.MR{}, &flow.StepEnd{Err: err}
		}
	}
	mr, err := h.read(ctx)
	if err != nil {
		out, err := d.RetryOr(err, "read MR")
		return nil, gitlab.MR{}, &flow.StepEnd{Out: out, Err: err}
	}
	switch mr.State {
	case gitlab.MRStateMerged:
		out, err := h.merged(ctx, mr)
		return nil, gitlab.MR{}, &flow.StepEnd{Out: out, Err: err}
	case gitlab.MRStateClosed:
		return nil, gitlab.MR{}, &flow.StepEnd{Out: closedOutside(mr)}
	}
	return h, mr, nil
}

// closedOutside fails a request whose MR was closed by someone else.
func closedOutside(mr gitlab.MR) engine.Outcome {
	return engine.Fail(domain.StepHandleMergeFailed, domain.BindingHandleFailed,
		fmt.Sprintf("MR !%d was closed outside changeflow", mr.IID))
}

// Approve is approve: the two bot approvals, each through
// gitlab.ApproveAsBot on its own (never retried as a pair), after
// reading the MR — merged → finish as merged, closed → fail.
// Approve-first arrives from CREATE_SUCCEEDED/MR_CREATED and first moves
// to HANDLE_STARTED/MERGING; legacy arrives there from the callback.
func (d Steps) Approve(ctx context.Context, w engine.Work) (engine.Outcome, error) {
	h, mr, end := d.beginHandling(ctx, w, engine.Transition{Step: domain.StepHandleStarted, Binding: domain.BindingMerging, Note: "approving"})
	if end != nil {
		return end.Out, end.Err
	}
	// Only a head changeflow verified is approved, at that sha: a push
	// after the check is a 409 below, and the next run checks again.
	if end := h.verifyHead(ctx, mr); end != nil {
		return end.Out, end.Err
	}
	settings := gitlab.LoopSettingsFromConfig(d.Config())
	for _, bot := range []gitlab.Bot{gitlab.Approver1, gitlab.Approver2} {
		err := gitlab.ApproveAsBot(ctx, d.GitLab, d.Approver, settings, bot, h.project, mr.IID, mr.SHA, d.Log())
		switch {
		case err == nil:
			continue
		case gitlab.IsForbidden(err):
			return engine.Fail(domain.StepHandleApproveForbidden, domain.BindingHandleFailed,
				fmt.Sprintf("%s may not approve MR !%d: %v", bot, mr.IID, err)), nil
		case gitlab.IsConflict(err):
			// The head moved since the read: read again and approve that.
			return engine.RetryAfter(0, string(bot)+": "+err.Error()), nil
		case flow.Transient(err):
			return d.RetryLater(err, string(bot)+": "+err.Error()), nil
		}
		return engine.Fail(domain.StepHandleApproveFailed, domain.BindingHandleFailed,
			fmt.Sprintf("%s could not approve MR !%d: %v", bot, mr.IID, err)), nil
	}
	return engine.Done(flow.ActionMerge, engine.Transition{Step: domain.StepHandleApproved, Note: fmt.Sprintf("MR !%d approved by both bots", mr.IID)}), nil
}

// settling are the detailed merge statuses GitLab is still computing.
var settling = map[string]bool{"unchecked": true, "checking": true, "preparing": true, "approvals_syncing": true, "ci_still_running": true}

// Merge is merge: read the MR (merged → MERGED; closed → fail; a rebase
// running → poll it; mergeability still being computed → look again),
// merge at the head sha, and when GitLab refuses (405/406/422) ask for a
// rebase and poll it (poll_rebase), at most maxRebases times.
func (d Steps) Merge(ctx context.Context, w engine.Work) (engine.Outcome, error) {
	h, mr, end := d.beginHandling(ctx, w, engine.Transition{})
	if end != nil {
		return end.Out, end.Err
	}
	switch {
	case mr.RebaseInProgress:
		return engine.Done(flow.ActionPollRebase, engine.Transition{Step: domain.StepHandleRebasing, Note: "rebase in progress"}), nil
	case settling[mr.DetailedMergeStatus]:
		return engine.PollAgain(engine.PollTier(d.Config().Polling(config.PollingRebase)), w, engine.Transition{},
			engine.Failure{Step: domain.StepHandleMergeUnknown},
			fmt.Sprintf("MR !%d stayed %q", mr.IID, mr.DetailedMergeStatus)), nil
	case mr.DetailedMergeStatus == "ci_must_pass" && mr.HeadPipeline == nil:
		return d.awaitMissedPipeline(ctx, w, h, mr)
	}
	// Checked again before the merge: a rebase or a push may have moved
	// the head since the approval. The merge is pinned to the head checked.
	if end := h.verifyHead(ctx, mr); end != nil {
		return end.Out, end.Err
	}
	got, err := d.GitLab.Merge(ctx, h.project, mr.IID, mr.SHA)
	switch chooseMergeAnswer(got, err) {
	case mergeMerged:
		return h.merged(ctx, got)
	case mergeOtherState:
		return engine.RetryAfter(0, "merge answered state "+got.State), nil
	case mergeHeadMoved:
		return engine.RetryAfter(0, "head moved: "+err.Error()), nil
	case mergeTransient:
		return d.RetryLater(err, "merge: "+err.Error()), nil
	case mergeFailed:
		return engine.Fail(domain.StepHandleMergeFailed, domain.BindingHandleFailed, "merge: "+err.Error()), nil
	}
	return h.rebaseAfterRefusal(ctx, w, mr, err)
}

// awaitMissedPipeline is merge while GitLab wants a passed pipeline for
// an MR head it created none for (a rebase or push over its pipeline
// rate): merging would be refused and the rebase that follows changes
// nothing, so the request used to stop HANDLE_MERGE_FAILED after
// maxRebases. Instead it waits like any settling status and, after
// gitlab.rateLimit.missedPipelineAfter, creates the pipeline
// (missedPipeline); once that passes the merge goes on.
func (d Steps) awaitMissedPipeline(ctx context.Context, w engine.Work, h *handle, mr gitlab.MR) (engine.Outcome, error) {
	tier := engine.PollTier(d.Config().Polling(config.PollingRebase))
	if out, ok := d.missedPipeline(ctx, w, tier, h.project, mr, h.step); ok {
		return out, nil
	}
	return engine.PollAgain(tier, w, engine.Transition{}, engine.Failure{Step: domain.StepHandleMergeUnknown},
		fmt.Sprintf("MR !%d has no pipeline for its head %s", mr.IID, flow.Short(mr.SHA))), nil
}

// rebaseAfterRefusal is merge once GitLab refused the merge of mr as not
// mergeable (mergeErr): read the MR again (merged or closed meanwhile
// ends the step), then ask for a rebase and poll it — at most maxRebases
// times unless the target moved since the last one.
func (h *handle) rebaseAfterRefusal(ctx context.Context, w engine.Work, mr gitlab.MR, mergeErr error) (engine.Outcome, error) {
	d := h.d
	// Read before the next write: a refusal may mean a merge (ours, whose
	// answer was lost, or someone else's) already happened.
	if again, err := h.read(ctx); err == nil {
		switch again.State {
		case gitlab.MRStateMerged:
			return h.merged(ctx, again)
		case gitlab.MRStateClosed:
			return closedOutside(again), nil
		}
	}
	n, err := d.rebases(ctx, w.Operation.OperationID)
	if err != nil {
		return engine.Outcome{}, err
	}
	if n >= maxRebases {
		// A refusal because the target moved again since the last rebase
		// is another MR's merge landing first — progress, not a loop — and
		// is rebased again rather than failed: under contention (many MRs
		// of one project) an MR may lose that race more than maxRebases
		// times. Only a refusal on an MR already based on the target's head
		// counts against the bound.
		moved, err := d.targetMovedSince(ctx, h.project, mr)
		if err != nil {
			return d.RetryOr(err, "read the target's head")
		}
		if !moved {
			return engine.Fail(domain.StepHandleMergeFailed, domain.BindingHandleFailed,
				fmt.Sprintf("merge still refused after %d rebases: %v", n, mergeErr)), nil
		}
	}
	if err := d.GitLab.Rebase(ctx, h.project, mr.IID); err != nil && !gitlab.IsConflict(err) {
		if flow.Transient(err) {
			return d.RetryLater(err, "rebase: "+err.Error()), nil
		}
		return engine.Fail(domain.StepHandleMergeFailed, domain.BindingHandleFailed, "rebase: "+err.Error()), nil
	}
	return engine.Done(flow.ActionPollRebase, engine.Transition{Step: domain.StepHandleRebasing,
		Note: "merge refused (" + strconv.Itoa(gitlab.StatusOf(mergeErr)) + "), rebasing"}), nil
}

// targetMovedSince reports whether mr's target branch has moved past the
// base of mr's head: the head's first parent is not the target's head.
func (d Steps) targetMovedSince(ctx context.Context, project string, mr gitlab.MR) (bool, error) {
	head, err := d.GitLab.GetCommit(ctx, project, mr.SHA)
	if err != nil {
		return false, err
	}
	target, err := d.GitLab.GetBranch(ctx, project, mr.TargetBranch)
	if err != nil {
		return false, err
	}
	return len(head.ParentIDs) == 0 || head.ParentIDs[0] != target.CommitID, nil
}

// rebases counts how often the request entered HANDLE_REBASING by a
// merge refusal since it was last retriggered or regenerated (an
// operator's retrigger grants a fresh round; so does a regeneration,
// which is a new change — regenerations have their own bound).
func (d Steps) rebases(ctx context.Context, operationID string) (int, error) {
	return d.countSince(ctx, operationID,
		func(s store.OperationStep) bool {
			return strings.HasPrefix(s.Note, retriggerNote) || strings.HasPrefix(s.Note, regeneratedNote) || strings.HasPrefix(s.Note, rebuiltNote)
		},
		func(s store.OperationStep) bool {
			return domain.StepStatus(s.ToStep) == domain.StepHandleRebasing && s.FromStep != s.ToStep
		})
}

// countSince counts the rows of the request's step history that counts
// admits since the last row that resets admits (a row that resets is not
// counted): the bounds on rebases and on regenerations are both "how
// many since the last fresh round", and differ only in what they count
// and what grants the fresh round.
func (d Steps) countSince(ctx context.Context, operationID string, resets, counts func(store.OperationStep) bool) (int, error) {
	hist, err := d.Store.OperationStepList(ctx, operationID)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, s := range hist {
		switch {
		case resets(s):
			n = 0
		case counts(s):
			n++
		}
	}
	return n, nil
}

// PollRebase is poll_rebase: the rebase GitLab runs asynchronously, then
// the pipeline of the new head, in tiers. A failed rebase is
// HANDLE_REBASE_CONFLICT (deterministic: CONTACT_MAINTAINERS); a failed
// pipeline HANDLE_PIPELINE_FAILED; a poll that runs out of time is
// HANDLE_REBASE_PENDING or HANDLE_PIPELINE_PENDING (KEEP_WAITING); a
// green head goes back to merge.
func (d Steps) PollRebase(ctx context.Context, w engine.Work) (engine.Outcome, error) {
	h, mr, end := d.beginHandling(ctx, w, engine.Transition{})
	if end != nil {
		return end.Out, end.Err
	}
	switch {
	case mr.RebaseInProgress:
		return engine.PollAgain(engine.PollTier(d.Config().Polling(config.PollingRebase)), w, engine.Transition{Step: domain.StepHandleRebasing},
			engine.Failure{Step: domain.StepHandleRebasePending}, fmt.Sprintf("rebase of MR !%d did not finish in time", mr.IID)), nil
	case mr.MergeError != "":
		if h.step != domain.StepHandleRebasing {
			if err := h.progress(ctx, engine.Transition{Step: domain.StepHandleRebasing}); err != nil {
				return engine.Outcome{}, err
			}
		}
		// A single-request MR's change is derivable from the database:
		// regenerate it on the target's current head instead of paging a
		// person for a file changeflow writes itself — within a bound. A
		// batch MR (another branch) keeps its path: its members are
		// re-admitted when the batch settles.
		if mr.SourceBranch == flow.SingleBranch(w.Operation) {
			n, err := d.regenerations(ctx, w.Operation.OperationID)
			if err != nil {
				return engine.Outcome{}, err
			}
			if bound := d.Config().Workflow().MaxRegenerations; n < bound {
				return engine.Done(flow.ActionRegenerate, engine.Transition{
					Note: fmt.Sprintf("rebase of MR !%d failed (%s): regenerating on %s", mr.IID, mr.MergeError, mr.TargetBranch)}), nil
			}
			// Past the bound, a conflict made only by changeflow's own merges
			// of the same file still regenerates: it is progress (another
			// request merged), not a loop, and nobody is paged for it.
			if target, ok := d.Config().Target(w.Operation.TargetKey); ok {
				own, err := d.conflictIsOwn(ctx, h.project, mr, target.File, w.Operation.OperationID)
				if err != nil {
					return d.RetryOr(err, "read the conflict's cause")
				}
				if own {
					return engine.Done(flow.ActionRegenerate, engine.Transition{
						Note: fmt.Sprintf("rebase of MR !%d failed (%s) after changeflow's own merges: regenerating on %s", mr.IID, mr.MergeError, mr.TargetBranch)}), nil
				}
			}
			return engine.Fail(domain.StepHandleRebaseConflict, domain.BindingHandleFailed,
				fmt.Sprintf("rebase of MR !%d failed: %s; regenerated %d times already (workflow.maxRegenerations)", mr.IID, mr.MergeError, n)), nil
		}
		return engine.Fail(domain.StepHandleRebaseConflict, domain.BindingHandleFailed,
			fmt.Sprintf("rebase of MR !%d failed: %s", mr.IID, mr.MergeError)), nil
	}
	status := ""
	if mr.HeadPipeline != nil {
		status = mr.HeadPipeline.Status
	}
	switch status {
	case pipelineSuccess, pipelineSkipped, "":
		return engine.Done(flow.ActionMerge, engine.Transition{Step: domain.StepHandleApproved, Note: fmt.Sprintf("MR !%d rebased", mr.IID)}), nil
	case pipelineFailed, pipelineCanceled:
		if h.step != domain.StepHandlePipelineRunning {
			if err := h.progress(ctx, engine.Transition{Step: domain.StepHandlePipelineRunning}); err != nil {
				return engine.Outcome{}, err
			}
		}
		return engine.Fail(domain.StepHandlePipelineFailed, domain.BindingHandleFailed,
			fmt.Sprintf("pipeline of rebased MR !%d %s", mr.IID, status)), nil
	}
	return engine.PollAgain(engine.PollTier(d.Config().Polling(config.PollingPipeline)), w, engine.Transition{Step: domain.StepHandlePipelineRunning},
		engine.Failure{Step: domain.StepHandlePipelinePending},
		fmt.Sprintf("pipeline of rebased MR !%d did not finish in time (last status %q)", mr.IID, status)), nil
}
