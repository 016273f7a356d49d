package domain

import "testing"

func TestPlanWithdrawAction(t *testing.T) {
	const withdrawn = StepCloseRequesterWithdrawn
	with := func(v WithdrawActionView, f func(*WithdrawActionView)) WithdrawActionView { f(&v); return v }
	// approvalGone is a request withdrawn while it waited for its
	// approval: the guarded write has CLOSED its binding already.
	approvalGone := WithdrawActionView{Kind: OperationGrant, Step: withdrawn, Binding: BindingClosed}
	// mrOpen is a request withdrawn from the MR place: its binding waits
	// for the MR to be closed.
	mrOpen := WithdrawActionView{Kind: OperationGrant, Step: withdrawn, Binding: BindingMRCreated, HasMR: true}
	// cut is a renewal cut off by its grant's expiry with its own MR
	// being checked: its row still shows RENEWING.
	cut := WithdrawActionView{Kind: OperationRenew, Step: StepRenewExpired, Binding: BindingRenewing, HasMR: true}
	closeMR := func(end StepStatus, leave, counted bool) WithdrawActionPlan {
		return WithdrawActionPlan{End: end, CloseMR: true, LeaveBatch: leave, Binding: BindingClosed, Counted: counted, FollowMerge: true}
	}
	withApproval := func(p WithdrawActionPlan, waited bool) WithdrawActionPlan {
		p.WithdrawApproval, p.ApprovalWaited = true, waited
		return p
	}
	for _, c := range []struct {
		name string
		view WithdrawActionView
		want WithdrawActionPlan
	}{
		// Withdrawn while waiting for the approval.
		{"approve-first, waiting for its approval: withdraw the approval, nothing else",
			approvalGone, WithdrawActionPlan{End: withdrawn, WithdrawApproval: true}},
		{"approval not found once: the second look takes it as never submitted",
			with(approvalGone, func(v *WithdrawActionView) { v.Waited = true }),
			WithdrawActionPlan{End: withdrawn, WithdrawApproval: true, ApprovalWaited: true}},
		{"legacy flow, its MR open while it waits for its approval: the approval, then the MR; a merge is not followed",
			with(approvalGone, func(v *WithdrawActionView) { v.Legacy, v.HasMR, v.HasApproval = true, true, true }),
			WithdrawActionPlan{End: withdrawn, WithdrawApproval: true, CloseMR: true}},
		{"its binding re-applied by a newer request: the approval place",
			with(approvalGone, func(v *WithdrawActionView) { v.Binding = "" }),
			WithdrawActionPlan{End: withdrawn, WithdrawApproval: true}},

		// Withdrawn from the MR place.
		{"its MR open: close it, then CLOSED, counted",
			mrOpen, closeMR(withdrawn, false, true)},
		{"its MR being created, none recorded: close what create_mr opened",
			with(mrOpen, func(v *WithdrawActionView) { v.Binding, v.HasMR = BindingMRCreating, false }), closeMR(withdrawn, false, true)},
		{"stopped on a failure: close its MR if it has one",
			with(mrOpen, func(v *WithdrawActionView) { v.Binding = BindingHandleFailed }), closeMR(withdrawn, false, true)},
		{"an approval recorded on the legacy flow: a requester's withdrawal in the MR place leaves it",
			with(mrOpen, func(v *WithdrawActionView) { v.Legacy, v.HasApproval = true, true }), closeMR(withdrawn, false, true)},
		{"a member of a BLOCKED batch: leave the batch first",
			with(mrOpen, func(v *WithdrawActionView) { v.Binding, v.InBatch = BindingCreateFailed, true }), closeMR(withdrawn, true, true)},
		{"a member following its batch into merging: leave the batch first",
			with(mrOpen, func(v *WithdrawActionView) { v.Binding, v.InBatch = BindingMerging, true }), closeMR(withdrawn, true, true)},
		{"a renewal whose MR is open, withdrawn by its requester: counted",
			with(mrOpen, func(v *WithdrawActionView) { v.Kind, v.Binding = OperationRenew, BindingRenewing }), closeMR(withdrawn, false, true)},

		// An operator's close, and its retrigger.
		{"an operator's close: CLOSE_CANCELLED, not counted",
			with(mrOpen, func(v *WithdrawActionView) { v.Step, v.Binding = StepCloseCancelled, BindingCreateFailed }),
			closeMR(StepCloseCancelled, false, false)},
		{"an operator's close of a request with an approval: withdraw it too",
			with(mrOpen, func(v *WithdrawActionView) {
				v.Step, v.Binding, v.HasApproval = StepCloseCancelled, BindingCreateFailed, true
			}),
			withApproval(closeMR(StepCloseCancelled, false, false), true)},
		{"a close that kept failing, retriggered: ends CLOSE_CANCELLED again",
			with(mrOpen, func(v *WithdrawActionView) { v.Step, v.Cancelled = StepCloseFailed, true }),
			closeMR(StepCloseCancelled, false, false)},
		{"a withdrawal that kept failing, retriggered: ends withdrawn, counted",
			with(mrOpen, func(v *WithdrawActionView) { v.Step = StepCloseFailed }), closeMR(withdrawn, false, true)},

		// A renewal's cut-off: the step that began it stays.
		{"a renewal cut off with its MR being checked: close it, not counted",
			cut, closeMR(StepRenewExpired, false, false)},
		{"a cut renewal with its approval recorded: withdraw it, then close the MR",
			with(cut, func(v *WithdrawActionView) { v.HasApproval = true }), withApproval(closeMR(StepRenewExpired, false, false), true)},
		{"a legacy renewal cut after it asked for its approval: look it up once more before none",
			with(cut, func(v *WithdrawActionView) { v.Legacy, v.Asked = true, true }), withApproval(closeMR(StepRenewExpired, false, false), false)},
		{"a legacy renewal cut after it asked, looked up once: none",
			with(cut, func(v *WithdrawActionView) { v.Legacy, v.Asked, v.Waited = true, true, true }), withApproval(closeMR(StepRenewExpired, false, false), true)},
		{"a legacy renewal cut before it asked: no approval to wait for",
			with(cut, func(v *WithdrawActionView) { v.Legacy = true }), closeMR(StepRenewExpired, false, false)},
		{"a renewal cut while waiting for its approval: its row back with its grant, the approval withdrawn",
			WithdrawActionView{Kind: OperationRenew, Step: StepRenewRevoked},
			WithdrawActionPlan{End: StepRenewRevoked, WithdrawApproval: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := PlanWithdrawAction(c.view); got != c.want {
				t.Fatalf("PlanWithdrawAction(%+v)\n got %+v\nwant %+v", c.view, got, c.want)
			}
		})
	}
}

