package domain_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"changeflow/internal/domain"
)

func TestRevocationBindingMapsTheGrantLifecycle(t *testing.T) {
	for from, want := range map[domain.BindingStatus]domain.BindingStatus{
		domain.BindingMRCreating:   domain.BindingRevoking,
		domain.BindingMRCreated:    domain.BindingRevoking,
		domain.BindingMerging:      domain.BindingRevoking,
		domain.BindingMerged:       domain.BindingRevoking,
		domain.BindingCreateFailed: domain.BindingRevokeFailed,
		domain.BindingHandleFailed: domain.BindingRevokeFailed,
		domain.BindingValidated:    domain.BindingRevoked,
		domain.BindingRevoking:     domain.BindingRevoking,
		domain.BindingClosed:       domain.BindingClosed,
	} {
		if got := domain.OperationRevoke.Binding(from); got != want {
			t.Errorf("revocation %s → %s, want %s", from, got, want)
		}
		if got := domain.OperationGrant.Binding(from); got != from {
			t.Errorf("grant %s mapped to %s", from, got)
		}
	}
	if domain.OperationRevoke.Step(domain.StepCalledBack) != domain.StepRevokeCalledBack ||
		domain.OperationRevoke.Step(domain.StepReconciled) != domain.StepRevokeReconciled ||
		domain.OperationGrant.Step(domain.StepCalledBack) != domain.StepCalledBack {
		t.Fatal("called-back steps not mapped per kind")
	}
}

func TestRevocationMovesAreInTheTable(t *testing.T) {
	for _, m := range [][2]domain.BindingStatus{
		{domain.BindingValidated, domain.BindingRevoking},
		{domain.BindingRevoking, domain.BindingRevoked},
		{domain.BindingRevoking, domain.BindingRevokeFailed},
		{domain.BindingRevokeFailed, domain.BindingRevoking},
		{domain.BindingRevoked, domain.BindingApprovalSending},
		{domain.BindingRevoked, domain.BindingMRCreating},
		// The removal of an entry changeflow did not write takes the
		// subject's row: a new one, or one at rest (StartRepoRemoval).
		{"", domain.BindingRevoking},
		{domain.BindingRejected, domain.BindingRevoking},
		{domain.BindingClosed, domain.BindingRevoking},
		{domain.BindingRevoked, domain.BindingRevoking},
	} {
		if err := domain.CheckBinding(m[0], m[1]); err != nil {
			t.Error(err)
		}
	}
	for _, m := range [][2]domain.BindingStatus{
		{domain.BindingMerged, domain.BindingRevoking},       // only an access in effect is revoked
		{domain.BindingRevoking, domain.BindingClosed},       // a removal under way is not given up silently
		{domain.BindingRevokeFailed, domain.BindingRevoked},  // confirmed only through REVOKING
		{domain.BindingApprovalSent, domain.BindingRevoking}, // a request under way is not taken by a removal
		{domain.BindingCreateFailed, domain.BindingRevoking}, // nor one that waits for an operator
	} {
		if err := domain.CheckBinding(m[0], m[1]); err == nil {
			t.Errorf("%s → %s allowed", m[0], m[1])
		}
	}
	if err := domain.CheckStep(domain.StepCreateMRCreated, domain.StepRevokeCalledBack); err == nil {
		t.Error("a removal that is not merged cannot be confirmed")
	}
	if err := domain.CheckStep(domain.StepHandleMerged, domain.StepRevokeCalledBack); err != nil {
		t.Error(err)
	}
	if !domain.BindingRevoked.Reappliable() || domain.BindingRevoking.Reappliable() || domain.BindingRevokeFailed.Reappliable() {
		t.Error("only REVOKED of the revocation states is re-appliable")
	}
	if h := domain.HintFor(domain.StepCreatePipelineFailed, domain.BindingRevokeFailed); h != domain.HintContactMaintainers {
		t.Errorf("failed removal pipeline: %s", h)
	}
	if h := domain.HintFor(domain.StepHandleMergeFailed, domain.BindingRevokeFailed); h != domain.HintKeepWaiting {
		t.Errorf("failed removal merge: %s", h)
	}
}

func TestRevocationIDIsDerivedAndFits(t *testing.T) {
	if got := domain.RevocationID("op-1"); got != "op-1~revoke" || !domain.IsRevocationID(got) {
		t.Fatalf("RevocationID(op-1) = %q", got)
	}
	long := strings.Repeat("é", 64)
	a, b := domain.RevocationID(long), domain.RevocationID(long[:len(long)-2]+"x")
	if utf8.RuneCountInString(a) != 64 || !domain.IsRevocationID(a) {
		t.Fatalf("long id %q (%d runes)", a, utf8.RuneCountInString(a))
	}
	if a == b || a != domain.RevocationID(long) {
		t.Fatalf("long ids must stay distinct and deterministic: %q %q", a, b)
	}
	if domain.IsRevocationID("op-1") {
		t.Fatal("a grant's id is not a revocation's")
	}
}

func TestGrantViewInvertsBinding(t *testing.T) {
	for _, c := range []struct {
		step domain.StepStatus
		want domain.BindingStatus
	}{
		{domain.StepRevokeStarted, domain.BindingMRCreating},
		{domain.StepCreateAdmitted, domain.BindingMRCreating},
		{domain.StepCreateMRCreated, domain.BindingMRCreating},
		{domain.StepCreatePipelinePending, domain.BindingMRCreating},
		{domain.StepCreateSucceeded, domain.BindingMRCreated},
		{domain.StepHandleStarted, domain.BindingMerging},
		{domain.StepHandleRebasePending, domain.BindingMerging},
		{domain.StepHandleMerged, domain.BindingMerged},
	} {
		got := domain.OperationRevoke.GrantView(domain.BindingRevoking, c.step)
		if got != c.want || domain.OperationRevoke.Binding(got) != domain.BindingRevoking {
			t.Errorf("REVOKING at %s reads as %s, want %s", c.step, got, c.want)
		}
	}
	if domain.OperationRevoke.GrantView(domain.BindingRevokeFailed, domain.StepCreatePipelineFailed) != domain.BindingCreateFailed ||
		domain.OperationRevoke.GrantView(domain.BindingRevokeFailed, domain.StepHandleApproveForbidden) != domain.BindingHandleFailed ||
		domain.OperationRevoke.GrantView(domain.BindingRevoked, domain.StepRevokeCalledBack) != domain.BindingValidated {
		t.Fatal("failure and end states")
	}
	if domain.OperationGrant.GrantView(domain.BindingMerging, domain.StepCreateAdmitted) != domain.BindingMerging {
		t.Fatal("a grant reads as itself")
	}
}
