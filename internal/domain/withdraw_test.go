package domain

import (
	"errors"
	"testing"
)

func TestWithdraw(t *testing.T) {
	// own is a request of kind at step whose binding, at b, is still its
	// own; with changes it.
	own := func(kind OperationKind, step StepStatus, b BindingStatus) WithdrawView {
		return WithdrawView{Kind: kind, Step: step, Binding: b, BindingOwned: true}
	}
	with := func(v WithdrawView, f func(*WithdrawView)) WithdrawView { f(&v); return v }
	member := func(waiting int64, status BatchStatus) *WithdrawMember {
		return &WithdrawMember{WaitingBatch: waiting, Status: status}
	}
	inBatch := func(v WithdrawView, id int64, status BatchStatus) WithdrawView {
		return with(v, func(v *WithdrawView) { v.Batch, v.Member = id, member(0, status) })
	}
	alone := func(v WithdrawView) WithdrawView { return with(v, func(v *WithdrawView) { v.Member = member(0, 0) }) }
	cancel := func(v WithdrawView) WithdrawView { return with(v, func(v *WithdrawView) { v.Cancel = true }) }
	const (
		withdrawn = StepCloseRequesterWithdrawn
		cancelled = StepCloseCancelled
	)
	fromApproval := func(view, move BindingStatus, restore bool) WithdrawPlan {
		return WithdrawPlan{Outcome: WithdrawApplied, Place: WithdrawFromApproval, View: view, Step: withdrawn, Move: move, Restore: restore, Schedule: true}
	}
	fromMR := func(view BindingStatus, step StepStatus, batch int64) WithdrawPlan {
		return WithdrawPlan{Outcome: WithdrawApplied, Place: WithdrawFromMR, View: view, Step: step, Batch: batch, Schedule: true}
	}
	refused := func(view BindingStatus) WithdrawPlan { return WithdrawPlan{Outcome: WithdrawRefused, View: view} }
	claimed := func(view BindingStatus, batch int64) WithdrawPlan {
		return WithdrawPlan{Outcome: WithdrawClaimed, View: view, Batch: batch}
	}
	already := func(view BindingStatus) WithdrawPlan { return WithdrawPlan{Outcome: WithdrawAlready, View: view} }

	for _, c := range []struct {
		name string
		view WithdrawView
		want WithdrawPlan
	}{
		// Waiting for the approval: CLOSED at once, the upstream half due.
		{"still submitting its approval: CLOSED, the action due",
			own(OperationGrant, StepCreateApprovalSubmitting, BindingApprovalSending),
			fromApproval(BindingApprovalSending, BindingClosed, false)},
		{"waiting for its approval: CLOSED, the action due",
			own(OperationGrant, StepCreateApprovalSubmitted, BindingApprovalSent),
			fromApproval(BindingApprovalSent, BindingClosed, false)},

		// The batch set: out of it by the guarded delete, nothing due.
		{"in the batch set: out of it and CLOSED, nothing due",
			own(OperationGrant, StepCreateAdmitted, BindingMRCreating),
			WithdrawPlan{Outcome: WithdrawApplied, Place: WithdrawFromBatchSet, View: BindingMRCreating, Step: withdrawn, Move: BindingClosed, LeaveBatchSet: true}},

		// The single-request MR: only the step moves.
		{"its MR being created: only the step moves, the action due",
			alone(own(OperationGrant, StepCreateStarted, BindingMRCreating)), fromMR(BindingMRCreating, withdrawn, 0)},
		{"its MR open and checked: only the step moves",
			alone(own(OperationGrant, StepCreatePipelineRunning, BindingMRCreated)), fromMR(BindingMRCreated, withdrawn, 0)},
		{"stopped on a failed check pipeline: only the step moves",
			alone(own(OperationGrant, StepCreatePipelineFailed, BindingCreateFailed)), fromMR(BindingCreateFailed, withdrawn, 0)},
		{"stopped on a forbidden approval: only the step moves",
			alone(own(OperationGrant, StepHandleApproveForbidden, BindingHandleFailed)), fromMR(BindingHandleFailed, withdrawn, 0)},
		{"merging an MR of its own: refused",
			own(OperationGrant, StepHandleStarted, BindingMerging), refused(BindingMerging)},

		// Batch members.
		{"claimed by a running batch (its waiting row marked): claimed",
			with(own(OperationGrant, StepCreateStarted, BindingMRCreating), func(v *WithdrawView) { v.Member = member(7, BatchRunning) }),
			claimed(BindingMRCreating, 7)},
		{"a member of a running batch: claimed",
			inBatch(own(OperationGrant, StepCreatePipelineRunning, BindingMRCreated), 7, BatchRunning), claimed(BindingMRCreated, 7)},
		{"a member of a BLOCKED batch: leaves it by the MR place",
			inBatch(own(OperationGrant, StepCreatePipelineRunning, BindingMRCreated), 7, BatchBlocked), fromMR(BindingMRCreated, withdrawn, 7)},
		{"the stopped driver of a BLOCKED batch: leaves it",
			inBatch(own(OperationGrant, StepCreatePipelineFailed, BindingCreateFailed), 7, BatchBlocked), fromMR(BindingCreateFailed, withdrawn, 7)},
		{"a member following its BLOCKED batch into merging: leaves it",
			inBatch(own(OperationGrant, StepHandleStarted, BindingMerging), 7, BatchBlocked), fromMR(BindingMerging, withdrawn, 7)},
		{"a member of a BLOCKED batch at a step the table keeps: claimed",
			inBatch(own(OperationGrant, StepHandleApproved, BindingMerging), 7, BatchBlocked), claimed(BindingMerging, 7)},
		{"a member following its running batch into merging: claimed",
			inBatch(own(OperationGrant, StepHandleStarted, BindingMerging), 7, BatchRunning), claimed(BindingMerging, 7)},
		{"the culprit a failed batch left stopped: leaves it",
			inBatch(own(OperationGrant, StepCreatePipelineFailed, BindingCreateFailed), 7, BatchFailed), fromMR(BindingCreateFailed, withdrawn, 7)},
		{"a member of an ended batch that is not stopped: claimed",
			inBatch(own(OperationGrant, StepCreatePipelineRunning, BindingMRCreated), 7, BatchFailed), claimed(BindingMRCreated, 7)},

		// Past the point of withdrawal, or not its own.
		{"merged: refused", own(OperationGrant, StepHandleMerged, BindingMerged), refused(BindingMerged)},
		{"in effect: refused", own(OperationGrant, StepCalledBack, BindingValidated), refused(BindingValidated)},
		{"rejected: refused", own(OperationGrant, StepCloseRejected, BindingRejected), refused(BindingRejected)},
		{"a binding a newer request took: refused, nothing of it shown",
			with(own(OperationGrant, StepCreateApprovalSubmitted, BindingApprovalSent), func(v *WithdrawView) { v.BindingOwned = false }),
			refused("")},
		{"no binding any more: refused", WithdrawView{Kind: OperationGrant, Step: StepCreateApprovalSubmitted}, refused("")},
		{"a removal stopped on a failure is not the requester's: refused",
			own(OperationRevoke, StepCreatePipelineFailed, BindingRevokeFailed), refused(BindingCreateFailed)},

		// A removal of access (a give-back, an expiry, an operator's
		// revocation) is never the requester's to withdraw, wherever it
		// stands: withdrawn, it would leave the entry on the default
		// branch. Its batch membership is never read (alone, inBatch only
		// show that it would not matter).
		{"a removal just created: refused",
			alone(own(OperationRevoke, StepRevokeStarted, BindingRevoking)), refused(BindingMRCreating)},
		{"a removal in the batch set: refused, still in the set",
			own(OperationRevoke, StepCreateAdmitted, BindingRevoking), refused(BindingMRCreating)},
		{"a removal whose MR is being created: refused",
			alone(own(OperationRevoke, StepCreateStarted, BindingRevoking)), refused(BindingMRCreating)},
		{"a removal whose MR is being checked: refused",
			alone(own(OperationRevoke, StepCreatePipelineRunning, BindingRevoking)), refused(BindingMRCreating)},
		{"a removal whose MR is checked: refused",
			alone(own(OperationRevoke, StepCreateSucceeded, BindingRevoking)), refused(BindingMRCreated)},
		{"a removal in a BLOCKED batch: refused",
			inBatch(own(OperationRevoke, StepCreateSucceeded, BindingRevoking), 7, BatchBlocked), refused(BindingMRCreated)},
		{"a removal following its BLOCKED batch into merging: refused",
			inBatch(own(OperationRevoke, StepHandleStarted, BindingRevoking), 7, BatchBlocked), refused(BindingMerging)},
		{"a removal done: refused",
			own(OperationRevoke, StepRevokeCalledBack, BindingRevoked), refused(BindingValidated)},
		{"an operator's close of a removal stopped on a failure: refused",
			alone(cancel(own(OperationRevoke, StepCreatePipelineFailed, BindingRevokeFailed))), refused(BindingCreateFailed)},

		// Withdrawn before: idempotent.
		{"withdrawn before: already",
			own(OperationGrant, withdrawn, BindingClosed), already(BindingClosed)},
		{"withdrawn before, its upstream half then failing: already",
			with(own(OperationGrant, StepCloseFailed, BindingMRCreated), func(v *WithdrawView) { v.EndReached = true }),
			already(BindingMRCreated)},

		// An operator's close: only a stopped request of the MR places.
		{"an operator closes a request stopped on a failure",
			alone(cancel(own(OperationGrant, StepCreatePipelineFailed, BindingCreateFailed))), fromMR(BindingCreateFailed, cancelled, 0)},
		{"an operator closes a request whose pipeline is pending",
			alone(cancel(own(OperationGrant, StepCreatePipelinePending, BindingMRCreated))), fromMR(BindingMRCreated, cancelled, 0)},
		{"an operator closes the stopped driver of a BLOCKED batch",
			inBatch(cancel(own(OperationGrant, StepCreatePipelineFailed, BindingCreateFailed)), 7, BatchBlocked), fromMR(BindingCreateFailed, cancelled, 7)},
		{"an operator's close of a request still running: refused",
			cancel(own(OperationGrant, StepCreatePipelineRunning, BindingMRCreated)), refused(BindingMRCreated)},
		{"an operator's close of a request waiting for its approval: refused",
			cancel(own(OperationGrant, StepCreateApprovalSubmitted, BindingApprovalSent)), refused(BindingApprovalSent)},
		{"an operator's close of a merging batch member: refused",
			cancel(inBatch(own(OperationGrant, StepHandleStarted, BindingMerging), 7, BatchBlocked)), refused(BindingMerging)},
		{"closed by an operator before: already",
			cancel(own(OperationGrant, cancelled, BindingClosed)), already(BindingClosed)},
		{"closed before, its upstream half then failing: already",
			with(cancel(own(OperationGrant, StepCloseFailed, BindingCreateFailed)), func(v *WithdrawView) { v.EndReached = true }),
			already(BindingCreateFailed)},

		// A renewal: the same places in the grant's vocabulary; its CLOSED
		// is the row handed back to its grant.
		{"a renewal waiting for its approval: the row back to its grant",
			own(OperationRenew, StepCreateApprovalSubmitted, BindingRenewing), fromApproval(BindingApprovalSent, BindingValidated, true)},
		{"a renewal in the batch set: out of it, the row back to its grant",
			own(OperationRenew, StepCreateAdmitted, BindingRenewing),
			WithdrawPlan{Outcome: WithdrawApplied, Place: WithdrawFromBatchSet, View: BindingMRCreating, Step: withdrawn, Move: BindingValidated, Restore: true, LeaveBatchSet: true}},
		{"a renewal whose MR is open: only the step moves, the row stays RENEWING",
			alone(own(OperationRenew, StepCreatePipelineRunning, BindingRenewing)), fromMR(BindingMRCreating, withdrawn, 0)},
		{"a renewal stopped on a failure: only the step moves",
			alone(own(OperationRenew, StepCreatePipelineFailed, BindingRenewing)), fromMR(BindingCreateFailed, withdrawn, 0)},
		{"a renewal claimed by a running batch: claimed",
			inBatch(own(OperationRenew, StepCreatePipelineRunning, BindingRenewing), 9, BatchRunning), claimed(BindingMRCreating, 9)},
		{"a renewal in effect: refused",
			own(OperationRenew, StepCalledBack, BindingValidated), refused(BindingValidated)},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Withdraw(c.view)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("Withdraw(%+v)\n got %+v\nwant %+v", c.view, got, c.want)
			}
			if got.Outcome == WithdrawApplied {
				if err := CheckStep(c.view.Step, got.Step); err != nil {
					t.Errorf("the plan's step: %v", err)
				}
			}
		})
	}
}

