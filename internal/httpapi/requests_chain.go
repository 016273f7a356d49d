package httpapi

import (
	"context"
	"errors"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/workflow/lifecycle"
)

// maxChainLinks bounds how many renewals one status read follows from an
// old request to the request that carries its access now. A link is a
// renewal that took effect, and a renewal can be asked for only inside
// the renewal window of the link before it (docs/flows/lifecycle.md, "Renewal"),
// so a chain grows by at most one link per period of the access: 32 is
// years of weekly renewals, at one indexed read per link. A longer chain
// is shown up to its 32nd link, which did take effect (a renewal of it
// exists, and one is accepted only while its access is in effect): its
// own page follows the rest, so a read never costs more than the bound
// and the person still reaches the end.
const maxChainLinks = 32

// accessEnd is what became of an old request's access, read by
// followAccess: the request that carries it now (Carrier), or its
// removal (RevocationID with Status). The zero value: nothing more is
// known than the request's own history.
type accessEnd struct {
	// Carrier is the renewal that carries the access now, with its
	// status (VALIDATED once in effect; a renewal in flight of the
	// request itself, in the grant's vocabulary) and, when it is the
	// access in effect, the access's expiry.
	Carrier *renewalView
	// RevocationID and Status: the access was removed, or is being, by
	// that revocation — of the request itself or of a later link.
	RevocationID string
	Status       domain.BindingStatus
	// UpdatedAt is the binding row's, when the end was read from it.
	UpdatedAt time.Time
}

// followAccess follows op's chain of renewals — op, the renewal of op that
// took effect or runs, its renewal, … — to what the relationship's binding
// row says now. It is read only for a request that no longer owns its
// row and whose own history ends in effect (requestViewOf), so the status
// read of a request owning its row never pays for it
// (TestStatusReadIsOneStatement). Reads: the row, then one indexed read
// per link (store.OperationRenewalsOf, the newest renewal of the link),
// and at most two at the end; at most maxChainLinks links.
//
// Only a link's newest renewal can continue the chain: renewals of one
// request run one at a time on its row, and once one took effect the
// row is no longer that request's, so no later renewal of it can exist.
// A newest renewal that ended without effect (renewalEnd: rejected,
// withdrawn, closed, cut by the expiry) gave the row back, so the chain
// stops at the link it renewed.
func followAccess(ctx context.Context, st RequestStore, op store.Operation) (accessEnd, error) {
	row, err := st.BindingGet(ctx, op.Subject, op.TargetKey)
	if errors.Is(err, domain.ErrNotFound) {
		return accessEnd{}, nil
	}
	if err != nil {
		return accessEnd{}, err
	}
	var prev *store.Operation // the link cur renews; nil while cur is op
	cur := op
	for links := 0; ; links++ {
		if prev != nil && row.OperationID == cur.OperationID {
			return ownerEnd(op, *prev, cur, row), nil
		}
		if prev != nil && row.OperationID == domain.RevocationID(cur.OperationID) {
			// A later link's access is being removed, or was (op's own
			// revocation is read before this is called).
			return accessEnd{RevocationID: row.OperationID, Status: row.Status, UpdatedAt: row.UpdatedAt}, nil
		}
		if links == maxChainLinks {
			return accessEnd{Carrier: &renewalView{OperationID: cur.OperationID, Status: domain.BindingValidated}}, nil
		}
		rs, err := st.OperationRenewalsOf(ctx, store.OperationRenewalsOfParams{GrantOperationID: cur.OperationID, Limit: 1})
		if err != nil {
			return accessEnd{}, err
		}
		if len(rs) == 0 || renewalEnd(domain.StepStatus(rs[0].Step)) != "" {
			break
		}
		link := cur
		prev, cur = &link, rs[0]
	}
	if prev == nil {
		return accessEnd{}, nil // op was never renewed: its own history says it all
	}
	// The chain ends at a renewal that owns nothing any more: its access
	// was removed and the relationship asked for again (the new request
	// owns the row), as for a grant's own revocation in requestViewOf.
	rv, err := st.OperationGet(ctx, domain.RevocationID(cur.OperationID))
	switch {
	case err == nil:
		status, err := lastBindingStatus(ctx, st, rv.OperationID)
		if err != nil {
			return accessEnd{}, err
		}
		return accessEnd{RevocationID: rv.OperationID, Status: status}, nil
	case !errors.Is(err, domain.ErrNotFound):
		return accessEnd{}, err
	}
	// No state of the workflow leaves a renewal that took effect without
	// its row, a renewal or a revocation; should one appear, the page
	// names the last link, whose own page shows its history.
	status, err := lastBindingStatus(ctx, st, cur.OperationID)
	if err != nil {
		return accessEnd{}, err
	}
	return accessEnd{Carrier: &renewalView{OperationID: cur.OperationID, Status: status}}, nil
}

