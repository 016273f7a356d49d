package domain

import (
	"errors"
	"slices"
)

// WithdrawPlace is where a request waited when its requester withdrew it;
// it is also the label of changeflow_requests_withdrawn_total.
type WithdrawPlace string

// The places a request can be withdrawn from.
const (
	// WithdrawFromApproval: waiting for its approval (APPROVAL_SENDING or
	// APPROVAL_SENT, either flow). The binding is CLOSED at once; the
	// scheduled action withdraws the approval upstream (and, legacy flow,
	// closes the request's MR).
	WithdrawFromApproval WithdrawPlace = "approval"
	// WithdrawFromBatchSet: approved and waiting in its project's batch
	// waiting set, not yet claimed by a round. Taken out of the set and
	// CLOSED in one transaction; nothing upstream to undo.
	WithdrawFromBatchSet WithdrawPlace = "batch_set"
	// WithdrawFromMR: its single-request MR is being created or checked
	// (MR_CREATING or MR_CREATED, no batch), or it stopped on a failure
	// (CREATE_FAILED or HANDLE_FAILED, no batch), or it is a member of a
	// BLOCKED batch, or the stopped culprit of an ended one (its MR is the
	// batch's). Only the step moves now; the scheduled action closes the
	// MR and then moves the binding — to CLOSED, or to MERGED when the MR
	// turned out merged.
	WithdrawFromMR WithdrawPlace = "mr"
)

// WithdrawOutcome is what a withdrawal found and did.
type WithdrawOutcome int

// The outcomes of a withdrawal. Only WithdrawApplied writes anything.
const (
	// WithdrawApplied: this call withdrew the request (the place says
	// from where).
	WithdrawApplied WithdrawOutcome = iota + 1
	// WithdrawAlready: the request was withdrawn before (its step is
	// CLOSE_REQUESTER_WITHDRAWN, or CLOSE_FAILED after a withdrawal); the
	// answer is its current state.
	WithdrawAlready
	// WithdrawClaimed: a batch round has claimed the request; it goes
	// through that batch's MR and can no longer be taken out.
	WithdrawClaimed
	// WithdrawRefused: the request is past the point of withdrawal or has
	// ended otherwise: merging, merged, in effect, rejected or closed, a
	// revocation — or its binding now belongs to a newer request.
	WithdrawRefused
)

// WithdrawView is what the store read, with the operation and then its
// binding locked, that a withdrawal is decided from. Two parts are read
// only when the decision needs them (NeedsHistory, NeedsMembership), so
// that a withdrawal reads no more than it did when the decision was made
// inside the transaction.
type WithdrawView struct {
	Kind OperationKind
	Step StepStatus
	// Binding is the binding's status; BindingOwned says whether the row
	// exists and is still this operation's (a re-apply gives it to a
	// newer request, which an old one's withdrawal must not touch).
	Binding      BindingStatus
	BindingOwned bool
	// Batch is the operation's batch (0 for none).
	Batch int64
	// Cancel makes this an operator's close of a stopped request rather
	// than the requester's withdrawal.
	Cancel bool
	// EndReached says whether the step history has the step this
	// withdrawal ends at (WithdrawEnd): a CLOSE_FAILED reached after it
	// (the upstream half kept failing) is still withdrawn. Read only when
	// NeedsHistory.
	EndReached bool
	// Member is the request's batch membership, read only when
	// NeedsMembership (nil otherwise).
	Member *WithdrawMember
}

// WithdrawMember is what a withdrawal from the MR place reads of the
// request's batch membership.
type WithdrawMember struct {
	// WaitingBatch is the batch its waiting-set row is claimed by (0: no
	// row, or not claimed).
	WaitingBatch int64
	// Status is the status of the batch the request is a member of
	// (WithdrawView.MemberBatch), read unlocked: settlements lock the
	// batch before its members, and a lock taken after the operation's
	// could deadlock against them. 0 when it is a member of none.
	Status BatchStatus
}

