package domain

import (
	"fmt"
	"slices"
	"time"
)

// ApprovalBinding is what an approval decision must match on the locked
// operation row to be applied: the recorded approval id and, legacy flow,
// the operation's MR. The recorded approval id is never overwritten: a
// callback naming another approval is refused, which is what keeps a
// decision for some other approval — or a forged one — from moving a
// request, and a later real decision from becoming stale.
type ApprovalBinding struct {
	// ApprovalID must equal the operation's recorded approval id.
	ApprovalID string
	// Adopt allows an operation with no approval id recorded yet
	// (submit_approval has not had its answer) to take ApprovalID. Only
	// for an id the approval system itself named for this operation
	// (read back by operationId), never for a callback's bare claim.
	Adopt bool
	// MRIID must equal the operation's MR; 0 means the operation must
	// have no MR (approve-first: the approval comes before the MR).
	MRIID int64
}

// Check compares the binding with an operation's recorded approval id and
// MR: it returns why it refuses ("" to apply) and whether the approval id
// is to be recorded (Adopt on an unrecorded one). The store runs it under
// the row lock; the workflow runs it first, so a refused callback costs
// no read of the approval system.
func (a ApprovalBinding) Check(recordedID string, mrIID int64) (refused string, adopt bool) {
	switch {
	case a.ApprovalID == "":
		return "the callback names no approvalId", false
	case a.MRIID != mrIID && mrIID == 0:
		return fmt.Sprintf("ext.mrId %d given, but the request has no MR (approve-first flow)", a.MRIID), false
	case a.MRIID != mrIID && a.MRIID == 0:
		return fmt.Sprintf("no ext.mrId, but the request is on the legacy flow with MR !%d", mrIID), false
	case a.MRIID != mrIID:
		return fmt.Sprintf("ext.mrId %d is not this request's MR !%d", a.MRIID, mrIID), false
	case recordedID == "" && !a.Adopt:
		return "no approval id is recorded for this request yet", false
	case recordedID != "" && recordedID != a.ApprovalID:
		return fmt.Sprintf("approvalId %q is not the approval changeflow submitted for this request", ClipRunes(a.ApprovalID, 64)), false
	}
	return "", recordedID == ""
}

// Callback is a callback's transition of the request it is for: the
// statuses it applies in, the two-layer state it writes and what it is
// bound to.
type Callback struct {
	// Waiting is the set of binding statuses, in the grant's vocabulary,
	// the request must be in for the callback to apply (the approval
	// callback's {APPROVAL_SENDING, APPROVAL_SENT}); anything else is
	// stale.
	Waiting []BindingStatus
	// Step and Binding are the state to write (Binding in the grant's
	// vocabulary, OperationKind.Binding).
	Step    StepStatus
	Binding BindingStatus
	// Approval, when non-nil, binds the callback to the approval
	// changeflow submitted; nil (a retrigger) checks nothing.
	Approval *ApprovalBinding
	// ApprovedAt, when non-zero, is an approve-first approval's time: a
	// grant's days count from it, capped at MaxDays (ApprovedExpiry).
	ApprovedAt time.Time
	MaxDays    int
}

// CallbackState is what the store read, with the operation and then its
// binding locked, that a callback is decided from.
type CallbackState struct {
	Kind OperationKind
	Step StepStatus
	// Binding is the binding's status; BindingOwned says whether the row
	// is still this operation's (a re-apply gives it a newer one).
	Binding      BindingStatus
	BindingOwned bool
	// ApprovalID and MRIID are the operation's recorded approval and MR
	// ("" and 0 for none); Days is the days it asked for (0: unknown, a
	// row from before days were stored).
	ApprovalID string
	MRIID      int64
	Days       int
}

// CallbackPlan is what applying a callback writes. Unless Apply is set
// nothing is written.
type CallbackPlan struct {
	// Apply: the callback is the request's to apply. Otherwise it is
	// stale (Refused "") or its approval binding refused it (Refused says
	// why).
	Apply   bool
	Refused string
	// Step is the step after; StepWritten says whether it changed.
	Step        StepStatus
	StepWritten bool
	// Move is the binding status to write ("" none); Restore hands the
	// row back to the grant a renewal renews.
	Move    BindingStatus
	Restore bool
	// Expiry, when non-zero, is the end the approval fixed: written to
	// the operation, its binding and the binding's history.
	Expiry time.Time
	// AdoptApproval records Callback.Approval's id (guarded: only while
	// none is recorded).
	AdoptApproval bool
}

// PlanCallback decides what callback c does to a request in state s. A
// stale callback — the binding another operation's, or not in a waiting
// status — writes nothing and is no error; nor is a refusal. Its errors
// wrap ErrIllegalTransition: a move the tables do not allow.
func PlanCallback(s CallbackState, c Callback) (CallbackPlan, error) {
	// The waiting set is named in the grant's vocabulary: a renewal's
	// RENEWING is read as the grant status of its step (GrantView).
	waiting := slices.Contains(c.Waiting, s.Binding) || slices.Contains(c.Waiting, s.Kind.GrantView(s.Binding, s.Step))
	if !s.BindingOwned || !waiting {
		return CallbackPlan{}, nil
	}
	var p CallbackPlan
	if a := c.Approval; a != nil {
		if p.Refused, p.AdoptApproval = a.Check(s.ApprovalID, s.MRIID); p.Refused != "" {
			return CallbackPlan{Refused: p.Refused}, nil
		}
	}
	if err := CheckStep(s.Step, c.Step); err != nil {
		return CallbackPlan{}, err
	}
	p.Apply, p.Step, p.StepWritten = true, c.Step, c.Step != s.Step
	// A retrigger names the grant's status of the step it resumes; a
	// revocation shows its own, and a renewal's rejection hands the row
	// back to its grant.
	if to := s.Kind.Binding(c.Binding); to != s.Binding {
		if err := CheckBinding(s.Binding, to); err != nil {
			return CallbackPlan{}, err
		}
		p.Move, p.Restore = to, s.Kind.EndsWithoutEffect(c.Binding)
	}
	// A renewal keeps its submission's expiry (ApprovedExpiry), and a row
	// from before days were stored keeps its own: without the days asked
	// there is nothing to count from the approval.
	if !c.ApprovedAt.IsZero() && s.Kind == OperationGrant && s.Days > 0 {
		p.Expiry = ApprovedExpiry(c.ApprovedAt, s.Days, c.MaxDays)
	}
	return p, nil
}
