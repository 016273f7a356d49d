package workflow

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"changeflow/internal/bindingfile"
	"changeflow/internal/domain"
	"changeflow/internal/store"
)

// A batch round's revocations with nothing left to remove (docs/flows/lifecycle.md,
// "Revocation (access ends)"): every revocation member whose grant's entry
// is no longer on the default branch — removed by hand, or never written —
// is settled at once as REVOKE_ABSENT → REVOKED, exactly as create_mr does
// on a single-request target, and leaves the batch before its commit is
// built, so the MR neither names it nor waits for it. A batch of nothing
// but such members opens no MR at all and ends SUCCEEDED in the same
// transaction: before this, its round had no change to commit, could not
// open its MR, and the timeout sweep failed the batch and re-admitted the
// members — for ever.

// errNoMembersLeft: every member of the batch was settled as nothing to
// remove; the batch is finished and has no MR.
var errNoMembersLeft = errors.New("no member left to build an MR for")

// remainingMembers drops from ops the revocations a round of this batch
// already settled as nothing to remove (a round that died after that
// transaction, resumed): they are no longer part of the batch's change.
func remainingMembers(ops []store.Operation) []store.Operation {
	out := ops[:0:0]
	for _, op := range ops {
		if op.Kind == domain.OperationRevoke && domain.StepStatus(op.Step) == domain.StepRevokeAbsent {
			continue
		}
		out = append(out, op)
	}
	return out
}

// settleAbsentRemovals reads the binding files of ops' revocations on the
// default branch's head and settles, in ONE transaction guarded on the
// batch still RUNNING and on every member's versions, each revocation
// whose grant's entry is not there: CREATE_ADMITTED → REVOKE_ABSENT,
// REVOKING → REVOKED, the lag metric counted once after commit. When no
// member is left, the same transaction finishes the batch SUCCEEDED (it
// never had an MR) and errNoMembersLeft is returned. It returns the
// members still to build.
//
// The default branch decides, not the batch branch: a round that died
// after its commit left a branch without the entries it removes, and
// those removals are still to be merged. A file that does not parse and
// a target no longer configured are left to the commit's own read, which
// blocks the batch for a person.
func (d Deps) settleAbsentRemovals(ctx context.Context, b store.Batch, project string, ops []store.Operation) ([]store.Operation, error) {
	var revokes []store.Operation
	for _, op := range ops {
		if op.Kind == domain.OperationRevoke && domain.StepStatus(op.Step) == domain.StepCreateAdmitted {
			revokes = append(revokes, op)
		}
	}
	if len(revokes) == 0 {
		return ops, nil
	}
	head, err := d.GitLab.GetBranch(ctx, project, d.targetBranch())
	if err != nil {
		return ops, fmt.Errorf("read %s: %w", d.targetBranch(), err)
	}
	files := map[string]bindingfile.File{}
	absent := map[string]string{} // operationId → the note
	for _, op := range revokes {
		target, ok := d.Config().Target(op.TargetKey)
		if !ok {
			continue
		}
		file, seen := files[target.File]
		if !seen {
			f, _, err := d.readBindingFile(ctx, project, target.File, head.CommitID)
			if errors.Is(err, bindingfile.ErrInvalid) {
				continue
			}
			if err != nil {
				return ops, fmt.Errorf("binding file %s: %w", target.File, err)
			}
			files[target.File], file = f, f
		}
		if _, present := file.WithoutEntryOf(op.Subject, op.GrantOperationID); !present {
			absent[op.OperationID] = fmt.Sprintf("nothing to remove: %s on %s@%s has no entry of %s written by %s (batch %d)",
				target.File, d.targetBranch(), short(head.CommitID), op.Subject, op.GrantOperationID, b.ID)
		}
	}
	if len(absent) == 0 {
		return ops, nil
	}
	states, err := d.Store.BatchMemberStates(ctx, b.ID)
	if err != nil {
		return ops, err
	}
	p := store.BatchApplyParams{BatchID: b.ID, OnlyIf: domain.BatchRunning}
	actor := "batch-" + strconv.FormatInt(b.ID, 10)
	var flips []store.Flip
	for _, m := range states {
		note, ok := absent[m.OperationID]
		// The member as claimed: still waiting for the MR (grant view
		// MR_CREATING is the revocation's REVOKING).
		if !ok || domain.StepStatus(m.Step) != domain.StepCreateAdmitted || m.Binding != domain.BindingMRCreating {
			delete(absent, m.OperationID)
			continue
		}
		// Written in the revocation's own vocabulary: REVOKING → REVOKED
		// is its row's real move (the store maps a revocation's statuses
		// to themselves), one statement per member because each carries
		// its own note.
		p.Moves = append(p.Moves, store.TransitionManyParams{
			FromStep: int(domain.StepCreateAdmitted), ToStep: int(domain.StepRevokeAbsent),
			BindingFrom: domain.BindingRevoking, BindingTo: domain.BindingRevoked,
			Rows:  []store.TransitionRow{{OperationID: m.OperationID, Version: m.Version, BindingVersion: m.BindingVersion}},
			Actor: actor, Note: note,
		})
	}
	var rest []store.Operation
	for _, op := range ops {
		if _, gone := absent[op.OperationID]; gone {
			flips = append(flips, store.Flip{OperationID: op.OperationID, Subject: op.Subject, TargetKey: op.TargetKey,
				From: domain.BindingRevoking, To: domain.BindingRevoked,
				FromStep: int(domain.StepCreateAdmitted), ToStep: int(domain.StepRevokeAbsent)})
			continue
		}
		rest = append(rest, op)
	}
	if len(p.Moves) == 0 {
		return ops, nil
	}
	if len(rest) == 0 {
		p.OnlyIf, p.SettleTo, p.From, p.Version = 0, domain.BatchSucceeded, domain.BatchRunning, b.Version
	}
	if _, err := d.Store.BatchApply(ctx, p); err != nil {
		return ops, fmt.Errorf("settle the revocations with nothing to remove: %w", err)
	}
	for _, f := range flips {
		d.flipped(ctx, f)
	}
	d.logger().Info("batch round: revocations with nothing to remove settled at once",
		"batch", b.ID, "settled", len(flips), "remaining", len(rest))
	if len(rest) == 0 {
		d.roundNow(b.ProjectID) // the slot is free
		return nil, errNoMembersLeft
	}
	return rest, nil
}
