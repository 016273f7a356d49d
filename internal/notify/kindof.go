package notify

import "changeflow/internal/domain"

// Move is one recorded move of a request, as its step-history row holds
// it: the outbox asks KindOf of every row the store writes, in the same
// transaction, so the event exists exactly when the change does.
type Move struct {
	Op               domain.OperationKind
	FromStep, ToStep domain.StepStatus
	// From and To are the binding's status before and after; both empty
	// when the row moved the step only.
	From, To domain.BindingStatus
	// Approval: the row records the approval system's decision (the
	// approval callback wrote it). Only that row is an approval: the steps
	// an approval leads to are reached by other paths too (a batch's
	// members, a retrigger).
	Approval bool
}

// KindOf is the event move m tells of, or "" when it tells of none (most
// rows: the steps on the way). The one table of which change a person
// hears of (docs/notifications.md, "The events"):
//
//   - a request's first row is its submission (a removal's is not: the
//     person did not ask for it; they hear when it is done);
//   - CLOSE_REJECTED is a rejection, CLOSE_WITHDRAWN (in the approval
//     system) and CLOSE_REQUESTER_WITHDRAWN a withdrawal;
//   - the confirmation that opens a period of access is "in effect" (a
//     renewal's: "renewal in effect"), one that ends a period is
//     "removed";
//   - the approval callback's row that does not reject is the approval;
//   - entering a failed step from one that was not is a failure, which
//     stops the request until a person acts.
func KindOf(m Move) Kind {
	switch {
	case m.FromStep == domain.StepNone:
		if m.Op == domain.OperationRevoke {
			return ""
		}
		return KindRequestSubmitted
	case m.ToStep == domain.StepCloseRejected:
		return KindRequestRejected
	case m.ToStep == domain.StepCloseWithdrawn || m.ToStep == domain.StepCloseRequesterWithdrawn:
		return KindRequestWithdrawn
	}
	switch domain.HadAccessChangeOf(m.From, m.To, m.ToStep) {
	case domain.HadAccessOpens:
		if m.Op == domain.OperationRenew || m.From == domain.BindingRenewing {
			return KindRenewalInEffect
		}
		return KindRequestInEffect
	case domain.HadAccessEnds:
		return KindAccessRemoved
	}
	switch {
	case m.Approval:
		return KindRequestApproved
	case m.ToStep.Kind() == domain.KindFailed && m.FromStep.Kind() != domain.KindFailed:
		return KindRequestFailed
	}
	return ""
}

// MayTell says whether m can tell of an event for some kind of request:
// the store reads a row's operation only when it may, so the steps on the
// way cost the outbox nothing.
func MayTell(m Move) bool {
	for _, op := range []domain.OperationKind{domain.OperationGrant, domain.OperationRenew, domain.OperationRevoke} {
		m.Op = op
		if KindOf(m) != "" {
			return true
		}
	}
	return false
}
