package domain

import "fmt"

// StepOutcome is what a finished step asks to be written for its
// operation: the step and binding status it reached and what runs next.
// PlanOutcome decides from it, and from the state the store read under the
// step's lease, exactly what is written; the store only applies the plan.
type StepOutcome struct {
	// Step is the step to write; 0 leaves the step alone.
	Step StepStatus
	// Binding is the binding status to write, named in the grant's
	// vocabulary (a revocation's or renewal's own status is derived by
	// OperationKind.Binding); "" leaves the binding alone.
	Binding BindingStatus
	// UnlessStopped writes Step and Binding only when the stored step is
	// not already a failed or pending step: the safety net's declared
	// failure loses to a more specific state the step wrote itself.
	UnlessStopped bool
	// NextAction is the action to run next; "" with KeepAction false
	// clears it (the request needs no more work).
	NextAction string
	// Unattempted gives the claim's attempt back when the same action is
	// due again: the step made no call (its client's breaker refused it),
	// so the run must not count against the action's retry budget.
	Unattempted bool
	// KeepAction keeps the next action but makes it not due: the row
	// stopped (a failure) and remembers where, so a retrigger re-runs it.
	KeepAction bool
	// KeepLease writes a progress state and keeps the lease (the step
	// goes on); the next-action fields are then ignored.
	KeepLease bool
}

// OutcomeState is what the store read, under the step's lease, that an
// outcome is decided from.
type OutcomeState struct {
	Kind       OperationKind
	Step       StepStatus
	NextAction string
	// Binding and BindingOwned are read only when the outcome
	// NeedsBinding: the binding's status, and whether the row exists and
	// is still owned by this operation.
	Binding      BindingStatus
	BindingOwned bool
}

// NeedsBinding reports whether deciding o from step needs the binding
// read (and locked, after the operation): only an outcome that writes a
// binding status does, so every other outcome leaves the row unlocked.
func (o StepOutcome) NeedsBinding(step StepStatus) bool {
	return o.writesState(step) && o.Binding != ""
}

func (o StepOutcome) writesState(step StepStatus) bool {
	return !(o.UnlessStopped && step.Stopped())
}

// ActionChange is what an outcome does to the operation's next action.
type ActionChange int

const (
	// ActionUntouched: the lease is kept, the action with it.
	ActionUntouched ActionChange = iota
	// ActionStop keeps the action but makes it not due.
	ActionStop
	// ActionClear removes the action and resets the attempts: no more work.
	ActionClear
	// ActionSet makes OutcomePlan.NextAction due after the outcome's delay.
	ActionSet
)

// AttemptsChange is what an ActionSet does to the action's attempt count.
type AttemptsChange int

const (
	// AttemptsKept: the same action again counts on from its attempts.
	AttemptsKept AttemptsChange = iota
	// AttemptsReset: a different action starts its own retry budget.
	AttemptsReset
	// AttemptsGivenBack: the same action again, and this run made no call.
	AttemptsGivenBack
)

// OutcomeFlip is a change of the binding an outcome makes visible to the
// after-commit side effects (which act only on a flip).
type OutcomeFlip struct {
	From, To BindingStatus
	// Moved: the binding row itself was written (its version goes up by
	// one). A revocation or renewal crossing a grant milestone while its
	// own status stays put flips without moving the row.
	Moved bool
	// EndedWithoutEffect: a renewal ended without effect and the row
	// went back to the grant it renews, VALIDATED as before.
	EndedWithoutEffect bool
}

// OutcomePlan is exactly what recording an outcome writes.
type OutcomePlan struct {
	// Step is the step after; StepWritten says whether it changed.
	Step        StepStatus
	StepWritten bool
	// Move is the binding status to write ("" writes none); Restore hands
	// the row back to the grant the renewal renews.
	Move    BindingStatus
	Restore bool
	// Flip is non-nil when the binding changed as the side effects see it.
	Flip *OutcomeFlip
	// ReleaseLease ends the step's lease; Action and Attempts say what
	// happens to the next action (ActionUntouched while the lease is kept).
	ReleaseLease bool
	Action       ActionChange
	NextAction   string
	Attempts     AttemptsChange
}

// HistoryRow reports whether the plan writes a step-history row: every
// change of the step or of the binding as the side effects see it is one.
func (p OutcomePlan) HistoryRow() bool { return p.StepWritten || p.Flip != nil }

// PlanOutcome decides what recording outcome o writes for an operation in
// state s. Its errors wrap ErrIllegalTransition (a move the tables do not
// allow) or ErrPreempted (the binding is no longer this operation's), and
// then nothing of the outcome is written.
func PlanOutcome(s OutcomeState, o StepOutcome) (OutcomePlan, error) {
	p := OutcomePlan{Step: s.Step}
	if o.writesState(s.Step) && o.Step != 0 {
		if err := CheckStep(s.Step, o.Step); err != nil {
			return OutcomePlan{}, err
		}
		p.Step = o.Step
	}
	p.StepWritten = p.Step != s.Step
	if o.NeedsBinding(s.Step) {
		if err := planBinding(&p, s, o); err != nil {
			return OutcomePlan{}, err
		}
	}
	p.ReleaseLease = !o.KeepLease
	switch {
	case o.KeepLease:
		p.Action = ActionUntouched
	case o.KeepAction:
		p.Action = ActionStop
	case o.NextAction == "":
		p.Action = ActionClear
	default:
		p.Action, p.NextAction = ActionSet, o.NextAction
		switch {
		case o.NextAction != s.NextAction:
			p.Attempts = AttemptsReset
		case o.Unattempted:
			p.Attempts = AttemptsGivenBack
		}
	}
	return p, nil
}

// planBinding decides the binding's part of an outcome that writes one.
// A renewal that ends without effect hands the row back to the grant it
// renews (Restore). A revocation's binding stays REVOKING while its
// removal goes through the grant's milestones (a renewal's RENEWING): the
// move a grant's binding would have made there (MERGING → MERGED at the
// merge) is its flip, so the after-commit side effects — the deploy
// callback that came before the merge was written — act for it as for a
// grant. That flip is named in the grant's vocabulary.
func planBinding(p *OutcomePlan, s OutcomeState, o StepOutcome) error {
	if !s.BindingOwned {
		return fmt.Errorf("binding is not owned by the operation: %w", ErrPreempted)
	}
	to := s.Kind.Binding(o.Binding)
	switch {
	case s.Binding != to:
		if err := CheckBinding(s.Binding, to); err != nil {
			return err
		}
		p.Move, p.Restore = to, s.Kind.EndsWithoutEffect(o.Binding)
		p.Flip = &OutcomeFlip{From: s.Binding, To: to, Moved: true, EndedWithoutEffect: p.Restore}
	case s.Kind != OperationGrant && p.Step != s.Step:
		from, to := s.Kind.GrantView(s.Binding, s.Step), s.Kind.GrantView(s.Binding, p.Step)
		if from != to {
			p.Flip = &OutcomeFlip{From: from, To: to}
		}
	}
	return nil
}
