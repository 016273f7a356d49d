package batch

import (
	"maps"
	"slices"
	"testing"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flow"
)

// TestPlanSettlement: a merged MR settles the batch SUCCEEDED and moves
// its members to MERGED; any other end settles it FAILED and sends every
// member but the culprit back to the waiting set, the culprit parked for
// a retrigger. The running driver keeps its action, a member being
// withdrawn is left to its withdrawal, one already validated stays.
func TestPlanSettlement(t *testing.T) {
	b := store.Batch{ID: 5, ProjectID: 1, MRIID: 12, Status: domain.BatchRunning, Version: 3}
	member := func(id, next string, binding domain.BindingStatus) store.BatchMemberState {
		return store.BatchMemberState{OperationID: id, Step: int(domain.StepCreateMRCreated), Binding: binding, NextAction: next, Version: 1, BindingVersion: 1}
	}
	states := []store.BatchMemberState{
		member("drv", flow.ActionBatchPollPipeline, domain.BindingMRCreating),
		member("a", "", domain.BindingMRCreating),
		member("c", "some_action", domain.BindingMRCreating),
		member("w", flow.ActionWithdraw, domain.BindingMRCreating),
		{OperationID: "v", Step: int(domain.StepCalledBack), Binding: domain.BindingValidated},
	}
	for _, c := range []struct {
		name       string
		merged     bool
		culprit    string
		settleTo   domain.BatchStatus
		moved      []string
		readmit    []string
		park       string
		readmitted int
	}{
		{"merged: every member on the path to MERGED", true, "", domain.BatchSucceeded, []string{"a", "c", "drv"}, nil, "", 0},
		{"failed: every member back to the waiting set", false, "", domain.BatchFailed, []string{"a", "c", "drv"}, []string{"drv", "a", "c"}, "", 3},
		{"failed with a culprit: it is parked, the rest wait", false, "c", domain.BatchFailed, []string{"a", "drv"}, []string{"drv", "a"}, "c", 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := settleOpts{code: "CODE", message: "why", actor: "test", runningDriver: "drv", culprit: c.culprit}
			p, res, err := planSettlement(b, states, c.merged, o)
			if err != nil {
				t.Fatal(err)
			}
			if p.BatchID != b.ID || p.From != b.Status || p.Version != b.Version || p.SettleTo != c.settleTo {
				t.Fatalf("apply %+v: want batch %d settled %s from %s at version %d", p, b.ID, c.settleTo, b.Status, b.Version)
			}
			if !slices.Equal(p.Unschedule, []string{"c"}) {
				t.Fatalf("unschedule %v: want every action but the driver's and the withdrawal's", p.Unschedule)
			}
			moved := map[string]bool{}
			for _, m := range p.Moves {
				for _, r := range m.Rows {
					moved[r.OperationID] = true
				}
			}
			if got := slices.Sorted(maps.Keys(moved)); !slices.Equal(got, c.moved) {
				t.Fatalf("moved %v, want %v", got, c.moved)
			}
			if !slices.Equal(p.Readmit, c.readmit) {
				t.Fatalf("readmit %v, want %v", p.Readmit, c.readmit)
			}
			switch {
			case c.park == "" && p.Park != nil:
				t.Fatalf("parked %+v, want none", p.Park)
			case c.park != "" && (p.Park == nil || p.Park.OperationID != c.park || p.Park.Action != flow.ActionCreateMR):
				t.Fatalf("parked %+v, want %s on %s", p.Park, c.park, flow.ActionCreateMR)
			}
			if c.merged {
				if !res.Merged || res.Status != domain.BatchSucceeded.String() || p.FailureCode != "" {
					t.Fatalf("result %+v / apply %+v: want merged, SUCCEEDED, no failure", res, p)
				}
			} else if res.Merged || res.Status != domain.BatchFailed.String() || p.FailureCode != "CODE" || p.FailureMessage != "why" || p.ProjectID != b.ProjectID {
				t.Fatalf("result %+v / apply %+v: want FAILED with the code and message, re-admitted to project %d", res, p, b.ProjectID)
			}
			if res.BatchID != b.ID || res.Readmitted != c.readmitted {
				t.Fatalf("result %+v: want batch %d, %d re-admitted", res, b.ID, c.readmitted)
			}
		})
	}
}
