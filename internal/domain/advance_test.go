package domain

import (
	"errors"
	"testing"
)

func TestPlanAdvance(t *testing.T) {
	grant := Confirmation(OperationGrant, StepCalledBack)
	revoke := Confirmation(OperationRevoke, StepCalledBack)
	renew := Confirmation(OperationRenew, StepReconciled)
	owned := func(step StepStatus, b BindingStatus) AdvanceState {
		return AdvanceState{Step: step, Binding: b, BindingOwned: true}
	}
	for _, c := range []struct {
		name  string
		state AdvanceState
		move  Advance
		want  AdvancePlan
		err   error
	}{
		{"a merged grant confirmed: flip and the step repaired", owned(StepHandleMerged, BindingMerged), grant,
			AdvancePlan{RepairStep: StepCalledBack, Flip: true}, nil},
		{"a second confirmation finds To: nothing", owned(StepCalledBack, BindingValidated), grant, AdvancePlan{}, nil},
		{"already in To with a lagging step: the step alone is repaired", owned(StepHandleMerged, BindingValidated), grant,
			AdvancePlan{RepairStep: StepCalledBack}, nil},
		{"a binding another operation owns: nothing", AdvanceState{Step: StepHandleMerged, Binding: BindingMerged}, grant, AdvancePlan{}, nil},
		{"a binding outside {From, To}: an early callback writes nothing", owned(StepHandleStarted, BindingMerging), grant, AdvancePlan{}, nil},
		{"a repair the step table does not allow", owned(StepCreateStarted, BindingMerged), grant, AdvancePlan{}, ErrIllegalTransition},
		{"a revocation merged: REVOKING → REVOKED, step mapped to its own", owned(StepHandleMerged, BindingRevoking), revoke,
			AdvancePlan{RepairStep: StepRevokeCalledBack, Flip: true}, nil},
		{"a revocation not merged yet: REVOKING covers it all, so nothing", owned(StepHandleStarted, BindingRevoking), revoke, AdvancePlan{}, nil},
		{"a renewal merged takes effect", owned(StepHandleMerged, BindingRenewing), renew,
			AdvancePlan{RepairStep: StepReconciled, Flip: true}, nil},
		{"a renewal waiting for its approval is not in effect", owned(StepCreateApprovalSubmitted, BindingRenewing), renew, AdvancePlan{}, nil},
		{"no step asked: the flip alone", owned(StepCreateStarted, BindingApprovalSending), Advance{From: BindingApprovalSending, To: BindingApprovalSent},
			AdvancePlan{Flip: true}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := PlanAdvance(c.state, c.move)
			if c.err != nil {
				if !errors.Is(err, c.err) {
					t.Fatalf("err = %v, want %v", err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("PlanAdvance = %+v, %v; want %+v", got, err, c.want)
			}
			if got.Writes() != (got.Flip || got.RepairStep != 0) {
				t.Fatal("Writes disagrees with the plan")
			}
		})
	}
}

func TestConfirmation(t *testing.T) {
	for _, c := range []struct {
		kind     OperationKind
		from, to BindingStatus
		step     StepStatus
		gated    bool
		expiry   bool
	}{
		{OperationGrant, BindingMerged, BindingValidated, StepCalledBack, false, false},
		{OperationRevoke, BindingRevoking, BindingRevoked, StepRevokeCalledBack, true, false},
		{OperationRenew, BindingRenewing, BindingValidated, StepCalledBack, true, true},
	} {
		a := Confirmation(c.kind, StepCalledBack)
		if a.From != c.from || a.To != c.to || a.Step != c.step || (len(a.OnlyFromSteps) > 0) != c.gated || a.TakeExpiry != c.expiry {
			t.Errorf("Confirmation(%s) = %+v", c.kind, a)
		}
		if err := CheckBinding(a.From, a.To); err != nil {
			t.Errorf("Confirmation(%s): %v", c.kind, err)
		}
	}
}
