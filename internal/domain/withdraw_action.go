package domain

// WithdrawActionView is what the withdraw action — the upstream half of a
// withdrawal, an operator's close or a renewal's cut-off — reads before
// it calls out. Two parts are read only when the plan needs them
// (NeedsCloseHistory, NeedsSubmitHistory).
type WithdrawActionView struct {
	Kind OperationKind
	Step StepStatus
	// Binding is the status of the binding the operation owns; "" when it
	// owns none any more (a renewal's row back with its grant or taken by
	// a revocation, or re-applied by a newer request).
	Binding BindingStatus
	// InBatch: the operation is a member of a batch; Legacy: it is on the
	// legacy flow (the MR before the approval); HasApproval and HasMR: an
	// approval id and an MR are recorded.
	InBatch, Legacy, HasApproval, HasMR bool
	// Waited: the action has already waited once for an approval or MR it
	// did not find (a step the withdrawal pre-empted may still have been
	// creating it).
	Waited bool
	// Cancelled says whether the step history has CLOSE_CANCELLED: a
	// close that kept failing, retriggered, ends where it began. Read only
	// when NeedsCloseHistory.
	Cancelled bool
	// Asked says whether the step history shows the request asking for
	// its approval (CREATE_APPROVAL_SUBMITTING). Read only when
	// NeedsSubmitHistory.
	Asked bool
}

// WithdrawActionPlan is what the withdraw action does upstream, in this
// order: withdraw the approval, leave the batch, close the MR, then
// write End (and Binding).
type WithdrawActionPlan struct {
	// End is the step the action ends at: the requester's
	// CLOSE_REQUESTER_WITHDRAWN, or the step that began it and says why it
	// ended (RENEW_EXPIRED, RENEW_REVOKED, an operator's CLOSE_CANCELLED).
	End StepStatus
	// WithdrawApproval withdraws the approval upstream first;
	// ApprovalWaited says whether an approval not found by the
	// operationId is taken as never submitted (true) or looked up once
	// more after a wait.
	WithdrawApproval, ApprovalWaited bool
	// CloseMR closes the request's MR (found by its branch when none is
	// recorded); false ends the action after the approval.
	CloseMR bool
	// LeaveBatch settles a batch still active without the member before
	// its MR — the batch's — is closed.
	LeaveBatch bool
	// Binding is the binding status written with End ("" leaves it): the
	// MR place's CLOSED, once the MR is closed (a renewal's is mapped at
	// the store edge: the row back to its grant).
	Binding BindingStatus
	// Counted: the withdrawal is counted as a requester's, from the MR
	// place, once the binding's flip commits. A renewal's cut-off and an
	// operator's close are not.
	Counted bool
	// FollowMerge: the request was withdrawn from the MR place, so an MR
	// found merged is followed (merged wins: the request goes on to
	// MERGED). Otherwise it waited for its approval — legacy flow — and a
	// merged MR is a failure: nothing of changeflow merges an MR before
	// its approval.
	FollowMerge bool
}

// mrPlace says whether v's binding is still in the MR place: its MR is
// being created or checked, it stopped on a failure, it follows its batch
// into merging, or a renewal's row still shows RENEWING.
func (v WithdrawActionView) mrPlace() bool {
	switch v.Binding {
	case BindingMRCreating, BindingMRCreated, BindingCreateFailed, BindingHandleFailed:
		return true
	case BindingMerging:
		return v.InBatch
	case BindingRenewing:
		return v.Kind == OperationRenew
	}
	return false
}

// NeedsCloseHistory reports whether planning v needs Cancelled read.
func (v WithdrawActionView) NeedsCloseHistory() bool { return v.Step == StepCloseFailed }

// NeedsSubmitHistory reports whether planning v needs Asked read: on the
// legacy flow with no approval recorded, only a request that asked for
// its approval can have one upstream it has not recorded — a renewal cut
// while its MR was still being built or checked has none, and is not
// made to wait for one.
func (v WithdrawActionView) NeedsSubmitHistory() bool {
	return v.mrPlace() && v.end() != StepCloseRequesterWithdrawn && v.Legacy && !v.HasApproval
}

// end is the step the action ends at.
func (v WithdrawActionView) end() StepStatus {
	switch v.Step {
	case StepRenewExpired, StepRenewRevoked, StepCloseCancelled:
		return v.Step
	case StepCloseFailed:
		if v.Cancelled {
			return StepCloseCancelled
		}
	}
	return StepCloseRequesterWithdrawn
}

// PlanWithdrawAction decides what the withdraw action does upstream for
// the request in state v. Where the request waited is read from its
// binding: still in the MR place (MR_CREATING, MR_CREATED, stopped on a
// failure, a batch member at MERGING; a renewal's still RENEWING) — its
// MR is open or was never opened: close it, and then write the binding;
// anything else — it waited for its approval: withdraw that, and on the
// legacy flow close its MR too.
//
// A renewal cut off by its grant's end (RENEW_EXPIRED, RENEW_REVOKED) in
// the MR place may still have an undecided approval upstream — the legacy
// flow asks for it while the MR waits, and a stopped renewal stopped
// submitting it: that is withdrawn too, so nobody is asked to decide on
// it any more. On the legacy flow with none recorded, a submit_approval
// the cut pre-empted may still be in its call: it is looked up by the
// operationId, after one wait when not found, as for a requester's
// withdrawal.
func PlanWithdrawAction(v WithdrawActionView) WithdrawActionPlan {
	p := WithdrawActionPlan{End: v.end()}
	if !v.mrPlace() {
		p.WithdrawApproval, p.ApprovalWaited, p.CloseMR = true, v.Waited, v.HasMR
		return p
	}
	legacySubmit := v.NeedsSubmitHistory() && v.Asked
	if p.End != StepCloseRequesterWithdrawn && (v.HasApproval || legacySubmit) {
		p.WithdrawApproval, p.ApprovalWaited = true, v.Waited || !legacySubmit
	}
	p.CloseMR, p.LeaveBatch, p.Binding, p.FollowMerge = true, v.InBatch, BindingClosed, true
	p.Counted = p.End == StepCloseRequesterWithdrawn
	return p
}
