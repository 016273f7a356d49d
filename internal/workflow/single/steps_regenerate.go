package single

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"changeflow/internal/bindingfile"
	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/gitlab"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flow"
)

// regeneratedNote starts the step-history note of a finished
// regeneration (HANDLE_REBASING → HANDLE_PIPELINE_RUNNING): poll_rebase
// counts them against workflow.maxRegenerations, merge restarts its
// rebase count after one.
const regeneratedNote = "regenerated "

// regenerate is regenerate: a single-request MR whose rebase conflicted
// (typically another request's entry next to this one, merged meanwhile)
// is rewritten as one new commit carrying this request's edit on the
// target branch's current head — the change is derivable from the
// database, so nobody needs to resolve a conflict in a file changeflow
// writes itself. The same MR is kept (its branch is force-written through
// the commits API: start_sha = the target's head, force), then the new
// head's pipeline is polled and approve runs again (GitLab may reset
// approvals on push; approve reads each bot's approval first), then merge.
//
// It reads before it writes, so a second run (a crash, a lost answer, a
// retrigger) makes no second commit:
//
//  1. the MR: merged → MERGED; closed → fail as closed outside;
//  2. the target branch's head T and the binding file at T: a file that
//     does not parse → HANDLE_REBASE_CONFLICT (CONTACT_MAINTAINERS):
//     regenerating would rewrite entries a person broke;
//  3. the source branch's head: when it is one commit on T carrying this
//     operation's trailer and exactly the regenerated file, it is already
//     done — no commit; otherwise commit (force, start_sha T).
//
// Then HANDLE_PIPELINE_RUNNING (the history note counts the
// regeneration), and in the same action the pipeline of the new head, in
// the pipeline tier: passed → HANDLE_STARTED and approve; failed →
// HANDLE_PIPELINE_FAILED; too long → HANDLE_PIPELINE_PENDING.
//
// Retriggered from a failed or pending state it starts at
// HANDLE_REBASING/MERGING and re-reads everything.
func (d Steps) regenerate(ctx context.Context, w engine.Work) (engine.Outcome, error) {
	h, mr, end := d.beginHandling(ctx, w, engine.Transition{Step: domain.StepHandleRebasing, Binding: domain.BindingMerging, Note: "regenerating"},
		domain.StepHandlePipelineRunning)
	if end != nil {
		return end.Out, end.Err
	}
	if h.step == domain.StepHandlePipelineRunning {
		return h.pollRegenerated(ctx, mr)
	}

	op := w.Operation
	target, ok := d.Config().Target(op.TargetKey)
	if !ok {
		return engine.Fail(domain.StepHandleRebaseConflict, domain.BindingHandleFailed,
			"cannot regenerate: target "+op.TargetKey+" is no longer configured"), nil
	}
	base, err := d.GitLab.GetBranch(ctx, h.project, mr.TargetBranch)
	if err != nil {
		return d.RetryOr(err, "read target branch")
	}
	file, exists, err := d.ReadBindingFile(ctx, h.project, target.File, base.CommitID)
	if errors.Is(err, bindingfile.ErrInvalid) {
		return engine.Fail(domain.StepHandleRebaseConflict, domain.BindingHandleFailed,
			fmt.Sprintf("cannot regenerate MR !%d: binding file %s on %s@%s: %v", mr.IID, target.File, mr.TargetBranch, flow.Short(base.CommitID), err)), nil
	}
	if err != nil {
		return d.RetryOr(err, "read binding file")
	}
	// The request's edit on the target's head: a grant adds (or
	// replaces) its entry; a revocation removes its grant's entry — and
	// when that is already gone from the head (removed by hand meanwhile),
	// there is nothing left to remove or to deploy.
	want := file.With(bindingfile.Entry{Subject: op.Subject, ExpiresAt: op.ExpiresAt, OperationID: op.OperationID}).Marshal()
	message := flow.CommitMessage(op)
	if op.Kind == domain.OperationRevoke {
		next, removed := file.WithoutEntryOf(op.Subject, op.GrantOperationID)
		if !removed {
			return d.regenerateNothingToRemove(ctx, h.project, mr, target.File, base.CommitID, op)
		}
		want, message = next.Marshal(), flow.RemovalMessage(op)
	}

	head, done, err := d.regeneratedOn(ctx, h.project, mr.SourceBranch, base.CommitID, target.File, op.OperationID, want)
	if err != nil {
		return d.RetryOr(err, "read source branch")
	}
	if !done {
		action := gitlab.ActionUpdate
		if !exists {
			action = gitlab.ActionCreate
		}
		// The source branch exists (the MR's), and is rewritten as one
		// commit on what was read of the target: the same pin as create_mr.
		at := flow.Pin{SHA: base.CommitID, BranchExists: true}
		c, err := d.GitLab.CreateCommit(ctx, h.project, at.Commit(mr.SourceBranch,
			flow.CommitTrailers(message+"\n\nRegenerated on "+mr.TargetBranch+"@"+flow.Short(base.CommitID)+
				" after a rebase conflict.", op.OperationID),
			[]gitlab.FileAction{{Action: action, Path: target.File, Content: string(want)}}))
		if gitlab.IsStaleWrite(err) {
			return engine.RetryAfter(0, "regenerate commit refused, reading again: "+err.Error()), nil
		}
		if err != nil {
			// A lost answer is RetryAfter: the next run finds the commit.
			return d.RetryOr(err, "regenerate commit")
		}
		head = c.ID
	}
	if err := h.progress(ctx, engine.Transition{Step: domain.StepHandlePipelineRunning,
		Note: fmt.Sprintf("%sMR !%d on %s@%s as %s", regeneratedNote, mr.IID, mr.TargetBranch, flow.Short(base.CommitID), flow.Short(head))}); err != nil {
		return engine.Outcome{}, err
	}
	// GitLab moves the MR to the new head (and starts its pipeline) after
	// the push: the next run polls it.
	return engine.WaitUntil(w.Now.Add(d.Config().Polling(config.PollingPipeline).ShortInterval), engine.Transition{}), nil
}

