package engine

import (
	"context"
	"errors"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/store"
)

// Transition is the state a step's outcome writes: both layers,
// checked against the central table (I7). Zero fields leave a layer alone.
type Transition struct {
	Step    domain.StepStatus
	Binding domain.BindingStatus
	// Fields are link columns to set with the transition (MR, branch …).
	Fields store.WorkFields
	// Note goes to the step history.
	Note string
}

// Failure is a declared failure state: the step and binding status the
// row is left in.
type Failure struct {
	Step    domain.StepStatus
	Binding domain.BindingStatus
}

// OutcomeKind says what a step's run came to.
type OutcomeKind int

// Outcome kinds.
const (
	// OutcomeDone: the action finished; Next (if any) is due at once.
	OutcomeDone OutcomeKind = iota + 1
	// OutcomeWait: run the same action again at a time (a poll).
	OutcomeWait
	// OutcomeRetry: the action failed transiently; run it again after a
	// delay. Bounded by Options.MaxRetries, then the declared failure.
	OutcomeRetry
	// OutcomeFail: the action failed in a way the step recognized; the row
	// stops in the given (more specific) failure state.
	OutcomeFail
	// OutcomeTimedOut: a poll ran out of time; the outcome is unknown
	// — distinct from failed, for hints and metrics.
	OutcomeTimedOut
)

// String names the kind.
func (k OutcomeKind) String() string {
	switch k {
	case OutcomeDone:
		return "done"
	case OutcomeWait:
		return "wait"
	case OutcomeRetry:
		return "retry"
	case OutcomeFail:
		return "fail"
	case OutcomeTimedOut:
		return "timed out"
	}
	return "unknown"
}

// FlipHook runs after the outcome's transaction committed, only when it
// flipped the binding (I9).
type FlipHook func(ctx context.Context, f store.Flip)

// Outcome is what a step returns: a sum type built by Done, WaitUntil,
// RetryAfter, Fail and TimedOut, inspected with Kind.
type Outcome struct {
	kind   OutcomeKind
	next   string
	at     time.Time
	delay  time.Duration
	t      Transition
	reason string
	hooks  []FlipHook
	// unattempted marks a retry whose step made no remote call (the
	// client's breaker refused it): it does not count against
	// Options.MaxRetries, and the claim's attempt is given back.
	unattempted bool
}

// Waiter is an error that asks to be waited out rather than failed: a
// dependency that refused the call before doing anything with it (a rate
// limit). WaitFor says how long, and whether err is such a refusal at all.
// A step's error for which it holds is run again after that wait as an
// unattempted retry, never the declared failure.
type Waiter interface {
	error
	WaitFor() (time.Duration, bool)
}

// waitFor is the wait err asks for, if it wraps a Waiter that says so.
func waitFor(err error) (time.Duration, bool) {
	if w, ok := errors.AsType[Waiter](err); ok {
		return w.WaitFor()
	}
	return 0, false
}

// Done finishes the action, writes t and makes next due at once; next ""
// means the operation needs no more work from the engine (it waits for
// something outside, or it is finished).
func Done(next string, t Transition) Outcome { return Outcome{kind: OutcomeDone, next: next, t: t} }

// WaitUntil runs the same action again at at (engine clock), writing t
// now (e.g. a running state on the first poll; zero to write nothing).
func WaitUntil(at time.Time, t Transition) Outcome { return Outcome{kind: OutcomeWait, at: at, t: t} }

// RetryAfter runs the same action again after d; reason is stored as
// last_error. Options.MaxRetries bounds it.
func RetryAfter(d time.Duration, reason string) Outcome {
	return Outcome{kind: OutcomeRetry, delay: d, reason: reason}
}

// Unattempted marks a retry whose step made no remote call (its client's
// breaker refused it): it does not count against Options.MaxRetries, and
// the claim's attempt is given back, so Work.Attempt counts only runs that
// tried. Options.MaxClaims still bounds how often the action is claimed.
// On any other outcome it changes nothing.
func (o Outcome) Unattempted() Outcome {
	if o.kind == OutcomeRetry {
		o.unattempted = true
	}
	return o
}

// Fail stops the row in a specific failure state, which wins over the
// step's declared one.
func Fail(step domain.StepStatus, binding domain.BindingStatus, reason string) Outcome {
	return Outcome{kind: OutcomeFail, t: Transition{Step: step, Binding: binding, Note: reason}, reason: reason}
}

// TimedOut stops a poll that ran out of time in a pending state.
func TimedOut(step domain.StepStatus, binding domain.BindingStatus, reason string) Outcome {
	return Outcome{kind: OutcomeTimedOut, t: Transition{Step: step, Binding: binding, Note: reason}, reason: reason}
}

// OnFlip adds a hook run after commit if this outcome flipped the binding.
func (o Outcome) OnFlip(h FlipHook) Outcome {
	o.hooks = append(append([]FlipHook(nil), o.hooks...), h)
	return o
}

// WithReason sets the reason stored as the row's last_error ("" clears
// it): a poll that waits again can keep what went wrong with the last
// look in view while it waits.
func (o Outcome) WithReason(reason string) Outcome {
	o.reason = reason
	return o
}

// Kind returns the outcome's kind.
func (o Outcome) Kind() OutcomeKind { return o.kind }

// Next returns a Done outcome's next action.
func (o Outcome) Next() string { return o.next }

// Transition returns the state the outcome writes.
func (o Outcome) Transition() Transition { return o.t }

// At returns a Wait's time.
func (o Outcome) At() time.Time { return o.at }

// Delay returns a Retry's delay.
func (o Outcome) Delay() time.Duration { return o.delay }

// IsUnattempted says a Retry does not count against Options.MaxRetries
// (Unattempted).
func (o Outcome) IsUnattempted() bool { return o.unattempted }

// Reason returns the reason of a Retry, Fail or TimedOut.
func (o Outcome) Reason() string { return o.reason }
