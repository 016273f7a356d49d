package single

import (
	"changeflow/internal/bindingfile"
	"changeflow/internal/domain"
	"changeflow/internal/gitlab"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flow"
)

// The single-request steps (create_mr, rebuild, merge, regenerate) each
// read GitLab, choose, then write. The choices are here, as pure functions
// of what was read, so a table shows every case without a simulated world;
// the steps keep the calls around them.

// oldMRChoice is what rebuild does first with the MR recorded on the row.
type oldMRChoice int

const (
	// oldMRGone: the old MR is closed already; build the new one.
	oldMRGone oldMRChoice = iota
	// oldMRRecorded: the row's MR is the rebuilt one already (a
	// retrigger); only its pipeline is left to poll.
	oldMRRecorded
	// oldMRMerged: someone merged it meanwhile; merged wins.
	oldMRMerged
	// oldMRClose: still open (or locked); close it, then build.
	oldMRClose
)

// chooseOldMR is rebuild's choice for old, the MR on the row, when the
// request is to be rebuilt on branch.
func chooseOldMR(old gitlab.MR, branch string) oldMRChoice {
	switch {
	case old.SourceBranch == branch:
		return oldMRRecorded
	case old.State == gitlab.MRStateMerged:
		return oldMRMerged
	case old.State == gitlab.MRStateOpened, old.State == gitlab.MRStateLocked:
		return oldMRClose
	}
	return oldMRGone
}

// foundMRChoice is what create_mr or rebuild does with an MR found on the
// request's own branch before it opens one.
type foundMRChoice int

const (
	// foundMRAdopt: the committer bot's, from a run whose answer was
	// lost; it is the request's MR.
	foundMRAdopt foundMRChoice = iota
	// foundMRForeign: opened by someone else; a security event, and the
	// request moves to its next fresh branch.
	foundMRForeign
	// foundMRClosed: the bot's, closed outside changeflow; create_mr
	// fails for a person to look.
	foundMRClosed
	// foundMRAbandon: the bot's but no longer open; rebuild moves to the
	// next fresh branch (the old MR it closed is never built on again).
	foundMRAbandon
)

// chooseFoundMR is the choice for mr, found on the request's branch, given
// the committer bot's username. create_mr adopts the bot's MR in any state
// but closed (a merged one is followed by the handling steps); rebuild
// adopts only an open one.
func chooseFoundMR(mr gitlab.MR, bot string, rebuilding bool) foundMRChoice {
	switch {
	case mr.AuthorUsername != bot:
		return foundMRForeign
	case rebuilding && mr.State != gitlab.MRStateOpened:
		return foundMRAbandon
	case !rebuilding && mr.State == gitlab.MRStateClosed:
		return foundMRClosed
	}
	return foundMRAdopt
}

// singleEdit is a single request's change of its binding file: the
// file's new content and the words of its commit and MR.
type singleEdit struct {
	Content     []byte
	Message     string
	Title       string
	Description string
}

// rebuildEdit is the change rebuild commits for op on file (read at the
// target's head): a grant adds or replaces the subject's entry; a removal
// takes out the entry its grant wrote. false: a removal with nothing left
// to remove (the entry is gone, or it is someone else's).
func rebuildEdit(op store.Operation, file bindingfile.File) (singleEdit, bool) {
	if op.Kind == domain.OperationRevoke {
		next, removed := file.WithoutEntryOf(op.Subject, op.GrantOperationID)
		if !removed {
			return singleEdit{}, false
		}
		return singleEdit{Content: next.Marshal(), Message: flow.RemovalMessage(op), Title: flow.RemovalMessage(op),
			Description: flow.RemovalDescription(op)}, true
	}
	next := file.With(bindingfile.Entry{Subject: op.Subject, ExpiresAt: op.ExpiresAt, OperationID: op.OperationID})
	return singleEdit{Content: next.Marshal(), Message: flow.CommitMessage(op), Title: flow.CommitMessage(op),
		Description: flow.MRDescription(op)}, true
}

// grantNeedsCommit reports whether create_mr commits op's entry on its
// branch pinned at at, where file was read: not when the branch exists
// and already holds this operation's entry for the subject (a run whose
// answer was lost made the commit).
func grantNeedsCommit(op store.Operation, at flow.Pin, file bindingfile.File) bool {
	e, ok := file.Entry(op.Subject)
	return !at.BranchExists || !ok || e.OperationID != op.OperationID
}

// fileAction is the commit action that writes a binding file: create when
// it did not exist at the pinned commit, update otherwise.
func fileAction(exists bool) gitlab.FileActionKind {
	if exists {
		return gitlab.ActionUpdate
	}
	return gitlab.ActionCreate
}

// changedEntries are the entries of the binding file that differ between
// before and after: each removed or replaced entry of before (the removed
// one must be explained too) and each added or replacing entry of after.
// Empty: the files differ in nothing but formatting, or not at all.
func changedEntries(before, after bindingfile.File) []bindingfile.Entry {
	var changed []bindingfile.Entry
	for _, e := range before.Entries {
		if a, ok := after.Entry(e.Subject); !ok || !sameEntry(a, e) {
			changed = append(changed, e)
		}
	}
	for _, a := range after.Entries {
		if e, ok := before.Entry(a.Subject); !ok || !sameEntry(e, a) {
			changed = append(changed, a)
		}
	}
	return changed
}

// mergeAnswer is what merge does with GitLab's answer to the merge call.
type mergeAnswer int

const (
	// mergeMerged: the MR is merged; finish as merged.
	mergeMerged mergeAnswer = iota
	// mergeOtherState: GitLab answered without error but not merged; read
	// again at once.
	mergeOtherState
	// mergeHeadMoved: the head moved since the read (409); read again at
	// once and merge the new head.
	mergeHeadMoved
	// mergeTransient: a passing failure; retry later.
	mergeTransient
	// mergeFailed: a refusal no rebase helps; the request fails.
	mergeFailed
	// mergeRefused: not mergeable as is (405/406/422); a rebase may help.
	mergeRefused
)

// chooseMergeAnswer classifies the answer of the merge call: got and err.
func chooseMergeAnswer(got gitlab.MR, err error) mergeAnswer {
	switch {
	case err == nil && got.State == gitlab.MRStateMerged:
		return mergeMerged
	case err == nil:
		return mergeOtherState
	case gitlab.IsConflict(err):
		return mergeHeadMoved
	case flow.Transient(err):
		return mergeTransient
	case !gitlab.IsMethodNotAllowed(err) && !gitlab.IsMergeFailed(err):
		return mergeFailed
	}
	return mergeRefused
}
