package storetest

import (
	"slices"
	"testing"

	"changeflow/internal/domain"
	"changeflow/internal/store"
)

// Named legal step paths, each from a request's first step to the deploy
// callback, hop by hop as the workflow writes them. store.Transition checks
// every write against the central transition table (I7), so a test
// that needs an operation in some step gets there by walking one of these
// paths (WalkTo) instead of jumping; TestNamedPathsAreLegal keeps them
// legal when the table changes.
var (
	// LegacyPath: the MR is created and its check pipeline passes, then
	// the approval is submitted and granted, the bots approve, it merges,
	// the deploy calls back.
	LegacyPath = []domain.StepStatus{
		domain.StepCreateStarted, domain.StepCreateMRCreated, domain.StepCreatePipelineRunning, domain.StepCreateSucceeded,
		domain.StepCreateApprovalSubmitting, domain.StepCreateApprovalSubmitted,
		domain.StepHandleStarted, domain.StepHandleApproved, domain.StepHandleMerged, domain.StepCalledBack,
	}
	// ApproveFirstPath: the approval is submitted and granted first, then
	// the MR is created, passes its pipeline and is handled.
	ApproveFirstPath = []domain.StepStatus{
		domain.StepCreateApprovalSubmitting, domain.StepCreateApprovalSubmitted,
		domain.StepCreateStarted, domain.StepCreateMRCreated, domain.StepCreatePipelineRunning, domain.StepCreateSucceeded,
		domain.StepHandleStarted, domain.StepHandleApproved, domain.StepHandleMerged, domain.StepCalledBack,
	}
)

// WalkTo moves operationID's step along path, one store.Transition per hop,
// from the step it is in now to step to, and returns the operation as it
// then is. Only the step layer moves: a test arranges the binding it needs
// with the submission. The test fails when the current step or to is not
// on path, or to lies behind the current step.
func WalkTo(t testing.TB, s *store.Store, operationID string, path []domain.StepStatus, to domain.StepStatus) store.Operation {
	t.Helper()
	ctx := testContext(t)
	op, err := s.OperationGet(ctx, operationID)
	if err != nil {
		t.Fatalf("storetest: walk %s: %v", operationID, err)
	}
	from := slices.Index(path, domain.StepStatus(op.Step))
	end := slices.Index(path, to)
	if from < 0 || end < from {
		t.Fatalf("storetest: walk %s: no way from %s to %s on %v", operationID, domain.StepStatus(op.Step), to, path)
	}
	for _, next := range path[from+1 : end+1] {
		res, err := s.Transition(ctx, store.TransitionParams{
			OperationID: operationID, FromStep: op.Step, ToStep: int(next), Version: op.Version,
			Actor: "storetest", Note: "walk to " + to.String(),
		})
		if err != nil {
			t.Fatalf("storetest: walk %s: %v", operationID, err)
		}
		op.Step, op.Version = int(next), res.OperationVersion
	}
	if op, err = s.OperationGet(ctx, operationID); err != nil {
		t.Fatalf("storetest: walk %s: %v", operationID, err)
	}
	return op
}
