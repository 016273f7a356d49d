package single

import (
	"context"
	"errors"
	"fmt"

	"changeflow/internal/bindingfile"
	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/gitlab"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flow"
)

// rebuiltNote starts the step-history note of a request rebuilt on a
// fresh branch after a foreign head; merge restarts its rebase count
// after one (a new MR).
const rebuiltNote = "rebuilt "

// verifyHead is the head check before the bots approve or merge mr (only
// what changeflow wrote gets the bots' approvals; verify.go). nil: verified, approve or merge
// at mr.SHA. Otherwise the step ends with the answer:
//
//   - the check could not be made (GitLab failing): retry, as any read;
//   - rebuild (only the bot's commits, not byte-exact): a single request
//     is regenerated on the target's head from a fresh read — within
//     workflow.maxRegenerations; past it, a head that keeps coming out
//     wrong is treated as foreign, so nothing loops; a batch fails and is
//     settled, its members wait for the next round;
//   - foreign: a security event, then a single request is rebuilt on a
//     fresh branch of its own (rebuild, the old MR closed there) and a
//     batch fails and is settled (its MR closed, merged wins), its
//     members building a new batch on a new branch.
func (h *handle) verifyHead(ctx context.Context, mr gitlab.MR) *flow.StepEnd {
	d, op := h.d, h.w.Operation
	batch := op.BatchID != 0 && mr.SourceBranch != flow.SingleBranch(op)
	want := d.singleWant(h.project, op)
	if batch {
		want = d.batchWant(h.project, op.BatchID)
	}
	v, err := d.checkHead(ctx, h.project, mr.TargetBranch, mr.SHA, want)
	if errors.Is(err, flow.ErrTargetGone) {
		return &flow.StepEnd{Out: engine.Fail(domain.StepHandleMergeFailed, domain.BindingHandleFailed,
			fmt.Sprintf("cannot check MR !%d: %v", mr.IID, err))}
	}
	if err != nil {
		out, err := d.RetryOr(err, "check the MR's head")
		return &flow.StepEnd{Out: out, Err: err}
	}
	if v.Kind == headVerified {
		return nil
	}
	if v.Kind == headRebuild && batch {
		return &flow.StepEnd{Out: engine.Fail(domain.StepHandleRebaseConflict, domain.BindingHandleFailed,
			fmt.Sprintf("MR !%d at %s: %s; its requests go to the next batch, built from a fresh read", mr.IID, flow.Short(mr.SHA), v.Why))}
	}
	if v.Kind == headRebuild {
		n, err := d.regenerations(ctx, op.OperationID)
		if err != nil {
			return &flow.StepEnd{Err: err}
		}
		if n < d.Config().Workflow().MaxRegenerations {
			return &flow.StepEnd{Out: engine.Done(flow.ActionRegenerate, engine.Transition{
				Note: fmt.Sprintf("MR !%d at %s: %s; regenerating on %s", mr.IID, flow.Short(mr.SHA), v.Why, mr.TargetBranch)})}
		}
		v = headVerdict{headForeign, v.Why + fmt.Sprintf(" (still, after %d regenerations)", n)}
	}
	resource := op.OperationID
	if batch {
		resource = BatchResource(op.BatchID)
	}
	if err := d.RecordSecurityEvent(ctx, SecurityEvent{Kind: SecurityForeignHead, Resource: resource,
		MRIID: mr.IID, Branch: mr.SourceBranch, SHA: mr.SHA, Why: v.Why}); err != nil {
		return &flow.StepEnd{Err: err}
	}
	why := fmt.Sprintf("MR !%d has content changeflow did not write at %s (%s)", mr.IID, flow.Short(mr.SHA), v.Why)
	if batch {
		return &flow.StepEnd{Out: engine.Fail(domain.StepHandleMergeFailed, domain.BindingHandleFailed,
			why+"; not approved or merged: the MR is closed and its requests go to the next batch on a new branch")}
	}
	next, ok := nextBranch(op)
	if !ok {
		out, err := h.giveUpBranches(ctx, mr, why)
		return &flow.StepEnd{Out: out, Err: err}
	}
	return &flow.StepEnd{Out: engine.Done(flow.ActionRebuild, engine.Transition{Fields: store.WorkFields{Branch: next},
		Note: why + "; not approved or merged: the MR is closed and the request rebuilt on " + next})}
}

