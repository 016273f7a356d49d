package domain

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The central transition table (I7): every legal (from → to) move
// of both state layers. Every state write is checked against it before it
// is written; docs/workflow.md shows both maps (generated, and a test keeps
// them equal). A from-state of "" (binding) or StepNone (step) is the
// row's first state.

// bindingTransitions lists, for each binding status, the statuses it may
// move to. The entry "" holds the first states of a request: MR_CREATING
// (legacy flow) and APPROVAL_SENDING (approve-first). REJECTED and CLOSED
// move to a first state only by a re-application's in-place reset (I5).
var bindingTransitions = map[BindingStatus][]BindingStatus{
	// "" → REVOKING: the removal of an entry changeflow did not write
	// (an access review revoked it) inserts the subject's first row
	// (StartRepoRemoval).
	"": {BindingApprovalSending, BindingMRCreating, BindingRevoking},
	// Approval pending: the callback decides (an early callback may arrive
	// before SENT is written); a pool rejection or a submit failure fails it.
	// → CLOSED: the requester withdrew the request (withdrawnBy below).
	BindingApprovalSending: {BindingApprovalSent, BindingMRCreating, BindingMerging, BindingRejected, BindingCreateFailed, BindingHandleFailed, BindingClosed},
	BindingApprovalSent:    {BindingMRCreating, BindingMerging, BindingRejected, BindingCreateFailed, BindingHandleFailed, BindingClosed},
	// MR_CREATING, MR_CREATED → MERGED: the withdraw action found the
	// single-request MR merged (by hand) when it came to close it —
	// "merged wins", the request follows its merge.
	BindingMRCreating: {BindingMRCreated, BindingCreateFailed, BindingClosed, BindingMerged},
	// MR_CREATED: the legacy flow submits the approval next, approve-first
	// starts handling.
	// MR_CREATED, MERGING, HANDLE_FAILED → MR_CREATING: a member of a batch
	// that settled FAILED is re-admitted to the waiting set (batch path).
	BindingMRCreated: {BindingApprovalSending, BindingMerging, BindingCreateFailed, BindingHandleFailed, BindingClosed, BindingMRCreating, BindingMerged},
	// MERGING → CLOSED: a member following a BLOCKED batch into its
	// handling (the batch's rebased pipeline failed), withdrawn by its
	// owner once the withdraw action has settled the batch without it
	// and read its MR closed (store.OperationWithdraw lets no other
	// merging request go).
	BindingMerging:   {BindingMerged, BindingHandleFailed, BindingMRCreating, BindingClosed},
	BindingMerged:    {BindingValidated},
	BindingValidated: {BindingClosed, BindingRevoking, BindingRenewing},
	// CREATE_FAILED → MERGED: a stopped request withdrawn by its owner
	// whose MR a person merged meanwhile ("merged wins").
	BindingCreateFailed: {BindingMRCreating, BindingApprovalSending, BindingClosed, BindingMerged},
	// HANDLE_FAILED: a retrigger resumes handling; a read showing the MR
	// merged finishes it ("merged wins").
	BindingHandleFailed: {BindingMerging, BindingMerged, BindingClosed, BindingMRCreating},
	// REJECTED, CLOSED, REVOKED → REVOKING: a row at rest taken by the
	// removal of an entry changeflow did not write (StartRepoRemoval).
	BindingRejected: {BindingApprovalSending, BindingMRCreating, BindingRevoking},
	BindingClosed:   {BindingApprovalSending, BindingMRCreating, BindingRevoking},
	// Revocation (domain.OperationKind): VALIDATED → REVOKING when a
	// revocation is created (expiry, give back, operator); REVOKING while
	// the removal's MR runs; REVOKED once deployed (or nothing was left to remove);
	// REVOKE_FAILED when it needs a person, left by a retrigger, or by a
	// settlement that finds the batch merged ("merged wins"). REVOKED is
	// re-appliable like REJECTED and CLOSED.
	BindingRevoking:     {BindingRevoked, BindingRevokeFailed},
	BindingRevokeFailed: {BindingRevoking},
	BindingRevoked:      {BindingApprovalSending, BindingMRCreating, BindingRevoking},
	// Renewal: VALIDATED → RENEWING when a renewal is accepted; RENEWING
	// while it runs (its failures included: the access is unchanged);
	// VALIDATED when it is deployed (new expiry) or ends without effect
	// (the grant again, unchanged); REVOKING when the grant expires before
	// the renewal was approved.
	BindingRenewing: {BindingValidated, BindingRevoking},
}