// regenerateNothingToRemove ends a revocation whose removal MR conflicted
// and whose grant's entry is no longer on the target's head: its MR is
// closed (it would remove nothing) and the revocation is REVOKE_ABSENT,
// REVOKED — as create_mr does when the entry is gone before the MR. A
// close that gets no answer is retried by the next run, which reads the
// head again.
func (d Steps) regenerateNothingToRemove(ctx context.Context, project string, mr gitlab.MR, path, base string, op store.Operation) (engine.Outcome, error) {
	if mr.State == gitlab.MRStateOpened || mr.State == gitlab.MRStateLocked {
		if _, err := d.GitLab.CloseMR(ctx, project, mr.IID); err != nil {
			return d.RetryOr(err, "close MR")
		}
	}
	return engine.Done("", engine.Transition{Step: domain.StepRevokeAbsent, Binding: domain.BindingRevoked,
		Note: fmt.Sprintf("nothing to remove: %s on %s@%s has no entry of %s written by %s; MR !%d closed",
			path, mr.TargetBranch, flow.Short(base), op.Subject, op.GrantOperationID, mr.IID)}).OnFlip(d.RevokedHook()), nil
}

// regeneratedOn reads the source branch's head and reports whether it is
// already this operation's regenerated commit on base: one parent, base;
// the operation's trailer; the binding file exactly want. It returns the
// head's sha either way ("" when the branch is gone).
func (d Steps) regeneratedOn(ctx context.Context, project, branch, base, path, operationID string, want []byte) (string, bool, error) {
	br, err := d.GitLab.GetBranch(ctx, project, branch)
	if gitlab.IsNotFound(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	c, err := d.GitLab.GetCommit(ctx, project, br.CommitID)
	if err != nil {
		return br.CommitID, false, err
	}
	if len(c.ParentIDs) != 1 || c.ParentIDs[0] != base || !flow.HasTrailer(c.Message, operationID) {
		return br.CommitID, false, nil
	}
	f, err := d.GitLab.GetFile(ctx, project, path, br.CommitID)
	if gitlab.IsNotFound(err) {
		return br.CommitID, false, nil
	}
	if err != nil {
		return br.CommitID, false, err
	}
	return br.CommitID, bytes.Equal(f.Content, want), nil
}

// pollRegenerated is regenerate's second half: the pipeline of the
// regenerated head. The MR must show the branch's head first (GitLab
// updates it after the push), and the pipeline must be that head's — an
// older pipeline's success says nothing about the new commit.
func (h *handle) pollRegenerated(ctx context.Context, mr gitlab.MR) (engine.Outcome, error) {
	d, w := h.d, h.w
	br, err := d.GitLab.GetBranch(ctx, h.project, mr.SourceBranch)
	if err != nil {
		return d.RetryOr(err, "read source branch")
	}
	status := "waiting for the MR to show " + flow.Short(br.CommitID)
	if mr.SHA == br.CommitID {
		status = ""
		if mr.HeadPipeline != nil && mr.HeadPipeline.SHA == mr.SHA {
			status = mr.HeadPipeline.Status
		}
	}
	switch status {
	case pipelineSuccess, pipelineSkipped:
		return engine.Done(flow.ActionApprove, engine.Transition{Step: domain.StepHandleStarted,
			Note: fmt.Sprintf("pipeline of regenerated MR !%d %s: approving again", mr.IID, status)}), nil
	case pipelineFailed, pipelineCanceled:
		return engine.Fail(domain.StepHandlePipelineFailed, domain.BindingHandleFailed,
			fmt.Sprintf("pipeline of regenerated MR !%d %s", mr.IID, status)), nil
	}
	return engine.PollAgain(engine.PollTier(d.Config().Polling(config.PollingPipeline)), w, engine.Transition{},
		engine.Failure{Step: domain.StepHandlePipelinePending},
		fmt.Sprintf("pipeline of regenerated MR !%d did not finish in time (last status %q)", mr.IID, status)), nil
}

// regenerations counts the request's finished regenerations since it was
// last retriggered (an operator's retrigger grants a fresh round).
func (d Steps) regenerations(ctx context.Context, operationID string) (int, error) {
	return d.countSince(ctx, operationID,
		func(s store.OperationStep) bool { return strings.HasPrefix(s.Note, retriggerNote) },
		func(s store.OperationStep) bool {
			return strings.HasPrefix(s.Note, regeneratedNote) && domain.StepStatus(s.ToStep) == domain.StepHandlePipelineRunning
		})
}

// conflictIsOwn reports whether the rebase conflict of mr (a single-request
// MR of operationID) comes only from changeflow's own merges: the MR's
// branch is one commit on a base B, and every entry of the binding file
// that differs between B and the target branch's head — added, replaced or
// removed — carries the operationId of a request changeflow knows, for that
// entry's subject. Such a conflict is not a person's problem: regeneration
// resolves it from the database, and each one means another request of the
// file merged, so regenerating on it is bounded by the requests' progress,
// not by a count (docs/flows/single.md, "Single-request targets under
// contention"). Anything else — a change no request explains, a file that
// no longer parses, a branch that is not one commit on its base — is not
// changeflow's own (false), and workflow.maxRegenerations bounds it.
func (d Steps) conflictIsOwn(ctx context.Context, project string, mr gitlab.MR, path, operationID string) (bool, error) {
	src, err := d.GitLab.GetBranch(ctx, project, mr.SourceBranch)
	if err != nil {
		return false, err
	}
	head, err := d.GitLab.GetCommit(ctx, project, src.CommitID)
	if err != nil {
		return false, err
	}
	if len(head.ParentIDs) != 1 || !flow.HasTrailer(head.Message, operationID) {
		return false, nil
	}
	target, err := d.GitLab.GetBranch(ctx, project, mr.TargetBranch)
	if err != nil {
		return false, err
	}
	before, _, err := d.ReadBindingFile(ctx, project, path, head.ParentIDs[0])
	if errors.Is(err, bindingfile.ErrInvalid) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	after, _, err := d.ReadBindingFile(ctx, project, path, target.CommitID)
	if errors.Is(err, bindingfile.ErrInvalid) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	changed := changedEntries(before, after)
	if len(changed) == 0 {
		return false, nil // the conflict is not in the entries: formatting, another file
	}
	return d.changedByKnownRequests(ctx, changed, operationID)
}

// changedByKnownRequests reports whether every changed entry was written
// by a request changeflow knows, other than operationID, for that
// entry's subject: an entry with no operation, this request's own, or one
// naming an unknown request or another subject is not changeflow's.
func (d Steps) changedByKnownRequests(ctx context.Context, changed []bindingfile.Entry, operationID string) (bool, error) {
	for _, e := range changed {
		if e.OperationID == "" || e.OperationID == operationID {
			return false, nil
		}
		op, err := d.Store.OperationGet(ctx, e.OperationID)
		if errors.Is(err, domain.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if op.Subject != e.Subject {
			return false, nil
		}
	}
	return true, nil
}

// sameEntry: the same subject, operation and expiry (to the file's second).
func sameEntry(a, b bindingfile.Entry) bool {
	return a.Subject == b.Subject && a.OperationID == b.OperationID && a.ExpiresAt.Equal(b.ExpiresAt)
}