// BatchResource is a batch's resource name in the audit log.
func BatchResource(id int64) string { return fmt.Sprintf("batch-%d", id) }

// nextBranch is the fresh branch after op's current one; false past
// maxBranchAttempts.
func nextBranch(op store.Operation) (string, bool) {
	first := flow.BranchName(op.OperationID)
	n, _ := flow.BranchAttempt(flow.SingleBranch(op), first)
	if n+1 > flow.MaxBranchAttempts {
		return "", false
	}
	return flow.FreshBranchName(first, n+1), true
}

// giveUpBranches stops a request in handling whose branches ran out
// (every fresh name taken, or every MR on them pushed to): its current MR
// is closed (merged wins: the merge is followed) and a person looks at who
// writes to the changeflow/ branches.
func (h *handle) giveUpBranches(ctx context.Context, mr gitlab.MR, why string) (engine.Outcome, error) {
	if mr.IID != 0 && (mr.State == gitlab.MRStateOpened || mr.State == gitlab.MRStateLocked) {
		got, err := h.d.GitLab.CloseMR(ctx, h.project, mr.IID)
		if err != nil {
			return h.d.RetryOr(err, "close MR")
		}
		if got.State == gitlab.MRStateMerged {
			return h.merged(ctx, got)
		}
	}
	return engine.Fail(domain.StepHandleMergeFailed, domain.BindingHandleFailed, OutOfBranches(why)), nil
}

// rebuild is rebuild: a single request whose MR had a foreign head (or
// whose branch or MR turned out not to be changeflow's) is built again
// from a fresh read on the fresh branch recorded on its row, with a new
// MR; then the new head's pipeline (regenerate's second half), approve —
// which checks the head again — and merge. It reads before it writes, so
// any number of runs make one branch, one commit and one MR:
//
//  1. the MR on the row (the old one): merged → merged wins; open → close
//     it (an answer "merged" → merged wins);
//  2. the target's head T and the binding file at T; the request's edit
//     (a removal with nothing left to remove ends REVOKE_ABSENT);
//  3. an MR on the fresh branch: the committer bot's and open → adopt it
//     (a run whose answer was lost); anyone else's → security event
//     foreign_mr and the next fresh branch; closed or merged by someone
//     → the next fresh branch;
//  4. the fresh branch: missing → commit on T (creating it); only the
//     bot's commits → already the edit on T, or overwritten by it (force);
//     anyone else's → security event foreign_branch and the next fresh
//     branch;
//  5. CreateMR; the MR, its URL and the branch are written with
//     HANDLE_PIPELINE_RUNNING and regenerate polls the new pipeline.
//
// The branches are bounded (maxBranchAttempts): past the last, the
// request stops for a person with the reason.
func (d Steps) rebuild(ctx context.Context, w engine.Work) (engine.Outcome, error) {
	h, err := d.handle(w)
	if err != nil {
		return engine.Outcome{}, err
	}
	op := w.Operation
	branch := flow.SingleBranch(op)
	old, err := d.GitLab.GetMR(ctx, h.project, op.MRIID)
	if err != nil {
		return d.RetryOr(err, "read MR")
	}
	if end := h.rebuildCloseOld(ctx, old, branch); end != nil {
		return end.Out, end.Err
	}

	target, ok := d.Config().Target(op.TargetKey)
	if !ok {
		return engine.Fail(domain.StepHandleMergeFailed, domain.BindingHandleFailed, "cannot rebuild: target "+op.TargetKey+" is no longer configured"), nil
	}
	targetBranch := d.MainBranch()
	base, err := d.GitLab.GetBranch(ctx, h.project, targetBranch)
	if err != nil {
		return d.RetryOr(err, "read target branch")
	}
	file, exists, err := d.ReadBindingFile(ctx, h.project, target.File, base.CommitID)
	if errors.Is(err, bindingfile.ErrInvalid) {
		return engine.Fail(domain.StepHandleRebaseConflict, domain.BindingHandleFailed,
			fmt.Sprintf("cannot rebuild: binding file %s on %s@%s: %v", target.File, targetBranch, flow.Short(base.CommitID), err)), nil
	}
	if err != nil {
		return d.RetryOr(err, "read binding file")
	}
	edit, ok := rebuildEdit(op, file)
	if !ok {
		return d.regenerateNothingToRemove(ctx, h.project, old, target.File, base.CommitID, op)
	}

	mr, found, err := d.GitLab.FindMRBySourceBranch(ctx, h.project, branch, gitlab.StateAll)
	if err != nil {
		return d.RetryOr(err, "look up MR")
	}
	stop := func(why string) (engine.Outcome, error) { return h.giveUpBranches(ctx, gitlab.MR{}, why) }
	if found {
		bot, err := d.Committer(ctx)
		if err != nil {
			return d.RetryOr(err, "read the committer bot's account")
		}
		switch chooseFoundMR(mr, bot.Username, true) {
		case foundMRForeign:
			return d.abandonBranch(ctx, w, branch, ForeignMR(op.OperationID, mr), stop)
		case foundMRAbandon:
			return d.abandonBranch(ctx, w, branch, SecurityEvent{}, stop)
		}
	} else {
		var end *flow.StepEnd
		if mr, end = h.rebuildOn(ctx, w, branch, base.CommitID, target.File, exists, edit, stop); end != nil {
			return end.Out, end.Err
		}
	}
	return engine.Done(flow.ActionRegenerate, engine.Transition{Step: domain.StepHandlePipelineRunning,
		Fields: store.WorkFields{MRIID: mr.IID, MRURL: mr.WebURL, Branch: branch},
		Note:   fmt.Sprintf("%son %s as MR !%d (MR !%d closed)", rebuiltNote, branch, mr.IID, old.IID)}), nil
}

