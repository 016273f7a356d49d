package store_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

func TestBindingMarkValidated(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		binding  domain.BindingStatus
		step     int
		reapply  bool   // a newer request took the relationship over
		callFor  string // operation to call with; "" for the arranged one
		wantFlip bool
		wantStep int // the operation's step afterwards
		wantRows int // step-history rows this call appended
	}{
		{name: "MERGED flips to VALIDATED and repairs a lagging step", binding: domain.BindingMerged, step: stepHandleApproved,
			wantFlip: true, wantStep: stepCalledBack, wantRows: 1},
		{name: "MERGED with the step already called back flips alone", binding: domain.BindingMerged, step: stepCalledBack,
			wantFlip: true, wantStep: stepCalledBack, wantRows: 1},
		{name: "VALIDATED with a lagging step is repaired without a flip", binding: domain.BindingValidated, step: stepHandleApproved,
			wantStep: stepCalledBack, wantRows: 1},
		{name: "VALIDATED and called back is an idempotent no-op", binding: domain.BindingValidated, step: stepCalledBack,
			wantStep: stepCalledBack},
		{name: "a binding still MERGING is not advanced", binding: domain.BindingMerging, step: stepHandleStarted,
			wantStep: stepHandleStarted},
		{name: "a binding owned by a newer request is not advanced", binding: domain.BindingRejected, step: stepHandleApproved, reapply: true,
			wantStep: stepHandleApproved},
		{name: "an unknown operation is a no-op", binding: domain.BindingMerged, step: stepHandleApproved, callFor: "nope",
			wantStep: stepHandleApproved},
	}
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				subject, opID := fmt.Sprintf("u%d", i), fmt.Sprintf("op-%d", i)
				mustSubmit(t, s, opID, subject, "t", tt.binding)
				storetest.WalkTo(t, s, opID, storetest.LegacyPath, domain.StepStatus(tt.step))
				if tt.reapply {
					mustSubmit(t, s, opID+"-newer", subject, "t", domain.BindingMerged)
				}
				call := opID
				if tt.callFor != "" {
					call = tt.callFor
				}
				opBefore, bBefore := mustOperation(t, s, opID), mustBinding(t, s, subject, "t")
				stepsBefore := len(mustSteps(t, s, opID))

				flip, err := s.BindingMarkValidated(t.Context(), store.BindingMarkValidatedParams{
					OperationID: call, CalledBackStep: stepCalledBack, Actor: "deploy-callback", Note: "in effect",
				})
				require.NoError(t, err)
				op, b := mustOperation(t, s, opID), mustBinding(t, s, subject, "t")
				steps := mustSteps(t, s, opID)
				require.Equal(t, tt.wantStep, op.Step)
				require.Len(t, steps, stepsBefore+tt.wantRows)
				if tt.wantStep != opBefore.Step {
					require.Equal(t, opBefore.Version+1, op.Version, "repair bumps the version")
				} else {
					require.Equal(t, opBefore.Version, op.Version, "operation untouched")
				}
				if !tt.wantFlip {
					require.Nil(t, flip)
					require.Equal(t, bBefore, b, "binding untouched")
					return
				}
				require.Equal(t, &store.Flip{
					OperationID: opID, Subject: subject, TargetKey: "t",
					From: domain.BindingMerged, To: domain.BindingValidated, BindingVersion: bBefore.Version + 1,
					FromStep: opBefore.Step, ToStep: stepCalledBack,
				}, flip)
				require.Equal(t, domain.BindingValidated, b.Status)
				require.Equal(t, bBefore.Version+1, b.Version)
				last := steps[len(steps)-1]
				require.Equal(t, domain.BindingMerged, last.FromBinding)
				require.Equal(t, domain.BindingValidated, last.ToBinding)
				require.Equal(t, opBefore.Step, last.FromStep)
				require.Equal(t, stepCalledBack, last.ToStep)
				require.Equal(t, "deploy-callback", last.Actor)

				again, err := s.BindingMarkValidated(t.Context(), store.BindingMarkValidatedParams{OperationID: opID, CalledBackStep: stepCalledBack})
				require.NoError(t, err)
				require.Nil(t, again, "a second call finds VALIDATED: no flip")
			})
		}
	})
}

func TestBindingAdvanceIsGeneral(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		mustSubmit(t, s, "op-1", "alice", "t", domain.BindingApprovalSending)
		t.Run("any move, step left alone", func(t *testing.T) {
			flip, err := s.BindingAdvance(ctx, store.BindingAdvanceParams{
				OperationID: "op-1", From: domain.BindingApprovalSending, To: domain.BindingApprovalSent})
			require.NoError(t, err)
			require.NotNil(t, flip)
			require.Equal(t, stepCreateStarted, flip.ToStep)
			require.Equal(t, int64(1), mustOperation(t, s, "op-1").Version)
		})
		for _, tt := range []struct {
			name string
			p    store.BindingAdvanceParams
		}{
			{"no operation", store.BindingAdvanceParams{From: domain.BindingMerged, To: domain.BindingValidated}},
			{"from equals to", store.BindingAdvanceParams{OperationID: "op-1", From: domain.BindingMerged, To: domain.BindingMerged}},
			{"unknown status", store.BindingAdvanceParams{OperationID: "op-1", From: "DONE", To: domain.BindingValidated}},
			{"negative step", store.BindingAdvanceParams{OperationID: "op-1", From: domain.BindingMerged, To: domain.BindingValidated, Step: -1}},
		} {
			t.Run(tt.name+" is refused", func(t *testing.T) {
				_, err := s.BindingAdvance(ctx, tt.p)
				require.Error(t, err)
			})
		}
	})
}