// TestWithdrawActionReadsOnlyWhatItNeeds: the history is read for a
// retriggered close, and for a legacy renewal cut in the MR place with no
// approval recorded — nothing else makes the action read it.
func TestWithdrawActionReadsOnlyWhatItNeeds(t *testing.T) {
	for _, c := range []struct {
		name          string
		view          WithdrawActionView
		close, submit bool
	}{
		{"a retriggered close", WithdrawActionView{Kind: OperationGrant, Step: StepCloseFailed, Binding: BindingMRCreated}, true, false},
		{"a requester's withdrawal", WithdrawActionView{Kind: OperationGrant, Step: StepCloseRequesterWithdrawn, Binding: BindingMRCreated, Legacy: true}, false, false},
		{"a legacy renewal cut, no approval recorded", WithdrawActionView{Kind: OperationRenew, Step: StepRenewExpired, Binding: BindingRenewing, Legacy: true}, false, true},
		{"a legacy renewal cut, its approval recorded", WithdrawActionView{Kind: OperationRenew, Step: StepRenewExpired, Binding: BindingRenewing, Legacy: true, HasApproval: true}, false, false},
		{"an approve-first renewal cut", WithdrawActionView{Kind: OperationRenew, Step: StepRenewExpired, Binding: BindingRenewing}, false, false},
		{"a legacy renewal cut while waiting for its approval", WithdrawActionView{Kind: OperationRenew, Step: StepRenewExpired, Legacy: true}, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.view.NeedsCloseHistory(); got != c.close {
				t.Errorf("NeedsCloseHistory = %v, want %v", got, c.close)
			}
			if got := c.view.NeedsSubmitHistory(); got != c.submit {
				t.Errorf("NeedsSubmitHistory = %v, want %v", got, c.submit)
			}
		})
	}
}
