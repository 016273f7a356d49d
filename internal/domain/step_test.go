package domain_test

import (
	"testing"

	"changeflow/internal/domain"
)

func TestStepNamesRoundTripAndPhasesMatchCodes(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range domain.Steps() {
		name := s.String()
		if seen[name] {
			t.Fatalf("name %s used twice", name)
		}
		seen[name] = true
		got, err := domain.ParseStepStatus(name)
		if err != nil || got != s {
			t.Fatalf("parse %s: %v %v", name, got, err)
		}
		if !map[int]bool{100: true, 101: true, 102: true, 103: true, 105: true, 106: true, 107: true}[s.Phase()] {
			t.Fatalf("%v has code %d outside the phase ranges", s, int(s))
		}
		if s.Kind() == 0 {
			t.Fatalf("%v has no kind", s)
		}
	}
	if _, err := domain.ParseStepStatus("NOPE"); err == nil {
		t.Fatal("unknown name parsed")
	}
}

func TestSpecFixedCodes(t *testing.T) {
	for code, name := range map[int]string{
		10001: "CREATE_STARTED", 10002: "CREATE_SUCCEEDED", 10004: "CREATE_PIPELINE_FAILED",
		10101: "HANDLE_STARTED", 10102: "HANDLE_APPROVED", 10105: "HANDLE_REBASE_CONFLICT",
		10301: "CALLED_BACK", 10501: "HANDLE_PIPELINE_PENDING",
	} {
		if got := domain.StepStatus(code).String(); got != name {
			t.Errorf("%d is %s, docs/workflow.md says %s", code, got, name)
		}
	}
}

func TestHintFor(t *testing.T) {
	tests := []struct {
		name    string
		step    domain.StepStatus
		binding domain.BindingStatus
		want    domain.Hint
	}{
		{"check pipeline failed asks for the maintainers", domain.StepCreatePipelineFailed, domain.BindingCreateFailed, domain.HintContactMaintainers},
		{"rebase conflict asks for the maintainers", domain.StepHandleRebaseConflict, domain.BindingHandleFailed, domain.HintContactMaintainers},
		{"pipeline timeout is keep waiting", domain.StepCreatePipelinePending, domain.BindingMRCreating, domain.HintKeepWaiting},
		{"merge failure is keep waiting", domain.StepHandleMergeFailed, domain.BindingHandleFailed, domain.HintKeepWaiting},
		{"pool rejection is keep waiting", domain.StepCreatePoolRejected, domain.BindingCreateFailed, domain.HintKeepWaiting},
		{"a failed binding with a progress step is keep waiting", domain.StepHandleApproved, domain.BindingHandleFailed, domain.HintKeepWaiting},
		{"in progress is none", domain.StepCreateStarted, domain.BindingMRCreating, domain.HintNone},
		{"merged is none", domain.StepHandleMerged, domain.BindingMerged, domain.HintNone},
		{"validated is none", domain.StepCalledBack, domain.BindingValidated, domain.HintNone},
		{"rejected is none", domain.StepCloseRejected, domain.BindingRejected, domain.HintNone},
		{"a failed close of a rejected request is none", domain.StepCloseFailed, domain.BindingRejected, domain.HintNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := domain.HintFor(tt.step, tt.binding); got != tt.want {
				t.Fatalf("HintFor(%v, %v) = %v, want %v", tt.step, tt.binding, got, tt.want)
			}
		})
	}
	for _, s := range domain.DeterministicFailureSteps() {
		if s.Kind() != domain.KindFailed {
			t.Errorf("deterministic failure %v is not a failed step", s)
		}
	}
}
