package domain

import (
	"strings"
	"testing"
)

// bar prints a step bar as "KEY:STATE …", the tables' notation.
func bar(steps []ProgressStep) string {
	parts := make([]string, len(steps))
	for i, s := range steps {
		parts[i] = string(s.Key) + ":" + string(s.State)
	}
	return strings.Join(parts, " ")
}

func TestProgress(t *testing.T) {
	const L, A = FlowLegacy, FlowApproveFirst
	h := func(s ...StepStatus) []StepStatus { return s }
	tests := []struct {
		name string
		in   ProgressInput
		want string
	}{
		// Legacy flow: the MR first, its checks, then the approval.
		{"legacy: just submitted, the change is being prepared",
			ProgressInput{Flow: L, Kind: OperationGrant, Status: BindingMRCreating, Step: StepCreateStarted},
			"PROPOSED:CURRENT CHECKS:TODO APPROVAL:TODO MERGED:TODO DEPLOYED:TODO"},
		{"legacy: checks running",
			ProgressInput{Flow: L, Kind: OperationGrant, Status: BindingMRCreated, Step: StepCreatePipelineRunning},
			"PROPOSED:DONE CHECKS:CURRENT APPROVAL:TODO MERGED:TODO DEPLOYED:TODO"},
		{"legacy: a failed check pipeline fails the checks, never the approval it did not reach",
			ProgressInput{Flow: L, Kind: OperationGrant, Status: BindingCreateFailed, Step: StepCreatePipelineFailed},
			"PROPOSED:DONE CHECKS:FAILED APPROVAL:TODO MERGED:TODO DEPLOYED:TODO"},
		{"legacy: the create step failed before any MR existed",
			ProgressInput{Flow: L, Kind: OperationGrant, Status: BindingCreateFailed, Step: StepCreateFailed,
				History: h(StepCreateStarted, StepCreateBranchCreated, StepCreateFailed)},
			"PROPOSED:FAILED CHECKS:TODO APPROVAL:TODO MERGED:TODO DEPLOYED:TODO"},
		{"legacy: the create step failed once the MR was open",
			ProgressInput{Flow: L, Kind: OperationGrant, Status: BindingCreateFailed, Step: StepCreateFailed,
				History: h(StepCreateStarted, StepCreateMRCreated, StepCreatePipelineRunning, StepCreateFailed)},
			"PROPOSED:DONE CHECKS:FAILED APPROVAL:TODO MERGED:TODO DEPLOYED:TODO"},
		{"legacy: checks passed, the approval is being asked for",
			ProgressInput{Flow: L, Kind: OperationGrant, Status: BindingMRCreated, Step: StepCreateSucceeded},
			"PROPOSED:DONE CHECKS:DONE APPROVAL:CURRENT MERGED:TODO DEPLOYED:TODO"},
		{"legacy: with the approvers",
			ProgressInput{Flow: L, Kind: OperationGrant, Status: BindingApprovalSent, Step: StepCreateApprovalSubmitted},
			"PROPOSED:DONE CHECKS:DONE APPROVAL:CURRENT MERGED:TODO DEPLOYED:TODO"},
		{"legacy: the approval could not be sent",
			ProgressInput{Flow: L, Kind: OperationGrant, Status: BindingCreateFailed, Step: StepCreateApprovalFailed},
			"PROPOSED:DONE CHECKS:DONE APPROVAL:FAILED MERGED:TODO DEPLOYED:TODO"},
		{"legacy: rejected, its MR closed",
			ProgressInput{Flow: L, Kind: OperationGrant, Status: BindingRejected, Step: StepCloseMRClosed,
				History: h(StepCreateStarted, StepCreateMRCreated, StepCreateSucceeded, StepCreateApprovalSubmitting,
					StepCreateApprovalSubmitted, StepCloseRejected, StepCloseMRClosed)},
			"PROPOSED:DONE CHECKS:DONE APPROVAL:FAILED MERGED:SKIPPED DEPLOYED:SKIPPED"},
		{"legacy: the approval withdrawn upstream",
			ProgressInput{Flow: L, Kind: OperationGrant, Status: BindingRejected, Step: StepCloseWithdrawn},
			"PROPOSED:DONE CHECKS:DONE APPROVAL:SKIPPED MERGED:SKIPPED DEPLOYED:SKIPPED"},
		{"legacy: merging",
			ProgressInput{Flow: L, Kind: OperationGrant, Status: BindingMerging, Step: StepHandleApproved},
			"PROPOSED:DONE CHECKS:DONE APPROVAL:DONE MERGED:CURRENT DEPLOYED:TODO"},
		{"legacy: a rebase conflict fails the merge",
			ProgressInput{Flow: L, Kind: OperationGrant, Status: BindingHandleFailed, Step: StepHandleRebaseConflict},
			"PROPOSED:DONE CHECKS:DONE APPROVAL:DONE MERGED:FAILED DEPLOYED:TODO"},
		{"legacy: the merge outcome is unknown, nothing failed",
			ProgressInput{Flow: L, Kind: OperationGrant, Status: BindingMerging, Step: StepHandleMergeUnknown},
			"PROPOSED:DONE CHECKS:DONE APPROVAL:DONE MERGED:CURRENT DEPLOYED:TODO"},
		{"legacy: merged, waiting for the deployment",
			ProgressInput{Flow: L, Kind: OperationGrant, Status: BindingMerged, Step: StepHandleMerged},
			"PROPOSED:DONE CHECKS:DONE APPROVAL:DONE MERGED:DONE DEPLOYED:CURRENT"},
		{"legacy: in effect",
			ProgressInput{Flow: L, Kind: OperationGrant, Status: BindingValidated, Step: StepCalledBack},
			"PROPOSED:DONE CHECKS:DONE APPROVAL:DONE MERGED:DONE DEPLOYED:DONE"},
		{"legacy: withdrawn by its owner with its MR open",
			ProgressInput{Flow: L, Kind: OperationGrant, Status: BindingClosed, Step: StepCloseRequesterWithdrawn,
				History: h(StepCreateStarted, StepCreateMRCreated, StepCreateSucceeded, StepCreateApprovalSubmitting,
					StepCreateApprovalSubmitted, StepCloseRequesterWithdrawn)},
			"PROPOSED:DONE CHECKS:DONE APPROVAL:SKIPPED MERGED:SKIPPED DEPLOYED:SKIPPED"},
		{"legacy: a failed pipeline cancelled by an operator stays failed where it stopped",
			ProgressInput{Flow: L, Kind: OperationGrant, Status: BindingClosed, Step: StepCloseMRClosed,
				History: h(StepCreateStarted, StepCreateMRCreated, StepCreatePipelineFailed, StepCloseCancelled, StepCloseMRClosed)},
			"PROPOSED:DONE CHECKS:FAILED APPROVAL:SKIPPED MERGED:SKIPPED DEPLOYED:SKIPPED"},
		{"legacy: withdrawn, then closing its MR failed: withdrawn, not failed",
			ProgressInput{Flow: L, Kind: OperationGrant, Status: BindingClosed, Step: StepCloseFailed,
				History: h(StepCreateStarted, StepCreateMRCreated, StepCreateSucceeded, StepCreateApprovalSubmitted,
					StepCloseRequesterWithdrawn, StepCloseFailed)},
			"PROPOSED:DONE CHECKS:DONE APPROVAL:SKIPPED MERGED:SKIPPED DEPLOYED:SKIPPED"},
		{"legacy: the worker pool refused the pipeline poll",
			ProgressInput{Flow: L, Kind: OperationGrant, Status: BindingCreateFailed, Step: StepCreatePoolRejected,
				History: h(StepCreateStarted, StepCreateMRCreated, StepCreatePoolRejected)},
			"PROPOSED:DONE CHECKS:FAILED APPROVAL:TODO MERGED:TODO DEPLOYED:TODO"},
		{"legacy: given back, being removed",
			ProgressInput{Flow: L, Kind: OperationGrant, Status: BindingRevoking, Step: StepCalledBack},
			"PROPOSED:DONE CHECKS:DONE APPROVAL:DONE MERGED:DONE DEPLOYED:DONE REMOVED:CURRENT"},
		{"legacy: given back, removed: never in effect any more",
			ProgressInput{Flow: L, Kind: OperationGrant, Status: BindingRevoked, Step: StepCalledBack},
			"PROPOSED:DONE CHECKS:DONE APPROVAL:DONE MERGED:DONE DEPLOYED:DONE REMOVED:DONE"},
		{"legacy: removing the access stopped",
			ProgressInput{Flow: L, Kind: OperationGrant, Status: BindingRevokeFailed, Step: StepCalledBack},
			"PROPOSED:DONE CHECKS:DONE APPROVAL:DONE MERGED:DONE DEPLOYED:DONE REMOVED:FAILED"},
		{"legacy: lapsed at its expiry",
			ProgressInput{Flow: L, Kind: OperationGrant, Status: BindingClosed, Step: StepCloseExpired},
			"PROPOSED:DONE CHECKS:DONE APPROVAL:DONE MERGED:DONE DEPLOYED:DONE EXPIRED:DONE"},
		{"legacy: renewed, a later request carries the access",
			ProgressInput{Flow: L, Kind: OperationGrant, Status: BindingValidated, Step: StepCalledBack, Renewed: true},
			"PROPOSED:DONE CHECKS:DONE APPROVAL:DONE MERGED:DONE DEPLOYED:DONE RENEWED:DONE"},

		// Approve-first: the approval first, then the MR.
		{"approve-first: sending for approval",
			ProgressInput{Flow: A, Kind: OperationGrant, Status: BindingApprovalSending, Step: StepCreateApprovalSubmitting},
			"APPROVAL:CURRENT PROPOSED:TODO CHECKS:TODO MERGED:TODO DEPLOYED:TODO"},
		{"approve-first: the approval could not be sent",
			ProgressInput{Flow: A, Kind: OperationGrant, Status: BindingCreateFailed, Step: StepCreateApprovalFailed},
			"APPROVAL:FAILED PROPOSED:TODO CHECKS:TODO MERGED:TODO DEPLOYED:TODO"},
		{"approve-first: rejected",
			ProgressInput{Flow: A, Kind: OperationGrant, Status: BindingRejected, Step: StepCloseRejected},
			"APPROVAL:FAILED PROPOSED:SKIPPED CHECKS:SKIPPED MERGED:SKIPPED DEPLOYED:SKIPPED"},
		{"approve-first: withdrawn while waiting for approval",
			ProgressInput{Flow: A, Kind: OperationGrant, Status: BindingClosed, Step: StepCloseRequesterWithdrawn,
				History: h(StepCreateApprovalSubmitting, StepCreateApprovalSubmitted, StepCloseRequesterWithdrawn)},
			"APPROVAL:SKIPPED PROPOSED:SKIPPED CHECKS:SKIPPED MERGED:SKIPPED DEPLOYED:SKIPPED"},
		{"approve-first: approved, waiting for a batch",
			ProgressInput{Flow: A, Kind: OperationGrant, Status: BindingMRCreating, Step: StepCreateAdmitted},
			"APPROVAL:DONE PROPOSED:CURRENT CHECKS:TODO MERGED:TODO DEPLOYED:TODO"},
		{"approve-first: withdrawn from the batch set",
			ProgressInput{Flow: A, Kind: OperationGrant, Status: BindingClosed, Step: StepCloseRequesterWithdrawn,
				History: h(StepCreateApprovalSubmitting, StepCreateApprovalSubmitted, StepCreateAdmitted, StepCloseRequesterWithdrawn)},
			"APPROVAL:DONE PROPOSED:SKIPPED CHECKS:SKIPPED MERGED:SKIPPED DEPLOYED:SKIPPED"},
		{"approve-first: checks timed out, waiting for a person",
			ProgressInput{Flow: A, Kind: OperationGrant, Status: BindingMRCreated, Step: StepCreatePipelinePending},
			"APPROVAL:DONE PROPOSED:DONE CHECKS:CURRENT MERGED:TODO DEPLOYED:TODO"},
		{"approve-first: checks failed",
			ProgressInput{Flow: A, Kind: OperationGrant, Status: BindingCreateFailed, Step: StepCreatePipelineFailed},
			"APPROVAL:DONE PROPOSED:DONE CHECKS:FAILED MERGED:TODO DEPLOYED:TODO"},
		{"approve-first: checks passed, merging is next",
			ProgressInput{Flow: A, Kind: OperationGrant, Status: BindingMRCreated, Step: StepCreateSucceeded},
			"APPROVAL:DONE PROPOSED:DONE CHECKS:DONE MERGED:CURRENT DEPLOYED:TODO"},
		{"approve-first: merge failed",
			ProgressInput{Flow: A, Kind: OperationGrant, Status: BindingHandleFailed, Step: StepHandleMergeFailed},
			"APPROVAL:DONE PROPOSED:DONE CHECKS:DONE MERGED:FAILED DEPLOYED:TODO"},
		{"approve-first: merged",
			ProgressInput{Flow: A, Kind: OperationGrant, Status: BindingMerged, Step: StepHandleMerged},
			"APPROVAL:DONE PROPOSED:DONE CHECKS:DONE MERGED:DONE DEPLOYED:CURRENT"},
		{"approve-first: in effect (reconciled)",
			ProgressInput{Flow: A, Kind: OperationGrant, Status: BindingValidated, Step: StepReconciled},
			"APPROVAL:DONE PROPOSED:DONE CHECKS:DONE MERGED:DONE DEPLOYED:DONE"},
		{"approve-first: given back and removed",
			ProgressInput{Flow: A, Kind: OperationGrant, Status: BindingRevoked, Step: StepCalledBack},
			"APPROVAL:DONE PROPOSED:DONE CHECKS:DONE MERGED:DONE DEPLOYED:DONE REMOVED:DONE"},
		{"approve-first: being removed",
			ProgressInput{Flow: A, Kind: OperationGrant, Status: BindingRevoking, Step: StepCalledBack},
			"APPROVAL:DONE PROPOSED:DONE CHECKS:DONE MERGED:DONE DEPLOYED:DONE REMOVED:CURRENT"},
		{"approve-first: a failed create cancelled by an operator",
			ProgressInput{Flow: A, Kind: OperationGrant, Status: BindingClosed, Step: StepCloseCancelled,
				History: h(StepCreateApprovalSubmitting, StepCreateApprovalSubmitted, StepHandleStarted, StepCreateStarted,
					StepCreateFailed, StepCloseCancelled)},
			"APPROVAL:DONE PROPOSED:FAILED CHECKS:SKIPPED MERGED:SKIPPED DEPLOYED:SKIPPED"},

		// Renewals: the grant's steps, in the grant's vocabulary.
		{"renewal, approve-first: with the approvers",
			ProgressInput{Flow: A, Kind: OperationRenew, Status: BindingApprovalSent, Step: StepCreateApprovalSubmitted},
			"APPROVAL:CURRENT PROPOSED:TODO CHECKS:TODO MERGED:TODO DEPLOYED:TODO"},
		{"renewal, legacy: checks running",
			ProgressInput{Flow: L, Kind: OperationRenew, Status: BindingMRCreated, Step: StepCreatePipelineRunning},
			"PROPOSED:DONE CHECKS:CURRENT APPROVAL:TODO MERGED:TODO DEPLOYED:TODO"},
		{"renewal: in effect",
			ProgressInput{Flow: A, Kind: OperationRenew, Status: BindingValidated, Step: StepCalledBack},
			"APPROVAL:DONE PROPOSED:DONE CHECKS:DONE MERGED:DONE DEPLOYED:DONE"},
		{"renewal: cut off by the expiry while waiting for approval",
			ProgressInput{Flow: A, Kind: OperationRenew, Status: BindingClosed, Step: StepRenewExpired,
				History: h(StepCreateApprovalSubmitting, StepCreateApprovalSubmitted, StepRenewExpired)},
			"APPROVAL:SKIPPED PROPOSED:SKIPPED CHECKS:SKIPPED MERGED:SKIPPED DEPLOYED:SKIPPED"},
		{"renewal: its access given back while it waited in the batch set",
			ProgressInput{Flow: A, Kind: OperationRenew, Status: BindingClosed, Step: StepRenewRevoked,
				History: h(StepCreateApprovalSubmitting, StepCreateApprovalSubmitted, StepCreateAdmitted, StepRenewRevoked)},
			"APPROVAL:DONE PROPOSED:SKIPPED CHECKS:SKIPPED MERGED:SKIPPED DEPLOYED:SKIPPED"},
		{"renewal: rejected",
			ProgressInput{Flow: A, Kind: OperationRenew, Status: BindingRejected, Step: StepCloseRejected},
			"APPROVAL:FAILED PROPOSED:SKIPPED CHECKS:SKIPPED MERGED:SKIPPED DEPLOYED:SKIPPED"},
		{"renewal in effect, given back since",
			ProgressInput{Flow: A, Kind: OperationRenew, Status: BindingRevoked, Step: StepCalledBack},
			"APPROVAL:DONE PROPOSED:DONE CHECKS:DONE MERGED:DONE DEPLOYED:DONE REMOVED:DONE"},
		{"renewal renewed again",
			ProgressInput{Flow: L, Kind: OperationRenew, Status: BindingValidated, Step: StepCalledBack, Renewed: true},
			"PROPOSED:DONE CHECKS:DONE APPROVAL:DONE MERGED:DONE DEPLOYED:DONE RENEWED:DONE"},

		// Revocations: no approval in either flow.
		{"revocation, legacy: started",
			ProgressInput{Flow: L, Kind: OperationRevoke, Status: BindingRevoking, Step: StepRevokeStarted},
			"PROPOSED:CURRENT CHECKS:TODO MERGED:TODO REMOVED:TODO"},
		{"revocation, approve-first: waiting in the batch set",
			ProgressInput{Flow: A, Kind: OperationRevoke, Status: BindingRevoking, Step: StepCreateAdmitted},
			"PROPOSED:CURRENT CHECKS:TODO MERGED:TODO REMOVED:TODO"},
		{"revocation: checks passed, merging is next",
			ProgressInput{Flow: A, Kind: OperationRevoke, Status: BindingRevoking, Step: StepCreateSucceeded},
			"PROPOSED:DONE CHECKS:DONE MERGED:CURRENT REMOVED:TODO"},
		{"revocation: merged, waiting for the deployment",
			ProgressInput{Flow: L, Kind: OperationRevoke, Status: BindingRevoking, Step: StepHandleMerged},
			"PROPOSED:DONE CHECKS:DONE MERGED:DONE REMOVED:CURRENT"},
		{"revocation: removed",
			ProgressInput{Flow: L, Kind: OperationRevoke, Status: BindingRevoked, Step: StepRevokeCalledBack},
			"PROPOSED:DONE CHECKS:DONE MERGED:DONE REMOVED:DONE"},
		{"revocation: removed, by reconciliation",
			ProgressInput{Flow: A, Kind: OperationRevoke, Status: BindingRevoked, Step: StepRevokeReconciled},
			"PROPOSED:DONE CHECKS:DONE MERGED:DONE REMOVED:DONE"},
		{"revocation: nothing left to remove, no MR needed",
			ProgressInput{Flow: L, Kind: OperationRevoke, Status: BindingRevoked, Step: StepRevokeAbsent},
			"PROPOSED:SKIPPED CHECKS:SKIPPED MERGED:SKIPPED REMOVED:DONE"},
		{"revocation: its merge failed",
			ProgressInput{Flow: L, Kind: OperationRevoke, Status: BindingRevokeFailed, Step: StepHandleMergeFailed},
			"PROPOSED:DONE CHECKS:DONE MERGED:FAILED REMOVED:TODO"},
		{"revocation: its create failed",
			ProgressInput{Flow: A, Kind: OperationRevoke, Status: BindingRevokeFailed, Step: StepCreateFailed,
				History: h(StepRevokeStarted, StepCreateStarted, StepCreateFailed)},
			"PROPOSED:FAILED CHECKS:TODO MERGED:TODO REMOVED:TODO"},

		// No history read where one was needed: claim nothing.
		{"a generic failure without its history claims no step",
			ProgressInput{Flow: L, Kind: OperationGrant, Status: BindingCreateFailed, Step: StepCreateFailed},
			"PROPOSED:TODO CHECKS:TODO APPROVAL:TODO MERGED:TODO DEPLOYED:TODO"},
		{"an unknown flow reads as legacy",
			ProgressInput{Flow: "", Kind: OperationGrant, Status: BindingApprovalSent, Step: StepCreateApprovalSubmitted},
			"PROPOSED:DONE CHECKS:DONE APPROVAL:CURRENT MERGED:TODO DEPLOYED:TODO"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := bar(Progress(tt.in)); got != tt.want {
				t.Fatalf("Progress:\n got  %s\n want %s", got, tt.want)
			}
		})
	}
}