// Step groups the step table reuses. They are part of the table: a change
// here changes every row that lists the group.
var (
	// createFailures: where any creation-phase action may stop.
	createFailures = []StepStatus{StepCreateFailed, StepCreatePoolRejected}
	// handleFailures: where any handling-phase action may stop.
	handleFailures = []StepStatus{StepHandleMergeFailed, StepHandlePoolRejected}
	// calledBack: the deploy callback and reconciliation may repair any step
	// after the merge (or a lagging one) to these (docs/flows/callbacks.md, the deploy callback).
	calledBack = []StepStatus{StepCalledBack, StepReconciled}
	// createRetrigger: what an operator's retrigger of a creation-phase
	// stop may write (the entry step of the action it re-runs), or cancel.
	createRetrigger = []StepStatus{StepCreateStarted, StepCreatePipelineRunning, StepCreateApprovalSubmitting, StepCloseCancelled}
	// handleRetrigger: the same for the handling phase; HANDLE_MERGED when
	// the re-read shows the MR merged.
	handleRetrigger = []StepStatus{StepHandleStarted, StepHandleApproved, StepHandleRebasing, StepHandlePipelineRunning, StepHandleMerged, StepCloseCancelled}
	// approvalAnswers: what the approval callback writes on a waiting row.
	approvalAnswers = []StepStatus{StepHandleStarted, StepCreateStarted, StepCreateAdmitted, StepCloseRejected, StepCloseWithdrawn}
	// batchRequeue: a member of a batch that settled FAILED (its MR closed
	// unmerged: check pipeline failed, a handling step failed, the batch
	// timed out) goes back to the waiting set for the next round, from
	// wherever the batch's durable steps had taken it (the batch path,
	// internal/workflow/batch*.go).
	batchRequeue = []StepStatus{StepCreateAdmitted}
	// withdrawnBy: the requester's withdrawal (POST
	// /api/requests/{id}/withdraw) from every step where the request has
	// not taken effect and is not in a claimed batch: waiting for its
	// approval, waiting in the batch set, its single-request MR being
	// created or checked (a pipeline timeout included: the requester may
	// give up on it), and stopped on a failure (a creation or handling
	// failure waiting for an operator: the requester may give up on it
	// and ask again). Which of these a given row may take is the store's
	// guarded write (store.OperationWithdraw), not the table.
	withdrawnBy = []StepStatus{StepCloseRequesterWithdrawn}
	// revokeDone: a merged removal confirmed by the deploy callback or
	// inferred by reconciliation (a revocation's calledBack).
	revokeDone = []StepStatus{StepRevokeCalledBack, StepRevokeReconciled}
	// renewCut: a renewal still waiting for its approval when its grant
	// expires, or when the access is given back or revoked, is ended by
	// the revocation that takes the row.
	renewCut = []StepStatus{StepRenewExpired, StepRenewRevoked}
	// renewLapsed: a renewal that may have an MR of its own when its
	// grant expires — stopped on a failure (waiting for an operator), or
	// still running outside a batch (its MR being built, checked, waiting
	// for the legacy approval, approved or merged) — is withdrawn by the
	// expiry scan (the withdraw action closes its MR; "merged wins"); one
	// waiting in the batch set is cut there (expiry wins in every place
	// but a claimed batch, domain.ExpiryCutOf).
	renewLapsed = []StepStatus{StepRenewExpired}
	// leftBlockedBatch: a member following a BLOCKED batch into its
	// handling (HANDLE_STARTED, its driver stopped at the rebased
	// pipeline's failure) withdrawn by its owner: the withdraw action
	// settles the batch without it first (docs/flows/withdrawal.md, "Withdrawing
	// a request"). The store's guarded write takes no other row here.
	leftBlockedBatch = []StepStatus{StepCloseRequesterWithdrawn}
)