// TestWithdrawReadsOnlyWhatItNeeds: the history is read only for a
// request of its own at CLOSE_FAILED, the batch membership only for the
// MR place; a plan for the MR place without it is an error, not a guess.
func TestWithdrawReadsOnlyWhatItNeeds(t *testing.T) {
	for _, c := range []struct {
		name            string
		view            WithdrawView
		history, member bool
	}{
		{"waiting for its approval", WithdrawView{Kind: OperationGrant, Step: StepCreateApprovalSubmitted, Binding: BindingApprovalSent, BindingOwned: true}, false, false},
		{"in the batch set", WithdrawView{Kind: OperationGrant, Step: StepCreateAdmitted, Binding: BindingMRCreating, BindingOwned: true}, false, false},
		{"its MR open", WithdrawView{Kind: OperationGrant, Step: StepCreatePipelineRunning, Binding: BindingMRCreated, BindingOwned: true}, false, true},
		{"stopped on a failure", WithdrawView{Kind: OperationGrant, Step: StepCreatePipelineFailed, Binding: BindingCreateFailed, BindingOwned: true}, false, true},
		{"merging a batch's MR", WithdrawView{Kind: OperationGrant, Step: StepHandleStarted, Binding: BindingMerging, BindingOwned: true, Batch: 7}, false, true},
		{"its upstream half failing", WithdrawView{Kind: OperationGrant, Step: StepCloseFailed, Binding: BindingMRCreated, BindingOwned: true, EndReached: true}, true, false},
		{"at CLOSE_FAILED, not its own row", WithdrawView{Kind: OperationGrant, Step: StepCloseFailed, Binding: BindingMRCreated}, false, false},
		{"withdrawn before", WithdrawView{Kind: OperationGrant, Step: StepCloseRequesterWithdrawn, Binding: BindingMRCreated, BindingOwned: true}, false, false},
		{"in effect", WithdrawView{Kind: OperationGrant, Step: StepCalledBack, Binding: BindingValidated, BindingOwned: true}, false, false},
		{"a removal with its MR open", WithdrawView{Kind: OperationRevoke, Step: StepCreateSucceeded, Binding: BindingRevoking, BindingOwned: true}, false, false},
		{"a removal at CLOSE_FAILED", WithdrawView{Kind: OperationRevoke, Step: StepCloseFailed, Binding: BindingRevoking, BindingOwned: true}, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.view.NeedsHistory(); got != c.history {
				t.Errorf("NeedsHistory = %v, want %v", got, c.history)
			}
			if got := c.view.NeedsMembership(); got != c.member {
				t.Errorf("NeedsMembership = %v, want %v", got, c.member)
			}
			if c.member {
				if _, err := Withdraw(c.view); err == nil {
					t.Error("a plan for the MR place without the membership read")
				}
			}
		})
	}
	// A step the table does not let the withdrawal leave.
	v := WithdrawView{Kind: OperationGrant, Step: StepHandleApproved, Binding: BindingMRCreated, BindingOwned: true, Member: &WithdrawMember{}}
	if _, err := Withdraw(v); !errors.Is(err, ErrIllegalTransition) {
		t.Fatalf("Withdraw(%+v) err = %v, want %v", v, err, ErrIllegalTransition)
	}
}
