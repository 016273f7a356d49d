package notify_test

import (
	"testing"

	"changeflow/internal/domain"
	"changeflow/internal/notify"
)

// TestKindOf is the table of which recorded move a person hears of.
func TestKindOf(t *testing.T) {
	const (
		grant  = domain.OperationGrant
		renew  = domain.OperationRenew
		revoke = domain.OperationRevoke
	)
	for _, c := range []struct {
		name string
		m    notify.Move
		want notify.Kind
	}{
		{"a grant's submission", notify.Move{Op: grant, ToStep: domain.StepCreateApprovalSubmitting, To: domain.BindingApprovalSending}, notify.KindRequestSubmitted},
		{"a legacy grant's submission", notify.Move{Op: grant, ToStep: domain.StepCreateStarted, To: domain.BindingMRCreating}, notify.KindRequestSubmitted},
		{"a renewal's submission", notify.Move{Op: renew, ToStep: domain.StepCreateApprovalSubmitting, From: domain.BindingValidated, To: domain.BindingRenewing}, notify.KindRequestSubmitted},
		{"a removal's first row is not a submission", notify.Move{Op: revoke, ToStep: domain.StepRevokeStarted, From: domain.BindingValidated, To: domain.BindingRevoking}, ""},
		{"the approval callback approves (approve-first)", notify.Move{Op: grant, FromStep: domain.StepCreateApprovalSubmitted, ToStep: domain.StepCreateStarted, From: domain.BindingApprovalSent, To: domain.BindingMRCreating, Approval: true}, notify.KindRequestApproved},
		{"the approval callback approves a renewal (no binding move)", notify.Move{Op: renew, FromStep: domain.StepCreateApprovalSubmitted, ToStep: domain.StepCreateAdmitted, Approval: true}, notify.KindRequestApproved},
		{"the same steps without the callback are no approval", notify.Move{Op: grant, FromStep: domain.StepCreateSucceeded, ToStep: domain.StepHandleStarted, From: domain.BindingMRCreated, To: domain.BindingMerging}, ""},
		{"the approval callback rejects", notify.Move{Op: grant, FromStep: domain.StepCreateApprovalSubmitted, ToStep: domain.StepCloseRejected, From: domain.BindingApprovalSent, To: domain.BindingRejected, Approval: true}, notify.KindRequestRejected},
		{"withdrawn in the approval system", notify.Move{Op: grant, FromStep: domain.StepCreateApprovalSubmitted, ToStep: domain.StepCloseWithdrawn, Approval: true}, notify.KindRequestWithdrawn},
		{"withdrawn by the requester", notify.Move{Op: grant, FromStep: domain.StepCreateMRCreated, ToStep: domain.StepCloseRequesterWithdrawn, From: domain.BindingMRCreating, To: domain.BindingClosed}, notify.KindRequestWithdrawn},
		{"the deploy callback: in effect", notify.Move{Op: grant, FromStep: domain.StepHandleMerged, ToStep: domain.StepCalledBack, From: domain.BindingMerged, To: domain.BindingValidated}, notify.KindRequestInEffect},
		{"reconciled: in effect", notify.Move{Op: grant, FromStep: domain.StepHandleMerged, ToStep: domain.StepReconciled, From: domain.BindingMerged, To: domain.BindingValidated}, notify.KindRequestInEffect},
		{"a renewal deployed", notify.Move{Op: renew, FromStep: domain.StepHandleMerged, ToStep: domain.StepCalledBack, From: domain.BindingRenewing, To: domain.BindingValidated}, notify.KindRenewalInEffect},
		{"a renewal ended without effect goes back to its grant: nothing in effect", notify.Move{Op: renew, FromStep: domain.StepCreateApprovalSubmitted, ToStep: domain.StepCloseCancelled, From: domain.BindingRenewing, To: domain.BindingValidated}, ""},
		{"a removal confirmed", notify.Move{Op: revoke, FromStep: domain.StepHandleMerged, ToStep: domain.StepRevokeCalledBack, From: domain.BindingRevoking, To: domain.BindingRevoked}, notify.KindAccessRemoved},
		{"a removal found already done", notify.Move{Op: revoke, FromStep: domain.StepHandleRebasing, ToStep: domain.StepRevokeAbsent, From: domain.BindingRevoking, To: domain.BindingRevoked}, notify.KindAccessRemoved},
		{"a pipeline failed", notify.Move{Op: grant, FromStep: domain.StepCreatePipelineRunning, ToStep: domain.StepCreatePipelineFailed, From: domain.BindingMRCreating, To: domain.BindingCreateFailed}, notify.KindRequestFailed},
		{"a removal failed", notify.Move{Op: revoke, FromStep: domain.StepHandleRebasing, ToStep: domain.StepHandleRebaseConflict, From: domain.BindingRevoking, To: domain.BindingRevokeFailed}, notify.KindRequestFailed},
		{"one failure to the next is told once", notify.Move{Op: grant, FromStep: domain.StepHandleMergeFailed, ToStep: domain.StepHandleApproveFailed,
			From: domain.BindingHandleFailed, To: domain.BindingHandleFailed}, ""},
		{"a batch driver's failed step, its row unmoved, is the batch's", notify.Move{Op: grant, FromStep: domain.StepHandleStarted, ToStep: domain.StepHandleApproveForbidden, Batched: true}, ""},
		{"a batch driver's row that fails is the batch's too", notify.Move{Op: grant, FromStep: domain.StepHandleStarted, ToStep: domain.StepHandleApproveForbidden,
			From: domain.BindingMerging, To: domain.BindingHandleFailed, Batched: true}, ""},
		{"a batch member is still told it is in effect", notify.Move{Op: grant, FromStep: domain.StepHandleMerged, ToStep: domain.StepCalledBack,
			From: domain.BindingMerged, To: domain.BindingValidated, Batched: true}, notify.KindRequestInEffect},
		{"a renewal's failed step (its row stays RENEWING)", notify.Move{Op: renew, FromStep: domain.StepCreatePipelineRunning, ToStep: domain.StepCreatePipelineFailed}, notify.KindRequestFailed},
		{"a batched renewal's failed step is the batch's", notify.Move{Op: renew, FromStep: domain.StepCreatePipelineRunning, ToStep: domain.StepCreatePipelineFailed, Batched: true}, ""},
		{"a step on the way", notify.Move{Op: grant, FromStep: domain.StepCreateBranchCreated, ToStep: domain.StepCreateCommitted}, ""},
		{"merged, waiting for the deployment", notify.Move{Op: grant, FromStep: domain.StepHandleRebasing, ToStep: domain.StepHandleMerged, From: domain.BindingMerging, To: domain.BindingMerged}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := notify.KindOf(c.m); got != c.want {
				t.Fatalf("KindOf = %q, want %q", got, c.want)
			}
			if c.want != "" && !notify.MayTell(c.m) {
				t.Fatal("MayTell = false for a move that tells of an event")
			}
		})
	}
}
