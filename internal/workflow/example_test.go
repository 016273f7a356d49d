package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/workflow"
)

// The example step set proves the engine; it is not the business steps.

// createFailure is the declared failure of every example step.
var createDecl = workflow.Declaration{
	OnError:  workflow.Failure{Step: domain.StepCreateFailed, Binding: domain.BindingCreateFailed},
	OnReject: workflow.Failure{Step: domain.StepCreatePoolRejected, Binding: domain.BindingCreateFailed},
}

// counter counts side effects per operation.
type counter struct {
	mu sync.Mutex
	n  map[string]int
	ch chan string
}

func newCounter() *counter { return &counter{n: map[string]int{}, ch: make(chan string, 1024)} }

func (c *counter) add(op string) {
	c.mu.Lock()
	c.n[op]++
	c.mu.Unlock()
	c.ch <- op
}

func (c *counter) get(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[op]
}

// okStep has one side effect and finishes: CREATE_MR_CREATED, then next.
func okStep(c *counter, next string) workflow.Step {
	return workflow.StepFunc{Decl: createDecl, Fn: func(_ context.Context, w workflow.Work) (workflow.Outcome, error) {
		c.add(w.Operation.OperationID)
		return workflow.Done(next, workflow.Transition{Step: domain.StepCreateMRCreated}), nil
	}}
}

// flakyStep asks for a retry until its attempt reaches ok.
func flakyStep(c *counter, ok int) workflow.Step {
	return workflow.StepFunc{Decl: createDecl, Fn: func(_ context.Context, w workflow.Work) (workflow.Outcome, error) {
		c.add(w.Operation.OperationID)
		if w.Attempt < ok {
			return workflow.RetryAfter(0, fmt.Sprintf("try %d", w.Attempt)), nil
		}
		return workflow.Done("", workflow.Transition{Step: domain.StepCreateMRCreated}), nil
	}}
}

// errStep returns an error; panicStep panics.
var (
	errStep = workflow.StepFunc{Decl: createDecl, Fn: func(context.Context, workflow.Work) (workflow.Outcome, error) {
		return workflow.Outcome{}, errors.New("gitlab said no")
	}}
	panicStep = workflow.StepFunc{Decl: createDecl, Fn: func(context.Context, workflow.Work) (workflow.Outcome, error) {
		panic("nil map")
	}}
	// specificStep writes a more specific failure itself, then errors.
	specificStep = workflow.StepFunc{Decl: createDecl, Fn: func(ctx context.Context, w workflow.Work) (workflow.Outcome, error) {
		if err := w.Progress(ctx, workflow.Transition{Step: domain.StepCreateMRCreated}); err != nil {
			return workflow.Outcome{}, err
		}
		if err := w.Progress(ctx, workflow.Transition{Step: domain.StepCreatePipelineFailed, Binding: domain.BindingCreateFailed}); err != nil {
			return workflow.Outcome{}, err
		}
		return workflow.Outcome{}, errors.New("after the specific state")
	}}
	// illegalStep asks for a move the table refuses.
	illegalStep = workflow.StepFunc{Decl: createDecl, Fn: func(context.Context, workflow.Work) (workflow.Outcome, error) {
		return workflow.Done("", workflow.Transition{Step: domain.StepCalledBack, Binding: domain.BindingValidated}), nil
	}}
)

// blockStep signals started and blocks until release is closed or ctx ends.
func blockStep(started chan<- string, release <-chan struct{}) workflow.Step {
	return workflow.StepFunc{Decl: createDecl, Fn: func(ctx context.Context, w workflow.Work) (workflow.Outcome, error) {
		started <- w.Operation.OperationID
		select {
		case <-release:
			return workflow.Done("", workflow.Transition{Step: domain.StepCreateMRCreated}), nil
		case <-ctx.Done():
			return workflow.Outcome{}, ctx.Err()
		}
	}}
}

// pollStep polls a pipeline that never settles.
func pollStep(tier config.PollingTier, c *counter) workflow.Step {
	return workflow.StepFunc{Decl: createDecl, Fn: func(_ context.Context, w workflow.Work) (workflow.Outcome, error) {
		c.add(w.Operation.OperationID)
		return workflow.PollAgain(tier, w,
			workflow.Transition{Step: domain.StepCreatePipelineRunning},
			workflow.Failure{Step: domain.StepCreatePipelinePending}, "check pipeline did not finish"), nil
	}}
}

// fakeClock is an injected clock the test advances.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// submit creates operationID at the legacy entry with action due now.
func submit(t testing.TB, s *store.Store, operationID, action string) {
	t.Helper()
	_, err := s.OperationSubmit(t.Context(), store.OperationSubmitParams{
		Operation: store.OperationCreateParams{
			OperationID: operationID, Subject: "u-" + operationID, TargetKey: "t", ProjectID: 1, Flow: "LEGACY",
			Step: int(domain.StepCreateStarted), Actor: "test", NextAction: action,
		},
		BindingStatus: domain.BindingMRCreating,
	})
	require.NoError(t, err)
}

// newEngine returns an engine on s with the example steps registered under
// their names; stopped when the test ends.
func newEngine(t testing.TB, s *store.Store, owner string, o workflow.Options, reg map[string]workflow.Step) *workflow.Engine {
	t.Helper()
	o.Store, o.Owner = s, owner
	if o.Workers == 0 {
		o.Workers, o.QueueSize = 4, 4
	}
	if o.Lease == 0 {
		o.Lease = time.Minute
	}
	if o.PollInterval == 0 {
		o.PollInterval = 20 * time.Millisecond
	}
	e, err := workflow.New(o)
	require.NoError(t, err)
	for a, st := range reg {
		e.Register(a, st)
	}
	t.Cleanup(e.Stop)
	return e
}

// waitOp waits until cond holds for operationID's row.
func waitOp(t testing.TB, s *store.Store, operationID string, cond func(store.Operation) bool) store.Operation {
	t.Helper()
	var o store.Operation
	require.Eventually(t, func() bool {
		var err error
		o, err = s.OperationGet(context.Background(), operationID)
		return err == nil && cond(o)
	}, 15*time.Second, 10*time.Millisecond, "operation %s never got there", operationID)
	return o
}

func finished(o store.Operation) bool { return o.NextAction == "" && o.LeaseOwner == "" }

func stopped(o store.Operation) bool { return o.DueAt.IsZero() && o.LeaseOwner == "" }