// TestProgressEveryStep decides the bar for every step, in every flow
// and kind, with and without a history leading to it, and checks the
// shape every bar must have: the flow's own steps in order (the grant's
// lifecycle may add one), done steps first, at most one step current or
// failed, nothing done after a step not done (but a removal with nothing
// to remove), and a failure only at a step that failed.
func TestProgressEveryStep(t *testing.T) {
	for _, flow := range []string{FlowLegacy, FlowApproveFirst} {
		for _, kind := range OperationKinds {
			order := progressOrder(flow, kind)
			for _, step := range append(Steps(), StepNone) {
				for _, hist := range [][]StepStatus{nil, {StepCreateStarted, StepCreateMRCreated, step}} {
					in := ProgressInput{Flow: flow, Kind: kind, Status: BindingMRCreated, Step: step, History: hist}
					got := Progress(in)
					name := flow + "/" + string(kind) + "/" + step.String()
					if len(got) < len(order) {
						t.Fatalf("%s: %s is shorter than the flow's steps", name, bar(got))
					}
					for i, k := range order {
						if got[i].Key != k {
							t.Fatalf("%s: %s is not in the flow's order %v", name, bar(got), order)
						}
					}
					marked, notDone := 0, false
					for _, s := range got {
						switch s.State {
						case ProgressCurrent, ProgressFailed:
							marked++
						}
						if s.State == ProgressDone && notDone && step != StepRevokeAbsent {
							t.Fatalf("%s: %s has a step done after one not done", name, bar(got))
						}
						if s.State != ProgressDone {
							notDone = true
						}
						if s.State == ProgressFailed && step.Kind() != KindFailed && step != StepCloseRejected {
							t.Fatalf("%s: %s shows a failure at a step that did not fail", name, bar(got))
						}
					}
					if marked > 1 {
						t.Fatalf("%s: %s has more than one step current or failed", name, bar(got))
					}
				}
			}
		}
	}
}

// TestProgressNeedsHistory: the steps a request waits at in normal work
// decide the bar alone (the status read reads no history for them); the
// generic failures and closing steps do not.
func TestProgressNeedsHistory(t *testing.T) {
	for _, s := range []StepStatus{StepCreateApprovalSubmitted, StepCreateApprovalSubmitting, StepCreateAdmitted,
		StepCreatePipelineRunning, StepHandleApproved, StepHandleMerged, StepCalledBack, StepRevokeStarted, StepCreatePipelineFailed} {
		if ProgressNeedsHistory(s) {
			t.Errorf("%s needs no history", s)
		}
	}
	for _, s := range []StepStatus{StepCreateFailed, StepCreatePoolRejected, StepCloseMRClosed, StepCloseFailed, StepCloseCancelled,
		StepCloseRequesterWithdrawn, StepRenewExpired, StepRenewRevoked} {
		if !ProgressNeedsHistory(s) {
			t.Errorf("%s needs its history", s)
		}
	}
}
