package lifecycle

import (
	"slices"
	"testing"

	"changeflow/internal/domain"
	"changeflow/internal/store"
)

// TestSortExpiryCuts: the expiry scan cuts a renewal without an MR in its
// grant's revocation, withdraws one with an MR of its own, and leaves
// alone one that ended or whose round's claim may be in flight — each in
// the order read.
func TestSortExpiryCuts(t *testing.T) {
	renewal := func(id string, step domain.StepStatus, mr int64, inSet bool) store.ExpiredRenewal {
		return store.ExpiredRenewal{
			RevocationCandidate: store.RevocationCandidate{Renewal: id, RenewalStep: int(step), GrantOperationID: "g-" + id},
			MRIID:               mr, InSet: inSet,
		}
	}
	renewals := []store.ExpiredRenewal{
		renewal("in-set", domain.StepCreateAdmitted, 0, true),
		renewal("own-mr", domain.StepCreatePipelineRunning, 4, false),
		renewal("claim-in-flight", domain.StepCreateAdmitted, 0, false),
		renewal("waiting-approval", domain.StepCreateApprovalSubmitted, 0, false),
		renewal("in-effect", domain.StepCalledBack, 0, false),
		renewal("submitting", domain.StepCreateApprovalSubmitting, 0, false),
	}
	cuts := sortExpiryCuts(renewals)
	var with, lapse, left []string
	for _, c := range cuts.withRevocation {
		with = append(with, c.Renewal)
	}
	for _, l := range cuts.lapse {
		lapse = append(lapse, l.Renewal)
	}
	for _, r := range cuts.left {
		left = append(left, r.Renewal)
	}
	for _, c := range []struct {
		name      string
		got, want []string
	}{
		{"cut with the revocation", with, []string{"in-set", "waiting-approval", "submitting"}},
		{"withdrawn (lapsed)", lapse, []string{"own-mr"}},
		{"left as they are", left, []string{"claim-in-flight", "in-effect"}},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
	if l := cuts.lapse[0]; l.GrantOperationID != "g-own-mr" || l.Step != int(domain.StepCreatePipelineRunning) {
		t.Errorf("lapsed row %+v: want the renewal's grant and step", l)
	}
}

// TestGiveBackCuts: giving the access back cuts a renewal that waits for
// its approval with no MR, or sits in the batch set; one with an MR of its
// own, being built or checked, or already ended is under way instead.
func TestGiveBackCuts(t *testing.T) {
	for _, c := range []struct {
		name string
		step domain.StepStatus
		mr   int64
		want bool
	}{
		{"submitting its approval", domain.StepCreateApprovalSubmitting, 0, true},
		{"waiting for its approval", domain.StepCreateApprovalSubmitted, 0, true},
		{"waiting for its approval with an MR (the legacy flow)", domain.StepCreateApprovalSubmitted, 3, false},
		{"in the batch set", domain.StepCreateAdmitted, 0, true},
		{"its MR being created", domain.StepCreateStarted, 0, false},
		{"its MR being checked", domain.StepCreatePipelineRunning, 3, false},
		{"withdrawn at expiry", domain.StepRenewExpired, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := store.Operation{Kind: domain.OperationRenew, Step: int(c.step), MRIID: c.mr}
			if got := giveBackCuts(r); got != c.want {
				t.Fatalf("giveBackCuts(step %s, MR %d) = %v, want %v", c.step, c.mr, got, c.want)
			}
		})
	}
}
