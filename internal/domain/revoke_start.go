package domain

import (
	"errors"
	"fmt"
	"slices"
)

// RenewalCuttable are the steps at which a renewal is cut off in the
// transaction of its grant's revocation while it still waits for its
// approval with no MR (approve-first; ExpiryCutWithRevocation). A renewal
// in the batch set (StepCreateAdmitted) is cut there too; with an MR of
// its own it is withdrawn instead.
var RenewalCuttable = []StepStatus{StepCreateApprovalSubmitting, StepCreateApprovalSubmitted}

// RenewalCut is how a renewal not yet in effect ends when its grant's
// access ends first: ending the access wins over extending it.
type RenewalCut struct {
	// To is the step the renewal ends at: RENEW_EXPIRED when the grant
	// expired, RENEW_REVOKED when it was given back or revoked.
	To StepStatus
	// InBatchSet: the renewal waits in the batch set and leaves it (unless
	// a batch round claimed it first, which pre-empts the cut); otherwise
	// it waits for its approval and its close-out action runs at once.
	InBatchSet bool
	// Note is the step-history note of the cut.
	Note string
}

// CutRenewal decides how renewal, at step, of grant is cut off by the
// revocation of grant for reason. Its error wraps ErrIllegalTransition
// when the tables refuse the move, and says so when the renewal is at a
// step where no cut applies.
func CutRenewal(step StepStatus, reason RevokeReason, grant, renewal string) (RenewalCut, error) {
	c := RenewalCut{To: StepRenewRevoked, InBatchSet: step == StepCreateAdmitted}
	if reason == RevokeExpired {
		c.To = StepRenewExpired
	}
	errs := []error{CheckBinding(BindingRenewing, BindingRevoking), CheckStep(step, c.To)}
	if !c.InBatchSet && !slices.Contains(RenewalCuttable, step) {
		errs = append(errs, fmt.Errorf("renewal %s at %s cannot be cut off", renewal, step))
	}
	if err := errors.Join(errs...); err != nil {
		return RenewalCut{}, err
	}
	why := fmt.Sprintf("the grant %s expired before this renewal took effect: expiry wins", grant)
	switch reason {
	case RevokeGivenBack:
		why = fmt.Sprintf("the access of %s was given back while this renewal was still waiting: ending the access wins over extending it", grant)
	case RevokeOperator:
		why = fmt.Sprintf("the access of %s was revoked by an operator while this renewal was still waiting: ending the access wins over extending it", grant)
	}
	c.Note = fmt.Sprintf("%s; its revocation %s takes the row", why, RevocationID(grant))
	return c, nil
}

// StepMove is one step-history row a decision writes.
type StepMove struct {
	From, To               StepStatus
	FromBinding, ToBinding BindingStatus
	Note                   string
}

// RevocationStart is how a new revocation begins.
type RevocationStart struct {
	// Step and Version are the revocation's first stored step and version.
	Step    StepStatus
	Version int
	// History is its first step-history rows, in order.
	History []StepMove
	// Admit: on a batching target it waits in the batch set; otherwise
	// its first action is due at once.
	Admit bool
}

// StartRevocation decides how the revocation of grant for reason begins:
// the binding goes VALIDATED → REVOKING (RENEWING → REVOKING when it cut
// off renewal, "" for none), the revocation at REVOKE_STARTED and, on a
// batching target, admitted to the batch set at once. No approval is
// asked to lose access.
func StartRevocation(grant string, reason RevokeReason, batching bool, renewal string) RevocationStart {
	from, note := BindingValidated, fmt.Sprintf("revocation of %s (%s)", grant, reason)
	if renewal != "" {
		from, note = BindingRenewing, note+fmt.Sprintf("; its renewal %s, not yet in effect, is closed", renewal)
	}
	s := RevocationStart{Step: StepRevokeStarted, Version: 1, History: []StepMove{
		{To: StepRevokeStarted, FromBinding: from, ToBinding: BindingRevoking, Note: note},
	}}
	if batching {
		s.Step, s.Version, s.Admit = StepCreateAdmitted, 2, true
		s.History = append(s.History, StepMove{From: StepRevokeStarted, To: StepCreateAdmitted, Note: "admitted to the batch waiting set"})
	}
	return s
}

// CheckRevocationStart checks StartRevocation's moves against the tables.
func CheckRevocationStart() error {
	return errors.Join(CheckStep(StepNone, StepRevokeStarted), CheckStep(StepRevokeStarted, StepCreateAdmitted),
		CheckBinding(BindingValidated, BindingRevoking))
}
