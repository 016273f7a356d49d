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
	// Batched: the request is a member of a batch. A batch's failures are
	// its own business: the driver's row stands for the whole batch (it
	// moves to HANDLE_FAILED while the others wait in MERGING), the batch
	// blocks or is settled, and its members are re-admitted to the next
	// round; the operators hear of it (batch.blocked), and a member is
	// told nothing it cannot act on.
	Batched bool
}

// failedBindings are the binding states that stop a request on a failure.
var failedBindings = map[domain.BindingStatus]bool{
	domain.BindingCreateFailed: true, domain.BindingHandleFailed: true, domain.BindingRevokeFailed: true,
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
//   - a row that moves into a failure state (CREATE_FAILED, HANDLE_FAILED,
//     REVOKE_FAILED) is a failure, which stops the request until a person
//     acts; so is a renewal's step that fails (its row stays RENEWING);
//     but not a batch member's: a batch's failure is told to the
//     operators as batch.blocked, and its members go to the next round.
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
	case m.Batched:
		return ""
	case failedBindings[m.To] && !failedBindings[m.From]:
		return KindRequestFailed
	case m.From == "" && m.To == "" && m.Op == domain.OperationRenew &&
		m.ToStep.Kind() == domain.KindFailed && m.FromStep.Kind() != domain.KindFailed:
		// A renewal's row stays RENEWING (the grant's access lasts): its
		// step alone says it stopped.
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
