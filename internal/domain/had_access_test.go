package domain

import "testing"

// TestHadAccessChangeOf: only the confirmations of a grant or renewal
// open a period; every removal in effect ends one; the renewal that
// ended without effect, the moves under way and the failures change
// nothing.
func TestHadAccessChangeOf(t *testing.T) {
	for _, c := range []struct {
		from, to BindingStatus
		step     StepStatus
		want     HadAccessChange
	}{
		{BindingMerged, BindingValidated, StepCalledBack, HadAccessOpens},
		{BindingMerged, BindingValidated, StepReconciled, HadAccessOpens},
		{BindingRenewing, BindingValidated, StepCalledBack, HadAccessOpens},
		{BindingRenewing, BindingValidated, StepReconciled, HadAccessOpens},
		// A renewal rejected, withdrawn, closed: the grant's row again.
		{BindingRenewing, BindingValidated, StepCloseRejected, HadAccessUnchanged},
		{BindingRenewing, BindingValidated, StepCloseWithdrawn, HadAccessUnchanged},
		{BindingRenewing, BindingValidated, StepRenewExpired, HadAccessUnchanged},
		{BindingRevoking, BindingRevoked, StepRevokeCalledBack, HadAccessEnds},
		{BindingRevoking, BindingRevoked, StepRevokeReconciled, HadAccessEnds},
		{BindingRevoking, BindingRevoked, StepRevokeAbsent, HadAccessEnds},
		{BindingValidated, BindingClosed, StepCloseExpired, HadAccessEnds},
		{BindingValidated, BindingRevoking, StepRevokeStarted, HadAccessUnchanged},
		{BindingValidated, BindingRenewing, StepCreateApprovalSubmitting, HadAccessUnchanged},
		{BindingRenewing, BindingRevoking, StepRenewExpired, HadAccessUnchanged},
		{BindingMerging, BindingMerged, StepHandleMerged, HadAccessUnchanged},
		{BindingRevoking, BindingRevokeFailed, StepHandleMergeFailed, HadAccessUnchanged},
		{"", "", StepCalledBack, HadAccessUnchanged},
	} {
		if got := HadAccessChangeOf(c.from, c.to, c.step); got != c.want {
			t.Errorf("%s → %s at %s: %d, want %d", c.from, c.to, c.step, got, c.want)
		}
	}
}
