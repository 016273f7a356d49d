package httpapi

import (
	"context"
	"errors"

	"changeflow/internal/domain"
	"changeflow/internal/store"
)

// A request's status as its page shows it: the binding's while the
// request owns it, and otherwise what became of its access — its
// revocation's state, the renewal that carries it now, or the last state
// its own history recorded.

// ownBindingStatus sets the status of op, which owns its binding b.
func (s *Server) ownBindingStatus(op store.Operation, b store.Binding, v *requestView) {
	// A renewal's RENEWING reads as its own progress in the grant's
	// vocabulary (APPROVAL_SENT, MERGING, …).
	v.Status = b.Status
	if op.Kind == domain.OperationRenew {
		v.Status = op.Kind.GrantView(b.Status, domain.StepStatus(op.Step))
	}
	if b.InEffect() {
		v.RenewFrom = s.renewFrom(op, b.ExpiresAt)
	}
	if b.UpdatedAt.After(op.UpdatedAt) {
		v.UpdatedAt = b.UpdatedAt.UTC()
	}
}

// supersededStatus sets the status of op, which no longer owns a binding.
func supersededStatus(ctx context.Context, st RequestStore, op store.Operation, v *requestView) error {
	// A grant whose access is being removed, or was: its revocation
	// owns the binding now, and the user sees that state (REVOKING,
	// REVOKED, REVOKE_FAILED) rather than the VALIDATED its own
	// history ends with.
	rb, err := st.BindingGetByOperation(ctx, domain.RevocationID(op.OperationID))
	switch {
	case err == nil:
		v.Status = rb.Status
		v.RevocationID = rb.OperationID
		if rb.UpdatedAt.After(v.UpdatedAt) {
			v.UpdatedAt = rb.UpdatedAt.UTC()
		}
		return nil
	case !errors.Is(err, domain.ErrNotFound):
		return err
	}
	if op.Kind != domain.OperationRevoke {
		removed, err := endedRevocationStatus(ctx, st, op, v)
		if removed || err != nil {
			return err
		}
	}
	if v.Status, err = lastBindingStatus(ctx, st, op.OperationID); err != nil {
		return err
	}
	if op.Kind == domain.OperationRenew {
		// Ended without effect: the row went back to the grant, so
		// the history's last binding is the grant's VALIDATED; the
		// renewal's own end is its closing step.
		if end := renewalEnd(domain.StepStatus(op.Step)); end != "" {
			v.Status = end
		}
	}
	if v.Status == domain.BindingValidated && op.Kind != domain.OperationRevoke {
		return accessNow(ctx, st, op, v)
	}
	return nil
}

// endedRevocationStatus: op's revocation ended and a later request took
// the row (the access was removed, then asked for again): the grant's
// access ended with that revocation, whatever the grant's own history
// ends with (VALIDATED — it read "In effect" after the entry was gone).
// One read more, only in this state; removed is false when op has no
// revocation.
func endedRevocationStatus(ctx context.Context, st RequestStore, op store.Operation, v *requestView) (removed bool, err error) {
	rv, err := st.OperationGet(ctx, domain.RevocationID(op.OperationID))
	switch {
	case errors.Is(err, domain.ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	if v.Status, err = lastBindingStatus(ctx, st, rv.OperationID); err != nil {
		return true, err
	}
	v.RevocationID = rv.OperationID
	return true, nil
}

// accessNow sets what became of the access of op, in effect by its own
// history yet no longer owning its row: renewed (perhaps renewal after
// renewal), or a renewal's access removed since. The page says so — the
// renewal carrying it, or its removal — never "in effect" for an entry
// that left main or whose expiry moved. The reads are spent on this
// state alone, never on the hot read of a request owning its binding
// (TestStatusReadIsOneStatement).
func accessNow(ctx context.Context, st RequestStore, op store.Operation, v *requestView) error {
	end, err := followAccess(ctx, st, op)
	if err != nil {
		return err
	}
	switch {
	case end.RevocationID != "":
		v.Status, v.RevocationID = end.Status, end.RevocationID
		if end.UpdatedAt.After(v.UpdatedAt) {
			v.UpdatedAt = end.UpdatedAt.UTC()
		}
	case end.Carrier != nil:
		v.Renewal = end.Carrier
	}
	return nil
}

// renewalEnd is the status of a renewal that no longer owns its binding,
// by the step it ended at: REJECTED for the approval's no, CLOSED for the
// other ends (a legacy renewal's MR closed after its rejection
// included); "" when the step is not an end (a later request took the row
// after the renewal was in effect).
func renewalEnd(step domain.StepStatus) domain.BindingStatus {
	switch step {
	case domain.StepCloseRejected, domain.StepCloseWithdrawn:
		return domain.BindingRejected
	case domain.StepRenewExpired, domain.StepRenewRevoked, domain.StepCloseRequesterWithdrawn, domain.StepCloseCancelled,
		domain.StepCloseMRClosed, domain.StepCloseFailed:
		return domain.BindingClosed
	}
	return ""
}

// lastBindingStatus is the last binding state op's step history names;
// CLOSED when it names none (a superseded request is re-appliable by
// definition).
func lastBindingStatus(ctx context.Context, st RequestStore, operationID string) (domain.BindingStatus, error) {
	steps, err := st.OperationStepList(ctx, operationID)
	if err != nil {
		return "", err
	}
	for i := len(steps) - 1; i >= 0; i-- {
		if steps[i].ToBinding != "" {
			return steps[i].ToBinding, nil
		}
	}
	return domain.BindingClosed, nil
}
