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

// createMR is create_mr: the branch, the commit and the MR of a
// single-request change, each looked up before it is created, so the step
// is safe to run any number of times (a crash, a lost answer, an
// operator's retrigger) and never makes a second branch, commit or MR:
//
//  1. the MR by its deterministic source branch (any state): found → adopt;
//  2. the branch's head, else the target branch's head: the commit the
//     write is pinned to (pin);
//  3. the binding file at that commit: when the branch already holds this
//     operation's entry, the commit is not made again; otherwise
//     add-or-replace the subject's entry (bindingfile) and commit from
//     exactly that commit (start_sha), the operationId as a trailer in the
//     message. A refusal because what was read went away is a retry from a
//     fresh read;
//  4. CreateMR, the operationId as a trailer in the description.
//
// A write whose answer was lost (OutcomeUnknown) or a transient failure is
// RetryAfter: the next run finds what the lost call did. The MR's iid, URL
// and branch are written with the outcome, under the lease.
func (d Steps) createMR(ctx context.Context, w engine.Work) (engine.Outcome, error) {
	op := w.Operation
	project, err := d.Project(op)
	if err != nil {
		return engine.Fail(domain.StepCreateFailed, domain.BindingCreateFailed, err.Error()), nil
	}
	branch := flow.SingleBranch(op)
	// A branch or MR changeflow did not create is never built on or
	// adopted: the request moves to a fresh branch of its own (bounded).
	stop := func(why string) (engine.Outcome, error) {
		return engine.Fail(domain.StepCreateFailed, domain.BindingCreateFailed, OutOfBranches(why)), nil
	}

	mr, found, err := d.GitLab.FindMRBySourceBranch(ctx, project, branch, gitlab.StateAll)
	if err != nil {
		return d.RetryOr(err, "look up MR")
	}
	if found {
		return d.adoptMR(ctx, w, mr, branch, stop)
	}

	target, ok := d.Config().Target(op.TargetKey)
	if !ok {
		return engine.Fail(domain.StepCreateFailed, domain.BindingCreateFailed, "target "+op.TargetKey+" is no longer configured"), nil
	}
	at, err := d.PinBranch(ctx, project, branch, d.MainBranch())
	if err != nil {
		return d.RetryOr(err, "look up branch")
	}
	if at.BranchExists {
		// An existing branch is a run whose answer was lost — or someone
		// else's, made in advance: built on only if every commit on it is
		// the committer bot's.
		own, why, err := d.BranchIsOwn(ctx, project, branch)
		if err != nil {
			return d.RetryOr(err, "check branch")
		}
		if !own {
			return d.abandonBranch(ctx, w, branch, SecurityEvent{Kind: SecurityForeignBranch, Resource: op.OperationID,
				Branch: branch, SHA: at.SHA, Why: why}, stop)
		}
	}
	file, exists, err := d.ReadBindingFile(ctx, project, target.File, at.SHA)
	if errors.Is(err, bindingfile.ErrInvalid) {
		// A hand-edited file that no longer parses: rewriting it would
		// lose entries, so a person looks first.
		return engine.Fail(domain.StepCreateFailed, domain.BindingCreateFailed, "binding file "+target.File+": "+err.Error()), nil
	}
	if err != nil {
		return d.RetryOr(err, "read binding file")
	}
	if op.Kind == domain.OperationRevoke {
		return d.createRemoval(ctx, w, project, branch, target.File, at, file)
	}
	if grantNeedsCommit(op, at, file) {
		if end := d.commitGrant(ctx, w, project, branch, target.File, at, file, exists); end != nil {
			return end.Out, end.Err
		}
	}

	mr, end := d.openMR(ctx, project, gitlab.CreateMRRequest{
		SourceBranch: branch, TargetBranch: d.MainBranch(),
		Title:       flow.CommitMessage(op),
		Description: flow.MRDescription(op),
	})
	if end != nil {
		return end.Out, end.Err
	}
	return d.mrCreated(op, mr, branch), nil
}

// adoptMR is create_mr for an MR found on the request's branch: the
// committer bot's is adopted (a run whose answer was lost), anyone else's
// abandons the branch for a fresh one, and the bot's closed outside
// changeflow stops the request for a person.
func (d Steps) adoptMR(ctx context.Context, w engine.Work, mr gitlab.MR, branch string, stop func(why string) (engine.Outcome, error)) (engine.Outcome, error) {
	bot, err := d.Committer(ctx)
	if err != nil {
		return d.RetryOr(err, "read the committer bot's account")
	}
	switch chooseFoundMR(mr, bot.Username, false) {
	case foundMRForeign:
		return d.abandonBranch(ctx, w, branch, ForeignMR(w.Operation.OperationID, mr), stop)
	case foundMRClosed:
		return engine.Fail(domain.StepCreateFailed, domain.BindingCreateFailed,
			fmt.Sprintf("MR !%d of branch %s was closed outside changeflow", mr.IID, branch)), nil
	}
	return d.mrCreated(w.Operation, mr, branch), nil
}

