package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
)

// Step codes of docs/workflow.md, "Two layers of state" used by these tests. The store treats steps as
// opaque ints; the StepStatus enum arrives with the workflow.
const (
	stepCreateStarted   = 10001
	stepCreateSucceeded = 10002
	// stepCreateMRCreated and stepCreatePipelineRunning: on the way from
	// CREATE_STARTED to CREATE_SUCCEEDED (the table has no direct move).
	stepCreateMRCreated       = 10007
	stepCreatePipelineRunning = 10008
	stepHandleStarted         = 10101
	stepHandleApproved        = 10102
	stepCalledBack            = 10301
)

// opParams returns valid creation parameters for operationID.
func opParams(operationID, subject, target string) store.OperationCreateParams {
	return store.OperationCreateParams{
		OperationID: operationID, Subject: subject, TargetKey: target, ProjectID: 1,
		Flow: "LEGACY", Step: stepCreateStarted, Reason: "need it", Days: 7,
		ExpiresAt: time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC), RequestHash: "hash-" + operationID, Actor: "test",
	}
}

// mustSubmit submits operationID for (subject, target) with its binding in
// status and fails the test on any error, a refusal included.
func mustSubmit(t testing.TB, s *store.Store, operationID, subject, target string, status domain.BindingStatus) store.OperationSubmitResult {
	t.Helper()
	res, err := s.OperationSubmit(t.Context(), store.OperationSubmitParams{
		Operation: opParams(operationID, subject, target), BindingStatus: status,
	})
	require.NoError(t, err)
	return res
}

// approveFirstParams returns valid creation parameters for operationID at
// the approve-first entry step, CREATE_APPROVAL_SUBMITTING.
func approveFirstParams(operationID, subject, target string) store.OperationCreateParams {
	p := opParams(operationID, subject, target)
	p.Flow, p.Step = "APPROVE_FIRST", int(domain.StepCreateApprovalSubmitting)
	return p
}

// mustSubmitApproval submits operationID at the approve-first entry:
// CREATE_APPROVAL_SUBMITTING with its binding APPROVAL_SENDING, the state
// from which an approval's answer moves both layers.
func mustSubmitApproval(t testing.TB, s *store.Store, operationID, subject, target string) store.OperationSubmitResult {
	t.Helper()
	res, err := s.OperationSubmit(t.Context(), store.OperationSubmitParams{
		Operation: approveFirstParams(operationID, subject, target), BindingStatus: domain.BindingApprovalSending,
	})
	require.NoError(t, err)
	return res
}

// mustSetBinding forces a binding's status and expiry behind the store's
// back (version+1), to arrange a starting state.
func mustSetBinding(t testing.TB, s *store.Store, subject, target string, status domain.BindingStatus, expiresAt time.Time) {
	t.Helper()
	require.Equal(t, int64(1), mustExec(t, s.DB(),
		"UPDATE binding SET status = ?, expires_at = ?, version = version + 1 WHERE subject_id = ? AND target_key = ?",
		string(status), s.Dialect().Time(expiresAt), subject, target))
}

// mustBinding reads a binding.
func mustBinding(t testing.TB, s *store.Store, subject, target string) store.Binding {
	t.Helper()
	b, err := s.BindingGet(t.Context(), subject, target)
	require.NoError(t, err)
	return b
}

// mustOperation reads an operation.
func mustOperation(t testing.TB, s *store.Store, operationID string) store.Operation {
	t.Helper()
	o, err := s.OperationGet(t.Context(), operationID)
	require.NoError(t, err)
	return o
}

// mustSteps reads an operation's step history.
func mustSteps(t testing.TB, s *store.Store, operationID string) []store.OperationStep {
	t.Helper()
	steps, err := s.OperationStepList(t.Context(), operationID)
	require.NoError(t, err)
	return steps
}

// raceDuration bounds each race test, per database; long enough for
// thousands of interleavings, short enough for `make test`.
const raceDuration = 1500 * time.Millisecond

// raceGoroutines is how many goroutines each race test runs.
const raceGoroutines = 32

// runRace runs fn in raceGoroutines goroutines, all released at once,
// each looping until raceDuration has passed; an error from fn fails the
// test and stops that goroutine. fn gets the goroutine's number and its
// iteration.
func runRace(t *testing.T, fn func(ctx context.Context, g, i int) error) {
	t.Helper()
	ctx := t.Context()
	deadline := time.Now().Add(raceDuration)
	start := make(chan struct{})
	errs := make(chan error, raceGoroutines)
	var wg sync.WaitGroup
	for g := range raceGoroutines {
		wg.Go(func() {
			<-start
			for i := 0; time.Now().Before(deadline); i++ {
				if err := fn(ctx, g, i); err != nil {
					errs <- fmt.Errorf("goroutine %d, iteration %d: %w", g, i, err)
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// runAtOnce runs fn in raceGoroutines goroutines released together, once
// each, and waits for them.
func runAtOnce(fn func(g int)) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range raceGoroutines {
		wg.Go(func() {
			<-start
			fn(g)
		})
	}
	close(start)
	wg.Wait()
}
