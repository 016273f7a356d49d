package batch

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"changeflow/internal/bindingfile"
	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flow"
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
func (d Flow) settleAbsentRemovals(ctx context.Context, b store.Batch, project string, ops []store.Operation) ([]store.Operation, error) {
	revokes := admittedRevocations(ops)
	if len(revokes) == 0 {
		return ops, nil
	}
	absent, err := d.absentEntries(ctx, b, project, revokes)
	if err != nil || len(absent) == 0 {
		return ops, err
	}
	states, err := d.Store.BatchMemberStates(ctx, b.ID)
	if err != nil {
		return ops, err
	}
	plan := planAbsentSettlement(b, ops, states, absent)
	if len(plan.apply.Moves) == 0 {
		return ops, nil
	}
	if _, err := d.Store.BatchApply(ctx, plan.apply); err != nil {
		return ops, fmt.Errorf("settle the revocations with nothing to remove: %w", err)
	}
	for _, f := range plan.flips {
		d.Flipped(ctx, f)
	}
	d.Log().Info("batch round: revocations with nothing to remove settled at once",
		"batch", b.ID, "settled", len(plan.flips), "remaining", len(plan.rest))
	if len(plan.rest) == 0 {
		d.RoundNow(b.ProjectID) // the slot is free
		return nil, errNoMembersLeft
	}
	return plan.rest, nil
}

// admittedRevocations are the revocations among ops still waiting for
// the batch's MR: the only members that can have nothing to remove.
func admittedRevocations(ops []store.Operation) []store.Operation {
	var revokes []store.Operation
	for _, op := range ops {
		if op.Kind == domain.OperationRevoke && domain.StepStatus(op.Step) == domain.StepCreateAdmitted {
			revokes = append(revokes, op)
		}
	}
	return revokes
}

// absentEntries reads the binding files of revokes on the default
// branch's head and answers, by operationId, the note of each revocation
// whose grant's entry is not there. A file that does not parse and a
// target no longer configured answer nothing (the commit's own read
// blocks the batch).
func (d Flow) absentEntries(ctx context.Context, b store.Batch, project string, revokes []store.Operation) (map[string]string, error) {
	head, err := d.GitLab.GetBranch(ctx, project, d.MainBranch())
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", d.MainBranch(), err)
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
			f, _, err := d.ReadBindingFile(ctx, project, target.File, head.CommitID)
			if errors.Is(err, bindingfile.ErrInvalid) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("binding file %s: %w", target.File, err)
			}
			files[target.File], file = f, f
		}
		if _, present := file.WithoutEntryOf(op.Subject, op.GrantOperationID); !present {
			absent[op.OperationID] = fmt.Sprintf("nothing to remove: %s on %s@%s has no entry of %s written by %s (batch %d)",
				target.File, d.MainBranch(), flow.Short(head.CommitID), op.Subject, op.GrantOperationID, b.ID)
		}
	}
	return absent, nil
}

// absentPlan is the settlement of a batch's revocations with nothing to
// remove: the one guarded transaction, the flips to count after its
// commit, and the members still to build.
type absentPlan struct {
	apply store.BatchApplyParams
	flips []store.Flip
	rest  []store.Operation
}

// planAbsentSettlement decides, from batch b's members ops and their
// states as read, what settles the revocations absent names (by
// operationId, with each one's note): each one still as claimed moves
// CREATE_ADMITTED → REVOKE_ABSENT, REVOKING → REVOKED, and leaves the
// batch; a member that moved since is left to its mover. No move: nothing
// to apply. No member left: the same transaction finishes the batch
// SUCCEEDED, guarded on its version instead of on RUNNING alone.
func planAbsentSettlement(b store.Batch, ops []store.Operation, states []store.BatchMemberState, absent map[string]string) absentPlan {
	gone := make(map[string]bool, len(absent))
	for id := range absent {
		gone[id] = true
	}
	plan := absentPlan{apply: store.BatchApplyParams{BatchID: b.ID, OnlyIf: domain.BatchRunning}}
	actor := "batch-" + strconv.FormatInt(b.ID, 10)
	for _, m := range states {
		note, ok := absent[m.OperationID]
		// The member as claimed: still waiting for the MR (grant view
		// MR_CREATING is the revocation's REVOKING).
		if !ok || domain.StepStatus(m.Step) != domain.StepCreateAdmitted || m.Binding != domain.BindingMRCreating {
			delete(gone, m.OperationID)
			continue
		}
		// Written in the revocation's own vocabulary: REVOKING → REVOKED
		// is its row's real move (the store maps a revocation's statuses
		// to themselves), one statement per member because each carries
		// its own note.
		plan.apply.Moves = append(plan.apply.Moves, store.TransitionManyParams{
			FromStep: int(domain.StepCreateAdmitted), ToStep: int(domain.StepRevokeAbsent),
			BindingFrom: domain.BindingRevoking, BindingTo: domain.BindingRevoked,
			Rows:  []store.TransitionRow{{OperationID: m.OperationID, Version: m.Version, BindingVersion: m.BindingVersion}},
			Actor: actor, Note: note,
		})
	}
	for _, op := range ops {
		if gone[op.OperationID] {
			plan.flips = append(plan.flips, store.Flip{OperationID: op.OperationID, Subject: op.Subject, TargetKey: op.TargetKey,
				From: domain.BindingRevoking, To: domain.BindingRevoked,
				FromStep: int(domain.StepCreateAdmitted), ToStep: int(domain.StepRevokeAbsent)})
			continue
		}
		plan.rest = append(plan.rest, op)
	}
	if len(plan.rest) == 0 {
		p := &plan.apply
		p.OnlyIf, p.SettleTo, p.From, p.Version = 0, domain.BatchSucceeded, domain.BatchRunning, b.Version
	}
	return plan
}