// rebuildCloseOld is rebuild's first part, on old, the MR on the row: nil
// when the request is to be built on branch (old closed, the step recorded
// as HANDLE_REBASING); otherwise the step ends here (the rebuilt MR is
// recorded already, or old was merged: merged wins).
func (h *handle) rebuildCloseOld(ctx context.Context, old gitlab.MR, branch string) *flow.StepEnd {
	switch chooseOldMR(old, branch) {
	case oldMRRecorded:
		// The rebuilt MR is the row's already (a retrigger): its pipeline.
		return &flow.StepEnd{Out: engine.Done(flow.ActionRegenerate, engine.Transition{Step: domain.StepHandlePipelineRunning, Note: "rebuilt MR recorded already"})}
	case oldMRMerged:
		out, err := h.merged(ctx, old)
		return &flow.StepEnd{Out: out, Err: err}
	case oldMRClose:
		got, err := h.d.GitLab.CloseMR(ctx, h.project, old.IID)
		if err != nil {
			out, err := h.d.RetryOr(err, "close MR")
			return &flow.StepEnd{Out: out, Err: err}
		}
		if got.State == gitlab.MRStateMerged {
			out, err := h.merged(ctx, got)
			return &flow.StepEnd{Out: out, Err: err}
		}
	}
	if h.step != domain.StepHandleRebasing {
		if err := h.progress(ctx, engine.Transition{Step: domain.StepHandleRebasing,
			Note: fmt.Sprintf("MR !%d closed; rebuilding on %s", old.IID, branch)}); err != nil {
			return &flow.StepEnd{Err: err}
		}
	}
	return nil
}

