package lifecycle

import (
	"errors"
	"strings"
	"testing"

	"changeflow/internal/domain"
	"changeflow/internal/store"
)

// TestRenewalUnderWayReason: the refusal to give back an access whose
// renewal is past withdrawing names its case in Reason, beside the advice
// that words it (the API sends the reason as data.reason).
func TestRenewalUnderWayReason(t *testing.T) {
	g := store.Operation{OperationID: "g"}
	renewal := func(step domain.StepStatus, batchID int64) store.Operation {
		return store.Operation{OperationID: "r", Kind: domain.OperationRenew, GrantOperationID: "g", Step: int(step), BatchID: batchID}
	}
	renewing := store.Binding{Status: domain.BindingRenewing}
	for _, c := range []struct {
		name    string
		r       store.Operation
		claimed bool
		reason  domain.Reason
		advice  string
	}{
		{"its own MR is open", renewal(domain.StepCreatePipelineRunning, 0), false, domain.ReasonRenewalHasChange, "withdraw the renewal first"},
		{"its own MR is being created", renewal(domain.StepCreateCommitted, 0), false, domain.ReasonRenewalHasChange, "withdraw the renewal first"},
		{"claimed into a batch", renewal(domain.StepCreateAdmitted, 0), true, domain.ReasonRenewalMerging, "is being merged"},
		{"a member of a batch", renewal(domain.StepCreatePipelineRunning, 5), false, domain.ReasonRenewalMerging, "is being merged"},
		{"its MR is merging", renewal(domain.StepHandleApproved, 0), false, domain.ReasonRenewalMerging, "is being merged"},
		{"stopped on a failure", renewal(domain.StepHandleMergeFailed, 0), false, domain.ReasonRenewalStopped, "stopped on a failure"},
		{"expired while it is being closed", renewal(domain.StepRenewExpired, 0), false, domain.ReasonRenewalExpired, "has expired"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var under *RenewalUnderWayError
			if !errors.As(renewalUnderWay(g, c.r, renewing, c.claimed), &under) {
				t.Fatal("not a RenewalUnderWayError")
			}
			if under.Reason != c.reason || !strings.Contains(under.Advice, c.advice) {
				t.Fatalf("reason %q advice %q, want %q and %q", under.Reason, under.Advice, c.reason, c.advice)
			}
		})
	}
}
