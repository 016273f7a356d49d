package domain

import (
	"fmt"
	"slices"
	"strconv"
)

// StepStatus is the internal state of an operation: the exact step a request
// stopped at, for troubleshooting and metrics (docs/workflow.md, "Two layers of state"). Codes are allocated
// in ranges by phase so metrics aggregate by prefix (code / 100): creation
// 100xx, handling 101xx, closing 102xx, callbacks 103xx, pending or unknown
// outcomes 105xx, revocation 106xx, renewal 107xx. Stored as the integer in operation.step_status.
type StepStatus int

// StepNone is "no step yet": the from-state of an operation's first write.
const StepNone StepStatus = 0

// Creation phase (100xx): the MR is created and checked, and the approval is
// submitted. "The workflow" below is the durable engine running the named
// action (internal/workflow); "an operator" is a retrigger.
const (
	// StepCreateStarted: written by submission (legacy flow) or by the
	// approval callback (approve-first, no batching); the create_mr action is
	// due. Left by the create step (branch, commit or MR written) or its
	// declared failure.
	StepCreateStarted StepStatus = 10001
	// StepCreateSucceeded: the MR exists and its check pipeline passed
	// (binding MR_CREATED). Left by the next action: the approval submit
	// (legacy) or the handle step (approve-first).
	StepCreateSucceeded StepStatus = 10002
	// StepCreateFailed: the create step's declared failure (an error or a
	// panic the step did not classify; binding CREATE_FAILED). Left only by
	// an operator's retrigger or cancel.
	StepCreateFailed StepStatus = 10003
	// StepCreatePipelineFailed: the MR's check pipeline failed — deterministic,
	// the same MR fails again (binding CREATE_FAILED). Left by an operator.
	StepCreatePipelineFailed StepStatus = 10004
	// StepCreateBranchCreated: the create step wrote the deterministic branch;
	// left by the same step once the commit is on it.
	StepCreateBranchCreated StepStatus = 10005
	// StepCreateCommitted: the change is committed on the branch; left by the
	// same step once the MR is open.
	StepCreateCommitted StepStatus = 10006
	// StepCreateMRCreated: the MR is open; the check pipeline poll is due.
	// Left by the poll (running, passed, failed) or the create failure.
	StepCreateMRCreated StepStatus = 10007
	// StepCreatePipelineRunning: the check pipeline runs and is polled in
	// tiers; left by passed, failed or timed out.
	StepCreatePipelineRunning StepStatus = 10008
	// StepCreatePoolRejected: the worker pool refused a creation-phase action,
	// persisted so pollers see a failure; binding CREATE_FAILED.
	// Left by an operator's retrigger (next_action still names the action).
	StepCreatePoolRejected StepStatus = 10009
	// StepCreateApprovalSubmitting: the approval submit is due (binding
	// APPROVAL_SENDING): written by submission (approve-first) or after the
	// pipeline passed (legacy). Left by the submit step or an early callback.
	StepCreateApprovalSubmitting StepStatus = 10010
	// StepCreateApprovalSubmitted: the approval system has the request
	// (binding APPROVAL_SENT); left by the approval callback.
	StepCreateApprovalSubmitted StepStatus = 10011
	// StepCreateApprovalFailed: submitting the approval failed (binding
	// CREATE_FAILED); left by an operator.
	StepCreateApprovalFailed StepStatus = 10012
	// StepCreateAdmitted: approved, admitted to the batch waiting set
	// (binding MR_CREATING); left when a batch round claims it (next issue).
	StepCreateAdmitted StepStatus = 10013
)

// Handling phase (101xx): bot approvals, merge, rebase.
const (
	// StepHandleStarted: the approval was granted and the MR exists; the
	// approve action is due (binding MERGING). Written by the approval
	// callback (legacy) or after creation (approve-first). Left by the
	// approve step.
	StepHandleStarted StepStatus = 10101
	// StepHandleApproved: both bots approved; the merge action is due. Left by
	// the merge step (merged, rebase, failure).
	StepHandleApproved StepStatus = 10102
	// StepHandleApproveFailed: bot approval failed after its retries (binding
	// HANDLE_FAILED); left by an operator.
	StepHandleApproveFailed StepStatus = 10103
	// StepHandleApproveForbidden: a bot got 403 — a permission problem that
	// retrying will not fix (binding HANDLE_FAILED); left by an operator.
	StepHandleApproveForbidden StepStatus = 10104
	// StepHandleRebaseConflict: the rebase reported conflicts (binding
	// HANDLE_FAILED); deterministic, left by an operator.
	StepHandleRebaseConflict StepStatus = 10105
	// StepHandleRebasing: a merge failed and a rebase was requested; the
	// rebase poll is due. Left by the poll.
	StepHandleRebasing StepStatus = 10106
	// StepHandleMergeFailed: merging failed (binding HANDLE_FAILED), the merge
	// step's declared failure; left by an operator.
	StepHandleMergeFailed StepStatus = 10107
	// StepHandleMerged: merged (binding MERGED); left by the deploy callback
	// or reconciliation.
	StepHandleMerged StepStatus = 10108
	// StepHandlePipelineRunning: after a rebase the MR's pipeline runs and is
	// polled; left by passed (back to HANDLE_APPROVED), failed or timed out.
	StepHandlePipelineRunning StepStatus = 10109
	// StepHandlePipelineFailed: the pipeline after a rebase failed (binding
	// HANDLE_FAILED); deterministic, left by an operator.
	StepHandlePipelineFailed StepStatus = 10110
	// StepHandlePoolRejected: the worker pool refused a handling-phase
	// action (binding HANDLE_FAILED); left by an operator's retrigger.
	StepHandlePoolRejected StepStatus = 10111
)