// stepTransitions lists, for each step, the steps it may move to. Writing
// the same step again (a rescheduled poll) is not a transition and always
// legal. HANDLE_PIPELINE_RUNNING → HANDLE_STARTED is the regenerated MR's
// pipeline passing: the bots approve again (a push may reset approvals).
var stepTransitions = map[StepStatus][]StepStatus{
	StepNone: {StepCreateStarted, StepCreateApprovalSubmitting, StepRevokeStarted},

	StepCreateStarted:         join([]StepStatus{StepCreateBranchCreated, StepCreateCommitted, StepCreateMRCreated}, createFailures, batchRequeue, withdrawnBy, renewLapsed),
	StepCreateBranchCreated:   join([]StepStatus{StepCreateCommitted, StepCreateMRCreated}, createFailures, withdrawnBy, renewLapsed),
	StepCreateCommitted:       join([]StepStatus{StepCreateMRCreated}, createFailures, withdrawnBy, renewLapsed),
	StepCreateMRCreated:       join([]StepStatus{StepCreatePipelineRunning, StepCreateSucceeded, StepCreatePipelineFailed, StepCreatePipelinePending}, createFailures, batchRequeue, withdrawnBy, renewLapsed),
	StepCreatePipelineRunning: join([]StepStatus{StepCreateSucceeded, StepCreatePipelineFailed, StepCreatePipelinePending}, createFailures, batchRequeue, withdrawnBy, renewLapsed),
	StepCreateSucceeded:       join([]StepStatus{StepCreateApprovalSubmitting, StepHandleStarted, StepCloseCancelled}, createFailures, handleFailures, batchRequeue, withdrawnBy, renewLapsed),
	StepCreateApprovalSubmitting: join([]StepStatus{StepCreateApprovalSubmitted, StepCreateApprovalFailed},
		createFailures, approvalAnswers, []StepStatus{StepHandlePoolRejected}, withdrawnBy, renewCut),
	StepCreateApprovalSubmitted: join(approvalAnswers, createFailures, []StepStatus{StepHandlePoolRejected}, withdrawnBy, renewCut),
	// CREATE_ADMITTED → REVOKE_ABSENT: a batch round settles a revocation
	// whose entry is already gone from the default branch at once (the
	// binding move REVOKING → REVOKED keeps it to revocations).
	// CREATE_ADMITTED → RENEW_REVOKED / RENEW_EXPIRED: a renewal waiting
	// in the batch set when its access is given back or revoked, or when
	// its grant expires (taken out of the set).
	StepCreateAdmitted: join([]StepStatus{StepCreateStarted, StepCloseCancelled, StepRevokeAbsent}, renewCut, createFailures, withdrawnBy),

	StepCreateFailed:          join(createRetrigger, batchRequeue, renewLapsed, withdrawnBy),
	StepCreatePipelineFailed:  join(createRetrigger, batchRequeue, renewLapsed, withdrawnBy),
	StepCreatePoolRejected:    join(createRetrigger, batchRequeue, renewLapsed, withdrawnBy),
	StepCreateApprovalFailed:  join(createRetrigger, renewLapsed),
	StepCreatePipelinePending: join(createRetrigger, []StepStatus{StepCreateSucceeded, StepCreatePipelineFailed}, batchRequeue, withdrawnBy, renewLapsed),

	// HANDLE_STARTED → HANDLE_REBASING: the head check before the
	// approval found the MR's head not what changeflow writes (regenerate)
	// or not changeflow's at all (rebuild on a fresh branch).
	StepHandleStarted:  join([]StepStatus{StepHandleApproved, StepHandleApproveFailed, StepHandleApproveForbidden, StepHandleMerged, StepHandleRebasing}, handleFailures, calledBack, batchRequeue, renewLapsed, leftBlockedBatch),
	StepHandleApproved: join([]StepStatus{StepHandleMerged, StepHandleRebasing, StepHandleMergeUnknown}, handleFailures, calledBack, batchRequeue, renewLapsed),
	// HANDLE_REBASING → REVOKE_ABSENT: regenerating a removal whose entry
	// is gone from the target's head (the binding move REVOKING → REVOKED
	// keeps it to revocations).
	StepHandleRebasing:        join([]StepStatus{StepHandleApproved, StepHandlePipelineRunning, StepHandleRebaseConflict, StepHandleRebasePending, StepHandleMerged, StepRevokeAbsent}, handleFailures, calledBack, batchRequeue, renewLapsed),
	StepHandlePipelineRunning: join([]StepStatus{StepHandleApproved, StepHandlePipelineFailed, StepHandlePipelinePending, StepHandleStarted}, handleFailures, calledBack, batchRequeue, renewLapsed),
	StepHandleMerged:          join(calledBack, revokeDone),

	StepHandleApproveFailed:    join(handleRetrigger, calledBack, batchRequeue, renewLapsed, withdrawnBy),
	StepHandleApproveForbidden: join(handleRetrigger, calledBack, batchRequeue, renewLapsed, withdrawnBy),
	StepHandleRebaseConflict:   join(handleRetrigger, calledBack, batchRequeue, renewLapsed, withdrawnBy),
	StepHandleMergeFailed:      join(handleRetrigger, calledBack, batchRequeue, renewLapsed, withdrawnBy),
	StepHandlePipelineFailed:   join(handleRetrigger, calledBack, batchRequeue, renewLapsed, withdrawnBy),
	StepHandlePoolRejected:     join(handleRetrigger, calledBack, batchRequeue, renewLapsed, withdrawnBy),
	StepHandlePipelinePending:  join(handleRetrigger, calledBack, batchRequeue, renewLapsed, withdrawnBy),
	StepHandleMergeUnknown:     join(handleRetrigger, calledBack, batchRequeue, renewLapsed, withdrawnBy),
	StepHandleRebasePending:    join(handleRetrigger, calledBack, batchRequeue, renewLapsed, withdrawnBy),

	StepCloseRejected:  {StepCloseMRClosed, StepCloseFailed},
	StepCloseWithdrawn: {StepCloseMRClosed, StepCloseFailed},
	// CLOSE_CANCELLED → HANDLE_MERGED: an operator's close found the MR
	// merged ("merged wins").
	StepCloseCancelled: {StepCloseMRClosed, StepCloseFailed, StepHandleMerged},
	StepCloseFailed:    {StepCloseMRClosed, StepCloseRequesterWithdrawn, StepCloseCancelled},
	StepCloseMRClosed:  nil,
	StepCloseExpired:   nil,
	// The withdraw action's ends: done (the same step, always legal),
	// the MR found merged (merged wins), the upstream call kept failing.
	// CLOSE_FAILED → CLOSE_REQUESTER_WITHDRAWN (or CLOSE_CANCELLED, an
	// operator's close) above is its retrigger succeeding.
	StepCloseRequesterWithdrawn: {StepHandleMerged, StepCloseFailed},

	StepCalledBack: {StepCloseExpired},
	StepReconciled: {StepCalledBack, StepCloseExpired},

	// A revocation starts at REVOKE_STARTED and runs create_mr from there
	// (a target without batching), or is admitted to the waiting set
	// (CREATE_ADMITTED) and runs the batch path like an approved grant; it
	// ends REVOKE_CALLED_BACK/REVOKE_RECONCILED after HANDLE_MERGED (only
	// a merged removal can be confirmed), or REVOKE_ABSENT when there was
	// nothing to remove.
	StepRevokeStarted:    join([]StepStatus{StepCreateAdmitted, StepCreateBranchCreated, StepCreateCommitted, StepCreateMRCreated, StepRevokeAbsent}, createFailures),
	StepRevokeReconciled: {StepRevokeCalledBack},
	StepRevokeCalledBack: nil,
	StepRevokeAbsent:     nil,
	// A renewal's cut-offs run the withdraw action: done (the same step),
	// the renewal's MR found merged when the scan withdrew a stopped
	// renewal ("merged wins"), or the upstream call kept failing.
	StepRenewExpired: {StepHandleMerged, StepCloseFailed},
	StepRenewRevoked: {StepCloseFailed},
}

