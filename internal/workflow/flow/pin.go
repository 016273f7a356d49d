package flow

import (
	"context"

	"changeflow/internal/gitlab"
)

// Pin is the one commit a write to the config repository is built from:
// every binding file the write edits is read at SHA, and the commit that
// carries the write starts at SHA (start_sha), so its parent is exactly
// what was read. Committing "on the branch's head" instead (start_branch)
// puts the edit of an old read on top of whatever merged in between, and a
// clean merge of that commit silently reverts the other change — an entry
// granted by another request disappears from the file although its request
// says VALIDATED. With the pin, the same race is a merge conflict, which
// regenerate resolves from a fresh read (docs/flows/single.md, "Writes are
// pinned to what was read").
type Pin struct {
	// SHA is the commit the files were read at and the write starts from.
	SHA string
	// BranchExists: the branch written existed when SHA was read, so the
	// commit overwrites it (force); otherwise the commit creates it.
	BranchExists bool
}

// PinBranch reads the head the write to branch is built from: branch's
// own head when it exists (a run that committed already, whose answer may
// have been lost), else the head of from (the MR's target branch).
func (env Env) PinBranch(ctx context.Context, project, branch, from string) (Pin, error) {
	br, err := env.GitLab.GetBranch(ctx, project, branch)
	if err == nil {
		return Pin{SHA: br.CommitID, BranchExists: true}, nil
	}
	if !gitlab.IsNotFound(err) {
		return Pin{}, err
	}
	base, err := env.GitLab.GetBranch(ctx, project, from)
	if err != nil {
		return Pin{}, err
	}
	return Pin{SHA: base.CommitID}, nil
}

// Commit is the commit of a write built from what was read at p, on
// branch: it starts at p.SHA, and an existing branch is overwritten by
// that one commit (force) — such a branch only ever holds changeflow's own
// commit for this one change, and the overwrite is rebuilt from the read
// it starts on, so nothing of anyone else's is lost. The actions are
// checked against p.SHA's tree, the tree they were computed from. GitLab
// still refuses when what was read went away — the branch was created
// meanwhile by a run whose answer was lost, the start commit is gone —
// and the caller answers such a refusal (gitlab.IsStaleWrite) with a
// fresh read, never with a failure state.
func (p Pin) Commit(branch, message string, actions []gitlab.FileAction) gitlab.CommitRequest {
	return gitlab.CommitRequest{Branch: branch, StartSHA: p.SHA, Force: p.BranchExists, Message: message, Actions: actions}
}
