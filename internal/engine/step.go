package engine

import (
	"context"
	"time"

	"changeflow/internal/store"
)

// Step is one action of a flow. Run must be safe to run twice (a
// crash or a lost lease re-runs it): it reads remote state before it
// writes. It must not sleep; it returns an Outcome and the engine persists
// it. An error or a panic leaves the declared failure state.
type Step interface {
	// Declare names the step's failure states. Called once at Register.
	Declare() Declaration
	// Run runs the action once for w. ctx ends before the lease does.
	Run(ctx context.Context, w Work) (Outcome, error)
}

// Declaration is a step's declared failure states: the step and
// status written when it errs.
type Declaration struct {
	// OnError is written by the safety net when Run returns an error or
	// panics, unless the row already shows a more specific failed or
	// pending step. Required.
	OnError Failure
	// OnReject is written when the worker pool refuses the work;
	// zero means OnError.
	OnReject Failure
	// OnExhausted, when set, answers a run whose retries ran out — a
	// RetryAfter beyond Options.MaxRetries, or a claim beyond
	// Options.MaxClaims — instead of OnError; reason says which bound and
	// the last retry's reason. The outcome it returns is recorded like a
	// step's (a Done whose next action repairs the situation, a Fail). A
	// step whose failure cannot simply stop its row needs it: a row
	// stopped in OnError keeps holding what it holds (a slot other rows
	// wait for) until something else times it out. An error, a panic,
	// or a Retry or Wait it returns (which would loop past the bound) falls
	// back to OnError.
	OnExhausted func(ctx context.Context, w Work, reason string) (Outcome, error)
}

// Work is what a step runs on.
type Work struct {
	// Operation is the row as claimed.
	Operation store.Operation
	// Action is the action being run (Operation.NextAction).
	Action string
	// Attempt counts the claims of this action, this one included: 1 on
	// the first run, growing with every WaitUntil, RetryAfter and expired
	// lease; a new action starts again at 1.
	Attempt int
	// Now is the engine clock at the start of the run.
	Now time.Time
	// Deadline is when ctx ends: shortly before the lease expires.
	Deadline time.Time

	progress func(ctx context.Context, t Transition) error
}

// Progress writes an intermediate state now, under the lease, and keeps
// running (e.g. a branch created, before the commit on it). A lost lease is
// an error wrapping domain.ErrPreempted: the step must stop.
func (w Work) Progress(ctx context.Context, t Transition) error {
	return w.progress(ctx, t)
}

// WithProgress returns w writing its intermediate states through fn
// instead of the engine's store under the lease: for a step's function
// run outside the engine, as a test of one step does.
func (w Work) WithProgress(fn func(ctx context.Context, t Transition) error) Work {
	w.progress = fn
	return w
}

// StepFunc adapts a function and its declaration to Step.
type StepFunc struct {
	Decl Declaration
	Fn   func(ctx context.Context, w Work) (Outcome, error)
}

// Declare returns f.Decl.
func (f StepFunc) Declare() Declaration { return f.Decl }

// Run calls f.Fn.
func (f StepFunc) Run(ctx context.Context, w Work) (Outcome, error) { return f.Fn(ctx, w) }