// join concatenates step groups into one row of the table.
func join(groups ...[]StepStatus) []StepStatus {
	var out []StepStatus
	for _, g := range groups {
		for _, s := range g {
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

// batchTransitions lists, for each batch status, the statuses it may move
// to (the batch part of the table). RUNNING may block (it keeps the slot)
// or finish; BLOCKED may finish, by an operator's settlement, or be
// resumed to RUNNING by an operator's retrigger; SUCCEEDED and FAILED are
// terminal. Because BLOCKED → RUNNING → BLOCKED can repeat, status alone
// is not an ABA-free guard: every batch write also checks the version.
var batchTransitions = map[BatchStatus][]BatchStatus{
	BatchRunning: {BatchBlocked, BatchSucceeded, BatchFailed},
	BatchBlocked: {BatchSucceeded, BatchFailed, BatchRunning},
}

// BatchTransitionLegal reports whether a batch may move from → to.
func BatchTransitionLegal(from, to BatchStatus) bool {
	return slices.Contains(batchTransitions[from], to)
}

// ErrIllegalTransition is the sentinel every *IllegalTransitionError
// matches with errors.Is.
var ErrIllegalTransition = errors.New("illegal transition")

// IllegalTransitionError is a write the transition table refuses. It is a
// bug in the caller, never a race: nothing was written.
type IllegalTransitionError struct {
	// Layer is "binding" or "step".
	Layer string
	From  string
	To    string
}

// Error describes the refused move.
func (e *IllegalTransitionError) Error() string {
	from := e.From
	if from == "" {
		from = "(new)"
	}
	return fmt.Sprintf("illegal %s transition %s → %s", e.Layer, from, e.To)
}

// Is makes errors.Is(err, ErrIllegalTransition) true.
func (e *IllegalTransitionError) Is(target error) bool { return target == ErrIllegalTransition }

// CheckBinding returns nil when a binding may move from → to, else an
// *IllegalTransitionError. from == to is not a move and is refused: the
// callers that write a binding status always change it.
func CheckBinding(from, to BindingStatus) error {
	if to.Valid() && slices.Contains(bindingTransitions[from], to) {
		return nil
	}
	return &IllegalTransitionError{Layer: "binding", From: string(from), To: string(to)}
}

// CheckStep returns nil when an operation may move from → to, else an
// *IllegalTransitionError. from == to (a rescheduled poll rewriting its own
// step) is legal for a known step.
func CheckStep(from, to StepStatus) error {
	if to.Valid() && (from == to || slices.Contains(stepTransitions[from], to)) {
		return nil
	}
	fromName := from.String()
	if from == StepNone {
		fromName = ""
	}
	return &IllegalTransitionError{Layer: "step", From: fromName, To: to.String()}
}

// CheckEntry checks a request's first state: its first step and its first
// binding status, both from the table's empty row.
func CheckEntry(step StepStatus, binding BindingStatus) error {
	if err := CheckStep(StepNone, step); err != nil {
		return err
	}
	return CheckBinding("", binding)
}

// BindingTable renders bindingTransitions as a Markdown table, in lifecycle
// order; docs/workflow.md embeds it.
func BindingTable() string {
	var b strings.Builder
	b.WriteString("| from | may move to |\n|---|---|\n")
	for _, from := range append([]BindingStatus{""}, BindingStatuses...) {
		name := string(from)
		if from == "" {
			name = "(new request)"
		}
		var to []string
		for _, t := range bindingTransitions[from] {
			to = append(to, "`"+string(t)+"`")
		}
		fmt.Fprintf(&b, "| `%s` | %s |\n", name, strings.Join(to, ", "))
	}
	return b.String()
}

// StepTable renders stepTransitions as a Markdown table in code order;
// docs/workflow.md embeds it.
func StepTable() string {
	var b strings.Builder
	b.WriteString("| from | may move to |\n|---|---|\n")
	for _, from := range append([]StepStatus{StepNone}, Steps()...) {
		name := "(new request)"
		if from != StepNone {
			name = fmt.Sprintf("%s %d", from, int(from))
		}
		var to []string
		for _, t := range stepTransitions[from] {
			to = append(to, "`"+t.String()+"`")
		}
		if len(to) == 0 {
			to = []string{"— (terminal)"}
		}
		fmt.Fprintf(&b, "| `%s` | %s |\n", name, strings.Join(to, ", "))
	}
	return b.String()
}

// StepList renders every step as a Markdown table (code, name, phase,
// kind, hint with a failed binding where the kind stops).
func StepList() string {
	var b strings.Builder
	b.WriteString("| code | step | phase | kind | hint |\n|---|---|---|---|---|\n")
	phases := map[int]string{100: "creation", 101: "handling", 102: "closing", 103: "callbacks", 105: "pending/unknown", 106: "revocation", 107: "renewal"}
	for _, s := range Steps() {
		fmt.Fprintf(&b, "| %d | `%s` | %s | %s | `%s` |\n", int(s), s, phases[s.Phase()], s.Kind(), HintFor(s, ""))
	}
	return b.String()
}

// BindingNext returns the statuses a binding in from may move to (a copy).
func BindingNext(from BindingStatus) []BindingStatus {
	return slices.Clone(bindingTransitions[from])
}

// StepNext returns the steps an operation at from may move to (a copy).
func StepNext(from StepStatus) []StepStatus { return slices.Clone(stepTransitions[from]) }