// WithdrawPlan is exactly what a withdrawal writes. Unless Outcome is
// WithdrawApplied nothing is written.
type WithdrawPlan struct {
	Outcome WithdrawOutcome
	// Place is where the request is withdrawn from (WithdrawApplied only).
	Place WithdrawPlace
	// View is the binding's status in the grant's vocabulary
	// (OperationKind.GrantView); "" when the binding is not this
	// operation's.
	View BindingStatus
	// Batch is the claiming batch (WithdrawClaimed), or the batch a
	// member withdrawn from the MR place leaves (BLOCKED, or ended).
	Batch int64
	// Step is the step written: CLOSE_REQUESTER_WITHDRAWN, or an
	// operator's CLOSE_CANCELLED.
	Step StepStatus
	// Move is the binding status to write ("" leaves the row as it is);
	// Restore hands the row back to the grant a renewal renews.
	Move    BindingStatus
	Restore bool
	// LeaveBatchSet: the request is first taken out of the waiting set by
	// the guarded delete of its unclaimed row. When that deletes nothing,
	// a round claimed it first: the withdrawal is WithdrawClaimed instead
	// and writes nothing.
	LeaveBatchSet bool
	// Schedule makes the withdraw action due at once (the approval and MR
	// places: something upstream is to be undone). It pre-empts the lease
	// of a step of the request still running.
	Schedule bool
}

// WithdrawEnd is the step a withdrawal ends at: the requester's
// CLOSE_REQUESTER_WITHDRAWN, or CLOSE_CANCELLED for an operator's close.
func WithdrawEnd(cancel bool) StepStatus {
	if cancel {
		return StepCloseCancelled
	}
	return StepCloseRequesterWithdrawn
}

// mrViews are the grant-vocabulary statuses of the MR place an operator's
// close may take a stopped request from.
var mrViews = []BindingStatus{BindingMRCreating, BindingMRCreated, BindingCreateFailed, BindingHandleFailed}

// NeedsHistory reports whether deciding v needs EndReached read: only a
// request of its own at CLOSE_FAILED may have been withdrawn before (a
// removal is refused whatever its history).
func (v WithdrawView) NeedsHistory() bool {
	return v.BindingOwned && v.Kind != OperationRevoke && v.Step == StepCloseFailed
}

// NeedsMembership reports whether deciding v needs Member read: only a
// withdrawal from the MR place asks whether a batch holds the request.
func (v WithdrawView) NeedsMembership() bool {
	out, place := v.place()
	return out == WithdrawApplied && place == WithdrawFromMR
}

// MemberBatch is the batch the request is a member of (0 for none): the
// one its waiting-set row was claimed by, or the one the operation
// follows.
func (v WithdrawView) MemberBatch() int64 {
	if v.Member == nil {
		return v.Batch
	}
	return max(v.Member.WaitingBatch, v.Batch)
}

// stopped says whether the request stopped where the withdrawal may take
// it from the MR place: on a failure or, for an operator's close, in a
// pending step too. A revocation never gets here (place refuses it).
func (v WithdrawView) stopped(view BindingStatus) bool {
	return CheckStep(v.Step, WithdrawEnd(v.Cancel)) == nil &&
		(view == BindingCreateFailed || view == BindingHandleFailed || v.Cancel && v.Step.Stopped())
}

// place is where v is withdrawn from before its batch membership is
// known: WithdrawApplied with the place, or the outcome that ends the
// decision at once (refused, withdrawn before).
func (v WithdrawView) place() (WithdrawOutcome, WithdrawPlace) {
	if !v.BindingOwned {
		return WithdrawRefused, "" // an old request: its binding belongs to a newer one
	}
	if v.Kind == OperationRevoke {
		// A removal of access, whoever started it: withdrawn, its entry
		// would stay on the default branch with nothing left to remove
		// it. Refused before the places are told apart, because its
		// binding read in the grant's vocabulary looks like a grant's
		// MR place (MR_CREATING, MR_CREATED, MERGING).
		return WithdrawRefused, ""
	}
	if v.Step == WithdrawEnd(v.Cancel) || v.Step == StepCloseFailed && v.EndReached {
		return WithdrawAlready, ""
	}
	view := v.Kind.GrantView(v.Binding, v.Step)
	stopped := v.stopped(view)
	switch {
	case v.Cancel && !(stopped && slices.Contains(mrViews, view)):
		return WithdrawRefused, "" // an operator closes only a stopped request
	case view == BindingApprovalSending || view == BindingApprovalSent:
		return WithdrawApplied, WithdrawFromApproval
	case view == BindingMRCreating && v.Step == StepCreateAdmitted:
		return WithdrawApplied, WithdrawFromBatchSet
	case view == BindingMRCreating || view == BindingMRCreated, stopped,
		// A batch member following its batch into handling: only a
		// BLOCKED batch lets it go (Withdraw); a merging request of its
		// own, or of a running batch, never.
		view == BindingMerging && v.Batch != 0 && !v.Cancel:
		return WithdrawApplied, WithdrawFromMR
	}
	return WithdrawRefused, ""
}