// Closing phase (102xx): rejection, withdrawal, MR closing, expiry.
const (
	// StepCloseRejected: the approval was rejected (binding REJECTED); the
	// legacy flow's close_mr action is due. Left by the close step.
	StepCloseRejected StepStatus = 10201
	// StepCloseWithdrawn: the approval was withdrawn (binding REJECTED); as
	// CLOSE_REJECTED.
	StepCloseWithdrawn StepStatus = 10202
	// StepCloseMRClosed: the request's MR is closed (or was already closed or
	// merged when read). Terminal.
	StepCloseMRClosed StepStatus = 10203
	// StepCloseFailed: closing the MR failed; the binding stays REJECTED or
	// CLOSED (re-appliable), the MR stays open. Left by an operator.
	StepCloseFailed StepStatus = 10204
	// StepCloseCancelled: an operator gave up on a failed request (binding
	// CLOSED); the close_mr action is due when an MR exists.
	StepCloseCancelled StepStatus = 10205
	// StepCloseExpired: the binding lapsed (VALIDATED → CLOSED). Terminal.
	StepCloseExpired StepStatus = 10206
	// StepCloseRequesterWithdrawn: the requester withdrew the request
	// before it took effect (POST /api/requests/{id}/withdraw, binding
	// CLOSED). Its own code rather than CLOSE_WITHDRAWN, which is the
	// approval system's WITHDRAWN decision and ends REJECTED: here the
	// requester acted, the binding ends CLOSED, and the step stays the
	// marker of who ended it. Written by the withdrawal's guarded write
	// (waiting for approval: binding CLOSED at once, the withdraw action
	// then withdraws the approval upstream; waiting in the batch set:
	// taken out, nothing due) or, for an open single-request MR, with the
	// binding left where it was until the withdraw action closed the MR.
	// The withdraw action rewrites it (same step) when done; it leaves it
	// for HANDLE_MERGED when the MR turned out merged ("merged wins") and
	// for CLOSE_FAILED when the upstream call kept failing.
	StepCloseRequesterWithdrawn StepStatus = 10207
)

// Callback phase (103xx): the deployment reported the change in effect.
const (
	// StepCalledBack: the deploy callback arrived (binding VALIDATED), written
	// by BindingMarkValidated, which also repairs a lagging step to it.
	// Left only by expiry.
	StepCalledBack StepStatus = 10301
	// StepReconciled: reconciliation inferred the lost deploy callback
	// (binding VALIDATED). A late real callback repairs it to CALLED_BACK.
	StepReconciled StepStatus = 10302
)

// Pending or unknown outcomes (105xx): the workflow stopped without knowing
// the result; a person confirms. The binding stays where it was.
const (
	// StepHandlePipelinePending: the pipeline poll after a rebase timed out
	// (timeout is not failure). Left by an operator or a GitLab
	// pipeline webhook.
	StepHandlePipelinePending StepStatus = 10501
	// StepHandleMergeUnknown: the merge answer was lost and reading the MR
	// back did not settle it. Left by an operator (retrigger reads first).
	StepHandleMergeUnknown StepStatus = 10502
	// StepHandleRebasePending: the rebase poll timed out. Left by an operator.
	StepHandleRebasePending StepStatus = 10503
	// StepCreatePipelinePending: the check pipeline poll timed out. Left by an
	// operator or a GitLab pipeline webhook.
	StepCreatePipelinePending StepStatus = 10504
)