// commitGrant commits the grant's entry (add or replace) on branch from
// the pinned commit, where file was read, and records CREATE_COMMITTED
// the first time. A nil end: committed, go on to the MR.
func (d Steps) commitGrant(ctx context.Context, w engine.Work, project, branch, path string, at flow.Pin, file bindingfile.File, exists bool) *flow.StepEnd {
	op := w.Operation
	next := file.With(bindingfile.Entry{Subject: op.Subject, ExpiresAt: op.ExpiresAt, OperationID: op.OperationID})
	req := at.Commit(branch, flow.CommitTrailers(flow.CommitMessage(op), op.OperationID),
		[]gitlab.FileAction{{Action: fileAction(exists), Path: path, Content: string(next.Marshal())}})
	if end := d.commitPinned(ctx, project, req, "commit"); end != nil {
		return end
	}
	if domain.StepStatus(op.Step) == domain.StepCreateStarted {
		if err := w.Progress(ctx, engine.Transition{Step: domain.StepCreateCommitted, Fields: store.WorkFields{Branch: branch},
			Note: "committed on " + branch}); err != nil {
			return &flow.StepEnd{Err: err}
		}
	}
	return nil
}

// commitPinned makes the commit req, pinned to what was read; what names
// it in the outcome. A nil end: committed.
func (d Steps) commitPinned(ctx context.Context, project string, req gitlab.CommitRequest, what string) *flow.StepEnd {
	_, err := d.GitLab.CreateCommit(ctx, project, req)
	if gitlab.IsStaleWrite(err) {
		// What was read went away (a file created, the branch created by
		// a run whose answer was lost): read again.
		return &flow.StepEnd{Out: engine.RetryAfter(0, what+" refused, reading again: "+err.Error())}
	}
	if err != nil {
		return retryEnd(d, err, what)
	}
	return nil
}

// openMR opens the MR req. A nil end comes with the MR.
func (d Steps) openMR(ctx context.Context, project string, req gitlab.CreateMRRequest) (gitlab.MR, *flow.StepEnd) {
	mr, err := d.GitLab.CreateMR(ctx, project, req)
	if gitlab.IsConflict(err) {
		// Another open MR for the branch: ours, from a run whose answer
		// was lost. The next run adopts it.
		return gitlab.MR{}, &flow.StepEnd{Out: engine.RetryAfter(0, "MR exists already: "+err.Error())}
	}
	if err != nil {
		return gitlab.MR{}, retryEnd(d, err, "open MR")
	}
	return mr, nil
}

// retryEnd is retryOr as a step's end.
func retryEnd(d Steps, err error, what string) *flow.StepEnd {
	out, err := d.RetryOr(err, what)
	return &flow.StepEnd{Out: out, Err: err}
}

// mrCreated is create_mr's outcome once the MR exists.
func (d Steps) mrCreated(op store.Operation, mr gitlab.MR, branch string) engine.Outcome {
	return engine.Done(flow.ActionPollPipeline, engine.Transition{
		Step:   domain.StepCreateMRCreated,
		Fields: store.WorkFields{MRIID: mr.IID, MRURL: mr.WebURL, Branch: branch},
		Note:   fmt.Sprintf("MR !%d", mr.IID),
	})
}

// createRemoval is create_mr for a revocation, from the file read at the
// pinned commit: the commit removes the subject's entry only if it is the
// one the grant wrote (bindingfile.WithoutEntryOf) — an entry changeflow
// did not write is never removed. Nothing to remove on the target branch
// (the entry is gone, or it is someone else's) counts as done at once:
// REVOKE_ABSENT, REVOKED — the deployed state cannot hold an entry the
// default branch does not. On the removal's own branch, an entry already
// gone means the commit was made by a run whose answer was lost, and only
// the MR is left to open.
func (d Steps) createRemoval(ctx context.Context, w engine.Work, project, branch, path string, at flow.Pin, file bindingfile.File) (engine.Outcome, error) {
	op := w.Operation
	next, removed := file.WithoutEntryOf(op.Subject, op.GrantOperationID)
	if !removed && !at.BranchExists {
		return engine.Done("", engine.Transition{Step: domain.StepRevokeAbsent, Binding: domain.BindingRevoked,
			Note: fmt.Sprintf("nothing to remove: %s on %s@%s has no entry of %s written by %s",
				path, d.MainBranch(), flow.Short(at.SHA), op.Subject, op.GrantOperationID)}).OnFlip(d.RevokedHook()), nil
	}
	if removed {
		req := at.Commit(branch, flow.CommitTrailers(flow.RemovalMessage(op), op.OperationID),
			[]gitlab.FileAction{{Action: gitlab.ActionUpdate, Path: path, Content: string(next.Marshal())}})
		if end := d.commitPinned(ctx, project, req, "commit"); end != nil {
			return end.Out, end.Err
		}
		if domain.StepStatus(op.Step) == domain.StepRevokeStarted || domain.StepStatus(op.Step) == domain.StepCreateStarted {
			if err := w.Progress(ctx, engine.Transition{Step: domain.StepCreateCommitted, Fields: store.WorkFields{Branch: branch},
				Note: "removal committed on " + branch}); err != nil {
				return engine.Outcome{}, err
			}
		}
	}
	mr, end := d.openMR(ctx, project, gitlab.CreateMRRequest{
		SourceBranch: branch, TargetBranch: d.MainBranch(),
		Title:       flow.RemovalMessage(op),
		Description: flow.RemovalDescription(op),
	})
	if end != nil {
		return end.Out, end.Err
	}
	return d.mrCreated(op, mr, branch), nil
}