// Withdraw decides what withdrawing the request in state v writes:
//
//  1. a binding owned by another (newer) request, or none, is refused;
//     so is a revocation (the removal of an access: a give-back, the
//     expiry scan's, an operator's) at any step, stopped or not — a
//     removal goes on until the entry is gone, nobody withdraws it;
//  2. a request withdrawn before is WithdrawAlready (idempotent);
//  3. APPROVAL_SENDING / APPROVAL_SENT: binding CLOSED, the withdraw
//     action due — a late approval callback then finds the binding out
//     of its waiting set (stale);
//  4. MR_CREATING at CREATE_ADMITTED: out of the batch waiting set by the
//     guarded delete of its unclaimed row, binding CLOSED, nothing due —
//     or claimed, should a round have marked the row first;
//  5. MR_CREATING / MR_CREATED with no batch: the single-request MR
//     path. Only the step moves, the action due: the binding stays where
//     it is, not re-appliable, until the action has closed the MR — had
//     it moved to CLOSED now, a new request could take the row before the
//     action learns that the MR was merged by hand meanwhile, and "merged
//     wins" would have nothing to follow;
//  6. CREATE_FAILED / HANDLE_FAILED (a grant or a renewal stopped on a
//     failure), from a step the table lets the withdrawal leave: as 5;
//  7. a member of a batch in place 5 or 6, or following its batch at
//     MERGING, leaves it only when its batch is BLOCKED, or has ended with
//     the member stopped on a failure: then as 5, the action settling a
//     BLOCKED batch without it first; else WithdrawClaimed;
//  8. anything else is refused.
//
// An operator's close (Cancel) takes only places 5 and 6, and of 5 only
// a stopped step (a pending pipeline or rebase), ending CLOSE_CANCELLED
// instead; anything else is refused.
//
// A renewal (docs/flows/lifecycle.md, "Renewal") is read in the grant's
// vocabulary (its binding shows RENEWING throughout:
// OperationKind.GrantView). Where a grant's binding would move to CLOSED,
// the renewal's goes back to the grant it renews
// (OperationKind.EndsWithoutEffect), so the access in effect is exactly
// what it was.
//
// Its errors wrap ErrIllegalTransition: a move the tables do not allow.
func Withdraw(v WithdrawView) (WithdrawPlan, error) {
	out, place := v.place()
	p := WithdrawPlan{Outcome: out}
	if v.BindingOwned {
		p.View = v.Kind.GrantView(v.Binding, v.Step)
	}
	if out != WithdrawApplied {
		return p, nil
	}
	end := WithdrawEnd(v.Cancel)
	to := BindingClosed // in the grant's vocabulary, mapped per kind below
	switch place {
	case WithdrawFromBatchSet:
		p.LeaveBatchSet = true
	case WithdrawFromApproval:
		p.Schedule = true
	case WithdrawFromMR:
		if v.Member == nil {
			return WithdrawPlan{}, errors.New("withdraw from the MR place: batch membership not read")
		}
		if id := v.MemberBatch(); id != 0 {
			// A BLOCKED batch waits for a person, and the withdraw action
			// settles it without this member; an ended one left the
			// member stopped on its own failure. A RUNNING batch keeps its
			// members: its MR may be merging.
			letsGo := v.Member.Status == BatchBlocked || !v.Member.Status.Active() && v.stopped(p.View)
			if !letsGo || CheckStep(v.Step, end) != nil {
				return WithdrawPlan{Outcome: WithdrawClaimed, View: p.View, Batch: id}, nil
			}
			p.Batch = id
		}
		to, p.Schedule = v.Binding, true
	}
	if err := CheckStep(v.Step, end); err != nil {
		return WithdrawPlan{}, err
	}
	p.Place, p.Step = place, end
	if move := v.Kind.Binding(to); move != v.Binding {
		if err := CheckBinding(v.Binding, move); err != nil {
			return WithdrawPlan{}, err
		}
		p.Move, p.Restore = move, v.Kind.EndsWithoutEffect(to)
	}
	return p, nil
}