// Revocation phase (106xx): the removal of a grant's entry. Between its
// first and its last step a revocation runs the grant's own create and
// handle steps on its MR (single-request or batch), with the binding at
// REVOKING (OperationKind.Binding).
const (
	// StepRevokeStarted: the revocation was created (expiry scan, give
	// back, operator) in one transaction with the binding's move VALIDATED
	// → REVOKING. A target without batching has create_mr due (it builds a
	// removal); a batching target moves on at once, in the same
	// transaction, to CREATE_ADMITTED in the project's waiting set.
	StepRevokeStarted StepStatus = 10601
	// StepRevokeCalledBack: the deploy callback confirmed the merged
	// removal (binding REVOKED), written by BindingMarkValidated for a
	// revocation at HANDLE_MERGED. Terminal.
	StepRevokeCalledBack StepStatus = 10602
	// StepRevokeReconciled: reconciliation inferred the removal's lost
	// deploy callback (binding REVOKED). A late real callback repairs it to
	// REVOKE_CALLED_BACK.
	StepRevokeReconciled StepStatus = 10603
	// StepRevokeAbsent: create_mr found nothing to remove — the default
	// branch has no entry of the grant (removed by hand, or replaced by an
	// entry changeflow did not write, which it never removes). The
	// deployed state has no entry of the grant either, so the binding is
	// REVOKED at once. Terminal.
	StepRevokeAbsent StepStatus = 10604
)

// Renewal phase (107xx). A renewal runs the grant's own steps (approval,
// MR, batch rounds, deploy callback) with the binding at RENEWING; only
// its cut-offs have codes of their own.
const (
	// StepRenewExpired: the grant expired before its renewal took effect,
	// and expiry wins in every flow (ExpiryCutOf decides where). Written by
	// the expiry scan, guarded on the renewal's step and version:
	//   - the renewal had no MR — it still waited for its approval
	//     (approve-first), or waited approved in the batch set: in the
	//     transaction of the grant's revocation, which takes the row at
	//     once (out of the set, too); the withdraw action is due for the
	//     approval place and withdraws the approval upstream;
	//   - the renewal had, or was creating, an MR of its own outside a
	//     batch — the legacy flow's MR waiting for its approval, an
	//     approved renewal's MR being built, checked, approved or merged,
	//     or any stop on a failure: the withdraw action is due at once
	//     (pre-empting a step still running), the binding stays RENEWING;
	//     the action withdraws the approval, closes the MR and hands the
	//     row back to the grant (VALIDATED, expired: the next scan revokes
	//     it), or finds the MR merged and leaves for HANDLE_MERGED ("merged
	//     wins": the renewal is in effect with its new expiry).
	// A renewal a batch round claimed is left to its batch. The action
	// rewrites the step (same step) when done, or leaves it for
	// CLOSE_FAILED when the upstream call kept failing. A decision of the
	// approval that arrives later finds the row out of its waiting set
	// and is recorded stale.
	StepRenewExpired StepStatus = 10701
	// StepRenewRevoked: the access the renewal would extend was given back
	// by its owner or revoked by an operator while the renewal still
	// waited for its approval or in the batch set: ending the access wins
	// over extending it. Written in the transaction that creates the
	// grant's revocation (which takes the row), with the withdraw action
	// due for the approval place. Left only for CLOSE_FAILED (the
	// approval system kept failing the withdrawal).
	StepRenewRevoked StepStatus = 10702
)

// StepKind classifies a step for hints, metrics and the safety net.
type StepKind int

// Step kinds.
const (
	// KindInProgress: work is scheduled or running.
	KindInProgress StepKind = iota + 1
	// KindSucceeded: a successful end of a phase or of the request.
	KindSucceeded
	// KindFailed: stopped on a failure; an operator retriggers or cancels.
	KindFailed
	// KindPending: stopped on an unknown outcome (a timeout); a person
	// confirms.
	KindPending
	// KindClosed: ended without success (rejected, withdrawn, closed).
	KindClosed
)

