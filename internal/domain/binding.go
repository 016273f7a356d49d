package domain

// BindingStatus is the external state of a (subject, target) binding: the
// coarse phase users see and the "may I re-apply" decision reads
// (docs/workflow.md, "Two layers of state"). Stored by name, guarded by a CHECK constraint.
type BindingStatus string

// The binding states. Each comment says who moves a row in and out.
const (
	// BindingApprovalSending: written by submission just before the approval
	// system is called; left when the call returns (SENT) or a callback
	// arrives first (the callback guard accepts SENDING).
	BindingApprovalSending BindingStatus = "APPROVAL_SENDING"
	// BindingApprovalSent: the approval system has the request; left by the
	// approval callback.
	BindingApprovalSent BindingStatus = "APPROVAL_SENT"
	// BindingMRCreating: branch, commit and MR are being created (alone or
	// as a member of a batch) and the check pipeline runs.
	BindingMRCreating BindingStatus = "MR_CREATING"
	// BindingMRCreated: the MR exists and its check pipeline passed.
	BindingMRCreated BindingStatus = "MR_CREATED"
	// BindingMerging: bot approvals and merge (with rebase) are under way.
	BindingMerging BindingStatus = "MERGING"
	// BindingMerged: merged; waits for the deploy callback or reconciliation.
	BindingMerged BindingStatus = "MERGED"
	// BindingValidated: the deployment reported the change in effect. Terminal
	// until it expires.
	BindingValidated BindingStatus = "VALIDATED"
	// BindingCreateFailed: creating the MR or its pipeline failed; awaits an
	// operator (re-trigger) and may not be overwritten meanwhile.
	BindingCreateFailed BindingStatus = "CREATE_FAILED"
	// BindingHandleFailed: approving or merging failed; awaits an operator.
	BindingHandleFailed BindingStatus = "HANDLE_FAILED"
	// BindingRejected: the approval was rejected or withdrawn. Re-appliable.
	BindingRejected BindingStatus = "REJECTED"
	// BindingClosed: the request was closed (MR closed, expired, cancelled).
	// Re-appliable.
	BindingClosed BindingStatus = "CLOSED"
	// BindingRevoking: the access is being removed. Written (from
	// VALIDATED) by the transaction that creates the revocation — the
	// expiry scan, the owner giving access back, an operator — which also
	// makes the revocation the row's owner, so a late callback of the grant
	// is stale. For the removal of an entry changeflow did not write (an
	// access review's, StartRepoRemoval) it is the row's first state, or
	// follows one at rest (REJECTED, CLOSED, REVOKED). The row stays here while the removal's MR is created,
	// checked, approved and merged; left for REVOKED when the deployment
	// confirms the merge, or REVOKE_FAILED.
	BindingRevoking BindingStatus = "REVOKING"
	// BindingRevoked: the entry is gone from the file on the default branch
	// and the deployment confirmed it (deploy callback or reconciliation),
	// or it was already gone. Re-appliable: a person may ask again.
	BindingRevoked BindingStatus = "REVOKED"
	// BindingRevokeFailed: the removal stopped on a failure a person must
	// look at (its MR's pipeline failed, a bot may not approve, …). The
	// entry is still on the default branch: the access is still granted.
	// Left by an operator's retrigger (back to REVOKING).
	BindingRevokeFailed BindingStatus = "REVOKE_FAILED"
	// BindingRenewing: the access is in effect and a renewal of it is
	// under way (docs/flows/lifecycle.md, "Renewal"). Written (from VALIDATED) by
	// the submission that accepts a renewal inside the renewal window,
	// which hands the row to the renewal's operationId; the expiry and the
	// entry on the default branch stay the grant's until the renewal is
	// deployed. Left for VALIDATED — with the renewal's expiry once it is
	// deployed, or back to the grant, unchanged, when it is rejected or
	// closed — or for REVOKING when the grant expires before the renewal
	// was approved (expiry wins).
	BindingRenewing BindingStatus = "RENEWING"
)

// BindingStatuses lists every binding state, in lifecycle order. Migrations'
// CHECK constraints and the docs are checked against it in tests.
var BindingStatuses = []BindingStatus{
	BindingApprovalSending, BindingApprovalSent, BindingMRCreating, BindingMRCreated,
	BindingMerging, BindingMerged, BindingValidated, BindingCreateFailed,
	BindingHandleFailed, BindingRejected, BindingClosed,
	BindingRevoking, BindingRevoked, BindingRevokeFailed, BindingRenewing,
}

// Reappliable reports whether a binding in status s may be reset in place
// by a new request (I5). This is the single definition the data layer and
// the API both use: REJECTED, CLOSED and REVOKED. A failed row awaiting
// manual recovery (REVOKE_FAILED included) is deliberately not
// re-appliable, since replacing its operationId would orphan the recovery
// attached to it; nor is REVOKING, whose removal is under way.
func (s BindingStatus) Reappliable() bool {
	return s == BindingRejected || s == BindingClosed || s == BindingRevoked
}

// Valid reports whether s is one of the known states.
func (s BindingStatus) Valid() bool {
	for _, k := range BindingStatuses {
		if s == k {
			return true
		}
	}
	return false
}

// BatchStatus is the state of a merge batch, stored as small integer
// codes because the generated active_slot column tests them numerically.
type BatchStatus int

// Batch states. RUNNING and BLOCKED occupy the project's single active slot
// (I1); SUCCEEDED and FAILED release it by the same UPDATE that enters them.
const (
	// BatchRunning: claimed by a round; its MR is being created, checked,
	// approved and merged. Left by success, failure settlement or the
	// timeout sweep.
	BatchRunning BatchStatus = 1
	// BatchSucceeded: its MR merged. Terminal.
	BatchSucceeded BatchStatus = 2
	// BatchFailed: settled as failed; members were reset for re-admission.
	// Terminal.
	BatchFailed BatchStatus = 3
	// BatchBlocked: needs a person; keeps the slot until an operator
	// settles it.
	BatchBlocked BatchStatus = 4
)

// Active reports whether the batch holds its project's slot.
func (s BatchStatus) Active() bool { return s == BatchRunning || s == BatchBlocked }

// String returns the state's name.
func (s BatchStatus) String() string {
	switch s {
	case BatchRunning:
		return "RUNNING"
	case BatchSucceeded:
		return "SUCCEEDED"
	case BatchFailed:
		return "FAILED"
	case BatchBlocked:
		return "BLOCKED"
	}
	return "UNKNOWN"
}
