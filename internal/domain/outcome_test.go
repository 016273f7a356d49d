package domain

import (
	"errors"
	"reflect"
	"testing"
)

func TestPlanOutcome(t *testing.T) {
	owned := func(k OperationKind, step StepStatus, b BindingStatus) OutcomeState {
		return OutcomeState{Kind: k, Step: step, NextAction: "handle", Binding: b, BindingOwned: true}
	}
	for _, c := range []struct {
		name    string
		state   OutcomeState
		outcome StepOutcome
		want    OutcomePlan
		err     error
	}{
		{
			name:    "a step moves on and the same action is due again, counting on",
			state:   OutcomeState{Kind: OperationGrant, Step: StepHandleStarted, NextAction: "handle"},
			outcome: StepOutcome{Step: StepHandleApproved, NextAction: "handle"},
			want:    OutcomePlan{Step: StepHandleApproved, StepWritten: true, ReleaseLease: true, Action: ActionSet, NextAction: "handle"},
		},
		{
			name:    "a different next action starts its own retry budget",
			state:   OutcomeState{Kind: OperationGrant, Step: StepHandleStarted, NextAction: "handle"},
			outcome: StepOutcome{NextAction: "merge"},
			want:    OutcomePlan{Step: StepHandleStarted, ReleaseLease: true, Action: ActionSet, NextAction: "merge", Attempts: AttemptsReset},
		},
		{
			name:    "a run that made no call gives its attempt back",
			state:   OutcomeState{Kind: OperationGrant, Step: StepHandleStarted, NextAction: "handle"},
			outcome: StepOutcome{NextAction: "handle", Unattempted: true},
			want:    OutcomePlan{Step: StepHandleStarted, ReleaseLease: true, Action: ActionSet, NextAction: "handle", Attempts: AttemptsGivenBack},
		},
		{
			name:    "no next action: the request needs no more work",
			state:   OutcomeState{Kind: OperationGrant, Step: StepHandleStarted, NextAction: "handle"},
			outcome: StepOutcome{},
			want:    OutcomePlan{Step: StepHandleStarted, ReleaseLease: true, Action: ActionClear},
		},
		{
			name:    "a failure keeps the action for a retrigger but makes it not due",
			state:   OutcomeState{Kind: OperationGrant, Step: StepHandleStarted, NextAction: "handle"},
			outcome: StepOutcome{Step: StepHandleMergeFailed, KeepAction: true},
			want:    OutcomePlan{Step: StepHandleMergeFailed, StepWritten: true, ReleaseLease: true, Action: ActionStop},
		},
		{
			name:    "progress under a kept lease touches neither lease nor action",
			state:   OutcomeState{Kind: OperationGrant, Step: StepHandleStarted, NextAction: "handle"},
			outcome: StepOutcome{Step: StepHandleApproved, KeepLease: true, NextAction: "ignored"},
			want:    OutcomePlan{Step: StepHandleApproved, StepWritten: true, Action: ActionUntouched},
		},
		{
			name:    "a step the table does not allow writes nothing",
			state:   OutcomeState{Kind: OperationGrant, Step: StepHandleMerged},
			outcome: StepOutcome{Step: StepCreateStarted},
			err:     ErrIllegalTransition,
		},
		{
			name:    "the safety net's failure loses to a stopped step, and the binding is not read",
			state:   OutcomeState{Kind: OperationGrant, Step: StepHandlePipelineFailed},
			outcome: StepOutcome{Step: StepHandleMergeFailed, Binding: BindingHandleFailed, UnlessStopped: true, KeepAction: true},
			want:    OutcomePlan{Step: StepHandlePipelineFailed, ReleaseLease: true, Action: ActionStop},
		},
		{
			name:    "a grant's binding moves and flips",
			state:   owned(OperationGrant, StepHandleStarted, BindingMerging),
			outcome: StepOutcome{Step: StepHandleMerged, Binding: BindingMerged, NextAction: "handle"},
			want: OutcomePlan{Step: StepHandleMerged, StepWritten: true, Move: BindingMerged,
				Flip:         &OutcomeFlip{From: BindingMerging, To: BindingMerged, Moved: true},
				ReleaseLease: true, Action: ActionSet, NextAction: "handle"},
		},
		{
			name:    "a binding already there is not written",
			state:   owned(OperationGrant, StepHandleStarted, BindingMerging),
			outcome: StepOutcome{Step: StepHandleApproved, Binding: BindingMerging, NextAction: "handle"},
			want:    OutcomePlan{Step: StepHandleApproved, StepWritten: true, ReleaseLease: true, Action: ActionSet, NextAction: "handle"},
		},
		{
			name:    "a binding move the table does not allow writes nothing",
			state:   owned(OperationGrant, StepHandleStarted, BindingValidated),
			outcome: StepOutcome{Step: StepHandleApproved, Binding: BindingMRCreating},
			err:     ErrIllegalTransition,
		},
		{
			name:    "a binding another operation took over is not this step's to write",
			state:   OutcomeState{Kind: OperationGrant, Step: StepHandleStarted, Binding: BindingMerging},
			outcome: StepOutcome{Step: StepHandleMerged, Binding: BindingMerged},
			err:     ErrPreempted,
		},
		{
			name:    "a revocation's merge flips in the grant's words while its binding stays REVOKING",
			state:   owned(OperationRevoke, StepHandleStarted, BindingRevoking),
			outcome: StepOutcome{Step: StepHandleMerged, Binding: BindingMerged, NextAction: "handle"},
			want: OutcomePlan{Step: StepHandleMerged, StepWritten: true,
				Flip:         &OutcomeFlip{From: BindingMerging, To: BindingMerged},
				ReleaseLease: true, Action: ActionSet, NextAction: "handle"},
		},
		{
			name:    "a revocation's step within one milestone does not flip",
			state:   owned(OperationRevoke, StepHandleStarted, BindingRevoking),
			outcome: StepOutcome{Step: StepHandleApproved, Binding: BindingMerging, NextAction: "handle"},
			want:    OutcomePlan{Step: StepHandleApproved, StepWritten: true, ReleaseLease: true, Action: ActionSet, NextAction: "handle"},
		},
		{
			name:    "a revocation in effect shows REVOKED",
			state:   owned(OperationRevoke, StepHandleMerged, BindingRevoking),
			outcome: StepOutcome{Step: StepCalledBack, Binding: BindingValidated},
			want: OutcomePlan{Step: StepCalledBack, StepWritten: true, Move: BindingRevoked,
				Flip: &OutcomeFlip{From: BindingRevoking, To: BindingRevoked, Moved: true}, ReleaseLease: true, Action: ActionClear},
		},
		{
			name:    "a renewal rejected hands the row back to its grant",
			state:   owned(OperationRenew, StepCreateApprovalSubmitted, BindingRenewing),
			outcome: StepOutcome{Step: StepCloseRejected, Binding: BindingRejected},
			want: OutcomePlan{Step: StepCloseRejected, StepWritten: true, Move: BindingValidated, Restore: true,
				Flip:         &OutcomeFlip{From: BindingRenewing, To: BindingValidated, Moved: true, EndedWithoutEffect: true},
				ReleaseLease: true, Action: ActionClear},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := PlanOutcome(c.state, c.outcome)
			if c.err != nil {
				if !errors.Is(err, c.err) {
					t.Fatalf("err = %v, want %v", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("plan\n got %+v (flip %+v)\nwant %+v (flip %+v)", got, got.Flip, c.want, c.want.Flip)
			}
			if got.HistoryRow() != (got.StepWritten || got.Flip != nil) {
				t.Fatal("HistoryRow disagrees with the plan")
			}
		})
	}
}

// TestOutcomeNeedsBinding: only an outcome that writes a binding status
// reads (and locks) the binding row.
func TestOutcomeNeedsBinding(t *testing.T) {
	for _, c := range []struct {
		outcome StepOutcome
		step    StepStatus
		want    bool
	}{
		{StepOutcome{Step: StepHandleApproved}, StepHandleStarted, false},
		{StepOutcome{Binding: BindingMerged}, StepHandleStarted, true},
		{StepOutcome{Binding: BindingHandleFailed, UnlessStopped: true}, StepHandleStarted, true},
		{StepOutcome{Binding: BindingHandleFailed, UnlessStopped: true}, StepHandlePipelineFailed, false},
		{StepOutcome{Binding: BindingHandleFailed, UnlessStopped: true}, StepHandlePipelinePending, false},
	} {
		if got := c.outcome.NeedsBinding(c.step); got != c.want {
			t.Errorf("%+v.NeedsBinding(%v) = %v, want %v", c.outcome, c.step, got, c.want)
		}
	}
}