// ownerEnd is the chain's end when its link cur (renewing prev) owns the
// relationship's row. A renewal in effect carries the access. A renewal
// still running (RENEWING: in flight, or stopped on a failure) leaves it
// with prev, the link it renews: op itself reads as before (in effect,
// its renewal in flight named with its progress); a later prev is the
// renewal that carries the access.
func ownerEnd(op, prev, cur store.Operation, row store.Binding) accessEnd {
	carrier, status := cur, cur.Kind.GrantView(row.Status, domain.StepStatus(cur.Step))
	if row.Status == domain.BindingRenewing && prev.OperationID != op.OperationID {
		carrier, status = prev, domain.BindingValidated
	}
	v := &renewalView{OperationID: carrier.OperationID, Status: status}
	if status == domain.BindingValidated && !row.ExpiresAt.IsZero() {
		at := row.ExpiresAt.UTC()
		v.ExpiresAt = &at
	}
	return accessEnd{Carrier: v, UpdatedAt: row.UpdatedAt}
}

// movedOnData is a refused give-back's data: the request to act on.
type movedOnData struct {
	OperationID string `json:"operationId"`
	// Reason tells the two apart: renewed (OperationID carries the
	// access now) or removed (OperationID is the removal).
	Reason domain.Reason `json:"reason"`
}

// revokeMovedOn is the refusal of giving back op — by its owner, or an
// operator — once op no longer carries its access, or nil when it still
// does (or nothing more is known; the caller's own answer stands): a
// renewal carries it now (409 NOT_IN_EFFECT naming that renewal, where
// the access is given back), or it is being removed or was already (409
// NOT_IN_EFFECT naming the removal). Without this the workflow finds no
// revocation candidate for op and the answer was 404, as for a request
// that does not exist. Read only after the workflow refused, so a
// give-back that goes through pays nothing for it.
func revokeMovedOn(ctx context.Context, st RequestStore, op store.Operation, refusal error) error {
	if st == nil || op.Kind == domain.OperationRevoke ||
		!errors.Is(refusal, domain.ErrNotFound) && !errors.Is(refusal, lifecycle.ErrNotInEffect) {
		return nil
	}
	switch _, err := st.BindingGetByOperation(ctx, op.OperationID); {
	case err == nil:
		return nil // op owns its row: the workflow's answer is about op itself
	case !errors.Is(err, domain.ErrNotFound):
		return domain.Internal("revoke: read the binding", err)
	}
	end, err := followAccess(ctx, st, op)
	switch {
	case err != nil:
		return domain.Internal("revoke: follow the renewals", err)
	case end.Carrier != nil && end.Carrier.OperationID != op.OperationID && end.Carrier.Status == domain.BindingValidated:
		de := domain.Errorf(domain.CodeNotInEffect,
			"This access was renewed: it continues under request "+end.Carrier.OperationID+". Give it back there.",
			"revoke %s: carried by %s: %w", op.OperationID, end.Carrier.OperationID, refusal)
		de.Data = movedOnData{OperationID: end.Carrier.OperationID, Reason: domain.ReasonRenewed}
		return de
	case end.RevocationID != "":
		de := domain.Errorf(domain.CodeNotInEffect,
			"This access is being removed, or was removed already, by request "+end.RevocationID+"; there is nothing more to give back.",
			"revoke %s: removed by %s: %w", op.OperationID, end.RevocationID, refusal)
		de.Data = movedOnData{OperationID: end.RevocationID, Reason: domain.ReasonRemoved}
		return de
	}
	return nil
}
