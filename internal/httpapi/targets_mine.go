package httpapi

import (
	"context"
	"fmt"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/store"
)

// mineView is, on an item of GET /api/targets, the caller's own standing
// on the target (docs/api.md, "GET /api/targets"): the access they hold, or the
// request of theirs under way or stopped. Absent when they hold nothing
// and nothing of theirs is open there (never asked, or the last request
// ended: rejected, closed, access removed) — then a new request is what
// the target offers them.
type mineView struct {
	// Status is the binding's state: VALIDATED (in effect), RENEWING (in
	// effect, a renewal under way), REVOKING or REVOKE_FAILED (in effect
	// until its removal is deployed), or the state of a request not yet
	// in effect (APPROVAL_SENT, MR_CREATED, …, CREATE_FAILED, …).
	Status domain.BindingStatus `json:"status"`
	// OperationID is the request to open and act on: while the access is
	// held, the one that carries it (the grant, or the renewal in effect
	// that carries it now) — give back and renew act on it, as on its
	// page; otherwise the request under way.
	OperationID string `json:"operationId"`
	// ExpiresAt is when the access held ends; Expired says that moment
	// has passed by the database clock and its removal is due.
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	Expired   bool       `json:"expired,omitempty"`
	// RenewFrom is when asking again renews the access, as on the
	// request's status read: present while it is in effect with an
	// expiry and no renewal is under way.
	RenewFrom *time.Time `json:"renewFrom,omitempty"`
	// RenewalID is the renewal under way (RENEWING).
	RenewalID string `json:"renewalId,omitempty"`
	// RevocationID is the removal of the access (REVOKING, REVOKE_FAILED).
	RevocationID string `json:"revocationId,omitempty"`
}

// minePerTarget is the caller's standing on each target they have a
// binding for, by target key: one statement for the bindings, and one
// more read for each access held (to name the request that carries it),
// bounded by the number of targets.
func (s *Server) minePerTarget(ctx context.Context, st RequestStore, subject string) (map[string]*mineView, error) {
	bs, err := st.BindingListBySubject(ctx, subject)
	if err != nil {
		return nil, fmt.Errorf("targets of %s: %w", subject, err)
	}
	out := make(map[string]*mineView, len(bs))
	for _, b := range bs {
		v, err := s.mineOf(ctx, st, b)
		if err != nil {
			return nil, err
		}
		if v != nil {
			out[b.TargetKey] = v
		}
	}
	return out, nil
}

// mineOf is b as its subject's standing on its target; nil when the row
// is re-appliable (nothing held, nothing open). The binding's owner is
// not always the request that carries the access: a renewal under way
// owns the row while the grant it renews still carries the access, and
// so does a revocation until its removal is deployed — each names that
// grant.
func (s *Server) mineOf(ctx context.Context, st RequestStore, b store.Binding) (*mineView, error) {
	if b.Reappliable() {
		return nil, nil
	}
	v := &mineView{Status: b.Status, OperationID: b.OperationID}
	switch b.Status {
	case domain.BindingValidated, domain.BindingRenewing, domain.BindingRevoking, domain.BindingRevokeFailed:
	default:
		return v, nil // not in effect yet: the request under way is all there is to say
	}
	if !b.ExpiresAt.IsZero() {
		at := b.ExpiresAt.UTC()
		v.ExpiresAt, v.Expired = &at, b.Expired
	}
	op, err := st.OperationGet(ctx, b.OperationID)
	if err != nil {
		return nil, fmt.Errorf("owner of %s's binding on %s: %w", b.Subject, b.TargetKey, err)
	}
	switch b.Status {
	case domain.BindingValidated:
		if b.InEffect() {
			v.RenewFrom = s.renewFrom(op, b.ExpiresAt)
		}
	case domain.BindingRenewing:
		v.OperationID, v.RenewalID = op.GrantOperationID, op.OperationID
	default:
		v.OperationID, v.RevocationID = op.GrantOperationID, op.OperationID
	}
	return v, nil
}