// rebuildOn builds edit on branch, where no MR was found: the commit on
// base unless the branch holds it already (a run whose answer was lost) —
// a branch with anyone else's commits is abandoned for the next fresh one
// — then the new MR. A nil end comes with the MR opened.
func (h *handle) rebuildOn(ctx context.Context, w engine.Work, branch, base, path string, exists bool, edit singleEdit,
	stop func(why string) (engine.Outcome, error)) (gitlab.MR, *flow.StepEnd) {
	d, op := h.d, w.Operation
	head, done, err := d.regeneratedOn(ctx, h.project, branch, base, path, op.OperationID, edit.Content)
	if err != nil {
		return gitlab.MR{}, retryEnd(d, err, "read branch")
	}
	if head != "" && !done {
		own, why, err := d.BranchIsOwn(ctx, h.project, branch)
		if err != nil {
			return gitlab.MR{}, retryEnd(d, err, "check branch")
		}
		if !own {
			out, err := d.abandonBranch(ctx, w, branch, SecurityEvent{Kind: SecurityForeignBranch, Resource: op.OperationID, Branch: branch, SHA: head, Why: why}, stop)
			return gitlab.MR{}, &flow.StepEnd{Out: out, Err: err}
		}
	}
	targetBranch := d.MainBranch()
	if !done {
		at := flow.Pin{SHA: base, BranchExists: head != ""}
		req := at.Commit(branch,
			flow.CommitTrailers(edit.Message+"\n\nRebuilt on "+targetBranch+"@"+flow.Short(base)+" after a head changeflow did not write.", op.OperationID),
			[]gitlab.FileAction{{Action: fileAction(exists), Path: path, Content: string(edit.Content)}})
		if end := d.commitPinned(ctx, h.project, req, "rebuild commit"); end != nil {
			return gitlab.MR{}, end
		}
	}
	return d.openMR(ctx, h.project, gitlab.CreateMRRequest{
		SourceBranch: branch, TargetBranch: targetBranch, Title: edit.Title, Description: edit.Description,
	})
}

// abandonBranch gives up branch for the request's next fresh branch,
// recording ev first when it is a security event (Kind set): the next
// branch is written on the row before anything is built on it, so a crash
// or a lost answer finds the same name again. Past the bound, stop ends
// the request for a person.
func (d Steps) abandonBranch(ctx context.Context, w engine.Work, branch string, ev SecurityEvent, stop func(why string) (engine.Outcome, error)) (engine.Outcome, error) {
	if ev.Kind != "" {
		if err := d.RecordSecurityEvent(ctx, ev); err != nil {
			return engine.Outcome{}, err
		}
	}
	op := w.Operation
	op.Branch = branch
	why := ev.Why
	if why == "" {
		why = "the MR on " + branch + " was closed or merged outside changeflow"
	}
	next, ok := nextBranch(op)
	if !ok {
		return stop(why)
	}
	if err := w.Progress(ctx, engine.Transition{Fields: store.WorkFields{Branch: next}, Note: why + "; building on " + next}); err != nil {
		return engine.Outcome{}, err
	}
	return engine.RetryAfter(0, why+"; building on "+next), nil
}

// OutOfBranches is the reason a request stops with when its branches ran
// out.
func OutOfBranches(why string) string {
	return fmt.Sprintf("%s; stopped after %d branches: someone else writes to changeflow's branches (changeflow/*) — "+
		"a maintainer should protect changeflow/* for the committer bot only and remove the branches and MRs changeflow did not create, then retry", why, flow.MaxBranchAttempts)
}

// ForeignMR is the security event of an MR on resource's branch that the
// committer bot did not open.
func ForeignMR(resource string, mr gitlab.MR) SecurityEvent {
	return SecurityEvent{Kind: SecurityForeignMR, Resource: resource, MRIID: mr.IID, Branch: mr.SourceBranch, SHA: mr.SHA,
		Why: fmt.Sprintf("MR !%d on %s was opened by %s, not the committer bot", mr.IID, mr.SourceBranch, mr.AuthorUsername)}
}

// batchWant is a batch's edit from base: every member's binding file with
// the members' entries, exactly as the batch commit builds it
// (batchFiles).
func (d Steps) batchWant(project string, batchID int64) wantFunc {
	return func(ctx context.Context, base string) (map[string][]byte, error) {
		ops, err := d.Store.BatchMemberOperations(ctx, batchID)
		if err != nil {
			return nil, err
		}
		actions, err := d.BatchFiles(ctx, project, base, flow.RemainingMembers(ops))
		if err != nil {
			return nil, err
		}
		out := make(map[string][]byte, len(actions))
		for _, a := range actions {
			out[a.Path] = []byte(a.Content)
		}
		return out, nil
	}
}
