package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/store"
)

// The example step set proves the engine; it is not the business steps.

// createFailure is the declared failure of every example step.
var createDecl = engine.Declaration{
	OnError:  engine.Failure{Step: domain.StepCreateFailed, Binding: domain.BindingCreateFailed},
	OnReject: engine.Failure{Step: domain.StepCreatePoolRejected, Binding: domain.BindingCreateFailed},
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
func okStep(c *counter, next string) engine.Step {
	return engine.StepFunc{Decl: createDecl, Fn: func(_ context.Context, w engine.Work) (engine.Outcome, error) {
		c.add(w.Operation.OperationID)
		return engine.Done(next, engine.Transition{Step: domain.StepCreateMRCreated}), nil
	}}
}

// flakyStep asks for a retry until its attempt reaches ok.
func flakyStep(c *counter, ok int) engine.Step {
	return engine.StepFunc{Decl: createDecl, Fn: func(_ context.Context, w engine.Work) (engine.Outcome, error) {
		c.add(w.Operation.OperationID)
		if w.Attempt < ok {
			return engine.RetryAfter(0, fmt.Sprintf("try %d", w.Attempt)), nil
		}
		return engine.Done("", engine.Transition{Step: domain.StepCreateMRCreated}), nil
	}}
}

// errStep returns an error; panicStep panics.
var (
	errStep = engine.StepFunc{Decl: createDecl, Fn: func(context.Context, engine.Work) (engine.Outcome, error) {
		return engine.Outcome{}, errors.New("gitlab said no")
	}}
	panicStep = engine.StepFunc{Decl: createDecl, Fn: func(context.Context, engine.Work) (engine.Outcome, error) {
		panic("nil map")
	}}
	// specificStep writes a more specific failure itself, then errors.
	specificStep = engine.StepFunc{Decl: createDecl, Fn: func(ctx context.Context, w engine.Work) (engine.Outcome, error) {
		if err := w.Progress(ctx, engine.Transition{Step: domain.StepCreateMRCreated}); err != nil {
			return engine.Outcome{}, err
		}
		if err := w.Progress(ctx, engine.Transition{Step: domain.StepCreatePipelineFailed, Binding: domain.BindingCreateFailed}); err != nil {
			return engine.Outcome{}, err
		}
		return engine.Outcome{}, errors.New("after the specific state")
	}}
	// illegalStep asks for a move the table refuses.
	illegalStep = engine.StepFunc{Decl: createDecl, Fn: func(context.Context, engine.Work) (engine.Outcome, error) {
		return engine.Done("", engine.Transition{Step: domain.StepCalledBack, Binding: domain.BindingValidated}), nil
	}}
)

// blockStep signals started and blocks until release is closed or ctx ends.
func blockStep(started chan<- string, release <-chan struct{}) engine.Step {
	return engine.StepFunc{Decl: createDecl, Fn: func(ctx context.Context, w engine.Work) (engine.Outcome, error) {
		started <- w.Operation.OperationID
		select {
		case <-release:
			return engine.Done("", engine.Transition{Step: domain.StepCreateMRCreated}), nil
		case <-ctx.Done():
			return engine.Outcome{}, ctx.Err()
		}
	}}
}

// pollStep polls a pipeline that never settles.
func pollStep(tier engine.PollTier, c *counter) engine.Step {
	return engine.StepFunc{Decl: createDecl, Fn: func(_ context.Context, w engine.Work) (engine.Outcome, error) {
		c.add(w.Operation.OperationID)
		return engine.PollAgain(tier, w,
			engine.Transition{Step: domain.StepCreatePipelineRunning},
			engine.Failure{Step: domain.StepCreatePipelinePending}, "check pipeline did not finish"), nil
	}}
}

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
func newEngine(t testing.TB, s *store.Store, owner string, o engine.Options, reg map[string]engine.Step) *engine.Engine {
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
	e, err := engine.New(o)
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