// stepInfo is the name and kind of every step, the one list String, Parse,
// Steps and the docs read.
var stepInfo = map[StepStatus]struct {
	name string
	kind StepKind
}{
	StepCreateStarted:            {"CREATE_STARTED", KindInProgress},
	StepCreateSucceeded:          {"CREATE_SUCCEEDED", KindInProgress},
	StepCreateFailed:             {"CREATE_FAILED", KindFailed},
	StepCreatePipelineFailed:     {"CREATE_PIPELINE_FAILED", KindFailed},
	StepCreateBranchCreated:      {"CREATE_BRANCH_CREATED", KindInProgress},
	StepCreateCommitted:          {"CREATE_COMMITTED", KindInProgress},
	StepCreateMRCreated:          {"CREATE_MR_CREATED", KindInProgress},
	StepCreatePipelineRunning:    {"CREATE_PIPELINE_RUNNING", KindInProgress},
	StepCreatePoolRejected:       {"CREATE_POOL_REJECTED", KindFailed},
	StepCreateApprovalSubmitting: {"CREATE_APPROVAL_SUBMITTING", KindInProgress},
	StepCreateApprovalSubmitted:  {"CREATE_APPROVAL_SUBMITTED", KindInProgress},
	StepCreateApprovalFailed:     {"CREATE_APPROVAL_FAILED", KindFailed},
	StepCreateAdmitted:           {"CREATE_ADMITTED", KindInProgress},
	StepHandleStarted:            {"HANDLE_STARTED", KindInProgress},
	StepHandleApproved:           {"HANDLE_APPROVED", KindInProgress},
	StepHandleApproveFailed:      {"HANDLE_APPROVE_FAILED", KindFailed},
	StepHandleApproveForbidden:   {"HANDLE_APPROVE_FORBIDDEN", KindFailed},
	StepHandleRebaseConflict:     {"HANDLE_REBASE_CONFLICT", KindFailed},
	StepHandleRebasing:           {"HANDLE_REBASING", KindInProgress},
	StepHandleMergeFailed:        {"HANDLE_MERGE_FAILED", KindFailed},
	StepHandleMerged:             {"HANDLE_MERGED", KindSucceeded},
	StepHandlePipelineRunning:    {"HANDLE_PIPELINE_RUNNING", KindInProgress},
	StepHandlePipelineFailed:     {"HANDLE_PIPELINE_FAILED", KindFailed},
	StepHandlePoolRejected:       {"HANDLE_POOL_REJECTED", KindFailed},
	StepCloseRejected:            {"CLOSE_REJECTED", KindClosed},
	StepCloseWithdrawn:           {"CLOSE_WITHDRAWN", KindClosed},
	StepCloseMRClosed:            {"CLOSE_MR_CLOSED", KindClosed},
	StepCloseFailed:              {"CLOSE_FAILED", KindFailed},
	StepCloseCancelled:           {"CLOSE_CANCELLED", KindClosed},
	StepCloseExpired:             {"CLOSE_EXPIRED", KindClosed},
	StepCloseRequesterWithdrawn:  {"CLOSE_REQUESTER_WITHDRAWN", KindClosed},
	StepCalledBack:               {"CALLED_BACK", KindSucceeded},
	StepReconciled:               {"RECONCILED", KindSucceeded},
	StepHandlePipelinePending:    {"HANDLE_PIPELINE_PENDING", KindPending},
	StepHandleMergeUnknown:       {"HANDLE_MERGE_UNKNOWN", KindPending},
	StepHandleRebasePending:      {"HANDLE_REBASE_PENDING", KindPending},
	StepCreatePipelinePending:    {"CREATE_PIPELINE_PENDING", KindPending},
	StepRevokeStarted:            {"REVOKE_STARTED", KindInProgress},
	StepRevokeCalledBack:         {"REVOKE_CALLED_BACK", KindSucceeded},
	StepRevokeReconciled:         {"REVOKE_RECONCILED", KindSucceeded},
	StepRevokeAbsent:             {"REVOKE_ABSENT", KindSucceeded},
	StepRenewExpired:             {"RENEW_EXPIRED", KindClosed},
	StepRenewRevoked:             {"RENEW_REVOKED", KindClosed},
}

// Steps returns every known step in code order.
func Steps() []StepStatus {
	out := make([]StepStatus, 0, len(stepInfo))
	for s := range stepInfo {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// String returns the step's name, e.g. "CREATE_STARTED"; an unknown code
// prints as "STEP(<code>)".
func (s StepStatus) String() string {
	if i, ok := stepInfo[s]; ok {
		return i.name
	}
	if s == StepNone {
		return "NONE"
	}
	return "STEP(" + strconv.Itoa(int(s)) + ")"
}

// Valid reports whether s is a known step.
func (s StepStatus) Valid() bool {
	_, ok := stepInfo[s]
	return ok
}

// Kind returns the step's kind; 0 for an unknown code.
func (s StepStatus) Kind() StepKind { return stepInfo[s].kind }

// Phase is the step's phase prefix: 100 creation, 101 handling, 102
// closing, 103 callbacks, 105 pending, 106 revocation.
func (s StepStatus) Phase() int { return int(s) / 100 }

// Stopped reports whether the workflow stopped at s on a failure or an
// unknown outcome, waiting for a person.
func (s StepStatus) Stopped() bool {
	k := s.Kind()
	return k == KindFailed || k == KindPending
}

// ParseStepStatus returns the step named name ("CREATE_STARTED").
func ParseStepStatus(name string) (StepStatus, error) {
	for s, i := range stepInfo {
		if i.name == name {
			return s, nil
		}
	}
	return 0, fmt.Errorf("unknown step %q", name)
}

// String names the kind.
func (k StepKind) String() string {
	switch k {
	case KindInProgress:
		return "in progress"
	case KindSucceeded:
		return "succeeded"
	case KindFailed:
		return "failed"
	case KindPending:
		return "pending"
	case KindClosed:
		return "closed"
	}
	return "unknown"
}
