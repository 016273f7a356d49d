package domain

import "slices"

// Advance is a move of an operation's binding that several paths may try
// at once (the deploy callback, reconciliation, an operator): From → To,
// with the operation's step repaired to Step when it lags behind.
type Advance struct {
	From, To BindingStatus
	// Step is the step the operation must show once the binding is in To
	// (e.g. CALLED_BACK); 0 leaves the step alone.
	Step StepStatus
	// OnlyFromSteps, when set, is a precondition on the operation's step:
	// from any other step nothing is written.
	OnlyFromSteps []StepStatus
	// TakeExpiry makes the flip also write the operation's own expiry to
	// the binding: a renewal in effect moves the access's expiry to its own.
	TakeExpiry bool
}

// Confirmation is the Advance that the deployment's "in effect" evidence
// (its callback, or reconciliation finding the merge deployed) makes for
// an operation of kind k, with step the grant's confirmation step
// (StepCalledBack or StepReconciled). A grant goes MERGED → VALIDATED. A
// revocation goes REVOKING → REVOKED, and a renewal RENEWING → VALIDATED
// taking its own expiry; their binding status covers the whole removal or
// renewal, so the move also needs it merged: the step must already be
// HANDLE_MERGED or a confirmation step (repaired).
func Confirmation(k OperationKind, step StepStatus) Advance {
	a := Advance{From: k.Binding(BindingMerged), To: k.Binding(BindingValidated), Step: k.Step(step)}
	switch k {
	case OperationRevoke:
		a.OnlyFromSteps = []StepStatus{StepHandleMerged, StepRevokeCalledBack, StepRevokeReconciled}
	case OperationRenew:
		a.OnlyFromSteps = []StepStatus{StepHandleMerged, StepCalledBack, StepReconciled}
		a.TakeExpiry = true
	}
	return a
}

// AdvanceState is what the store read, with the operation and then its
// binding locked, that an Advance is decided from.
type AdvanceState struct {
	Step StepStatus
	// Binding is the binding's status; BindingOwned says whether the row
	// exists and the operation still owns it.
	Binding      BindingStatus
	BindingOwned bool
}

// AdvancePlan is what an Advance writes; the zero plan writes nothing.
type AdvancePlan struct {
	// RepairStep is the step to write (a lagging step repaired), 0 for none.
	RepairStep StepStatus
	// Flip moves the binding From → To (with the operation's expiry when
	// the Advance takes it).
	Flip bool
}

// Writes reports whether the plan writes anything (then with one
// step-history row for what changed).
func (p AdvancePlan) Writes() bool { return p.Flip || p.RepairStep != 0 }

// PlanAdvance decides what a in state s writes. A caller that is stale or
// early — the binding gone or another operation's, outside {From, To}, or
// the step outside OnlyFromSteps — writes nothing: several paths race for
// the same move and every loser is a no-op, not an error. Its only error
// is a repair the step table does not allow (ErrIllegalTransition).
func PlanAdvance(s AdvanceState, a Advance) (AdvancePlan, error) {
	if !s.BindingOwned || (s.Binding != a.From && s.Binding != a.To) {
		return AdvancePlan{}, nil
	}
	if len(a.OnlyFromSteps) > 0 && !slices.Contains(a.OnlyFromSteps, s.Step) {
		return AdvancePlan{}, nil
	}
	var p AdvancePlan
	if a.Step != 0 && s.Step != a.Step {
		// The repair is a step transition too: the table lists which
		// steps a deploy callback or reconciliation may repair.
		if err := CheckStep(s.Step, a.Step); err != nil {
			return AdvancePlan{}, err
		}
		p.RepairStep = a.Step
	}
	p.Flip = s.Binding == a.From
	return p, nil
}
