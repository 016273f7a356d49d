package domain

import (
	"reflect"
	"strings"
	"testing"
)

func TestCutRenewal(t *testing.T) {
	for _, c := range []struct {
		name      string
		step      StepStatus
		reason    RevokeReason
		to        StepStatus
		inSet     bool
		noteHas   string
		refused   bool
		illegalTo bool
	}{
		{"waiting for its approval, the grant expired", StepCreateApprovalSubmitted, RevokeExpired, StepRenewExpired, false, "expired before this renewal took effect", false, false},
		{"still submitting, given back", StepCreateApprovalSubmitting, RevokeGivenBack, StepRenewRevoked, false, "was given back", false, false},
		{"in the batch set, revoked by an operator", StepCreateAdmitted, RevokeOperator, StepRenewRevoked, true, "revoked by an operator", false, false},
		{"with an MR of its own: withdrawn instead, never cut here", StepHandleStarted, RevokeExpired, 0, false, "", true, false},
		{"already in effect: nothing to cut", StepCalledBack, RevokeGivenBack, 0, false, "", true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := CutRenewal(c.step, c.reason, "g-1", "g-1-renew")
			if c.refused {
				if err == nil {
					t.Fatalf("CutRenewal(%s) = %+v, want a refusal", c.step, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.To != c.to || got.InBatchSet != c.inSet || !strings.Contains(got.Note, c.noteHas) ||
				!strings.HasSuffix(got.Note, "its revocation "+RevocationID("g-1")+" takes the row") {
				t.Fatalf("CutRenewal = %+v", got)
			}
		})
	}
}

func TestStartRevocation(t *testing.T) {
	if err := CheckRevocationStart(); err != nil {
		t.Fatal(err)
	}
	single := StartRevocation("g-1", RevokeExpired, false, "")
	want := RevocationStart{Step: StepRevokeStarted, Version: 1, History: []StepMove{
		{To: StepRevokeStarted, FromBinding: BindingValidated, ToBinding: BindingRevoking, Note: "revocation of g-1 (EXPIRED)"},
	}}
	if !reflect.DeepEqual(single, want) {
		t.Fatalf("single-request target:\n got %+v\nwant %+v", single, want)
	}
	batched := StartRevocation("g-1", RevokeGivenBack, true, "g-1-renew")
	want = RevocationStart{Step: StepCreateAdmitted, Version: 2, Admit: true, History: []StepMove{
		{To: StepRevokeStarted, FromBinding: BindingRenewing, ToBinding: BindingRevoking,
			Note: "revocation of g-1 (GIVEN_BACK); its renewal g-1-renew, not yet in effect, is closed"},
		{From: StepRevokeStarted, To: StepCreateAdmitted, Note: "admitted to the batch waiting set"},
	}}
	if !reflect.DeepEqual(batched, want) {
		t.Fatalf("batching target with a renewal cut:\n got %+v\nwant %+v", batched, want)
	}
	for _, h := range batched.History {
		if err := CheckStep(h.From, h.To); err != nil {
			t.Errorf("history move %s → %s: %v", h.From, h.To, err)
		}
	}
}
