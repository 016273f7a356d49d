package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/identity"
	"changeflow/internal/workflow/lifecycle"
)

// Giving access back (docs/api.md, "Give access back"): the owner ends
// their own access early, an operator revokes anyone's. Both create the
// revocation the expiry scan would (lifecycle.Revoker.Revoke): no approval is
// needed to lose access, and a second call answers the existing one.

// Revoker creates revocations; WorkflowRevoker is the production one. nil
// answers the revoke endpoints with 500 (logged), never a fake success.
type Revoker interface {
	Revoke(ctx context.Context, grantOperationID string, reason domain.RevokeReason, text, actor string) (lifecycle.RevokeResult, error)
}

// WorkflowRevoker implements Revoker with the workflow, waking the engine
// so a single-request removal starts at once.
type WorkflowRevoker struct {
	Revoker lifecycle.Revoker
	Engine  *engine.Engine
}

// Revoke implements Revoker.
func (r WorkflowRevoker) Revoke(ctx context.Context, grantOperationID string, reason domain.RevokeReason, text, actor string) (lifecycle.RevokeResult, error) {
	res, err := r.Revoker.Revoke(ctx, grantOperationID, reason, text, actor)
	if err == nil && res.Created && r.Engine != nil {
		r.Engine.Wake()
	}
	return res, err
}

// revokeView is the answer of both revoke endpoints.
type revokeView struct {
	// OperationID is the grant's.
	OperationID string `json:"operationId"`
	// RevocationID is the revocation's operationId; GET
	// /api/requests/{revocationId} follows it.
	RevocationID string `json:"revocationId"`
	// Created is false when the revocation already existed.
	Created bool `json:"created"`
	// BindingStatus is the access's state: REVOKING at first, then
	// REVOKED (removed and deployed) or REVOKE_FAILED.
	BindingStatus domain.BindingStatus `json:"bindingStatus"`
}

// maxRevokeReason bounds an operator's reason (the same bound as a
// request's reason).
const maxRevokeReason = 500

// revokeError maps lifecycle.Revoker.Revoke's errors to the error model.
func revokeError(id string, err error) error {
	var under *lifecycle.RenewalUnderWayError
	switch {
	case errors.As(err, &under):
		// Ending the access wins over extending it, but only while the
		// renewal can be withdrawn without racing its merge; past that
		// point the owner is told what to do instead.
		return domain.Refusef(domain.CodeRequestInProgress, under.Reason,
			fmt.Sprintf("This access is being renewed by %s, which can no longer be withdrawn: %s.", under.Renewal, under.Advice),
			"revoke %s: %w", id, err)
	case errors.Is(err, domain.ErrNotFound):
		return domain.Errorf(domain.CodeNotFound, "No such request.", "revoke %s: %w", id, err)
	case errors.Is(err, lifecycle.ErrNotInEffect):
		return domain.Refusef(domain.CodeNotInEffect, domain.ReasonNotInEffect,
			"This request's access is not in effect, so there is nothing to give back: it is still being granted, "+
				"was rejected or closed, or stopped on a failure. Withdraw a request that is still waiting, or ask an operator.",
			"revoke %s: %w", id, err)
	}
	return domain.Internal("revoke", err)
}

// handleRequestRevoke is POST /api/requests/{operationId}/revoke: the
// owner gives their access back. Only the request's own subject may; for
// anyone else (and an unknown id) the answer is 404, as for reading it.
func (s *Server) handleRequestRevoke() http.Handler {
	b := s.deps.Business
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, _ := identity.FromContext(r.Context())
		id := r.PathValue("operationId")
		if b.Requests == nil || b.Revoker == nil {
			writeError(w, r, s.deps.Logger, domain.Internal("revoke: no workflow wired", nil))
			return
		}
		op, err := b.Requests.OperationGet(r.Context(), id)
		switch {
		case errors.Is(err, domain.ErrNotFound):
			writeError(w, r, s.deps.Logger, domain.Errorf(domain.CodeNotFound, "No such request.", "revoke %s", id))
			return
		case err != nil:
			writeError(w, r, s.deps.Logger, domain.Internal("revoke", err))
			return
		case op.Subject != res.Identity.Account:
			writeError(w, r, s.deps.Logger, domain.Errorf(domain.CodeNotFound, "No such request.",
				"revoke %s: belongs to %s, not %s", id, op.Subject, res.Identity.Account))
			return
		case op.Kind == domain.OperationRevoke:
			writeError(w, r, s.deps.Logger, domain.Errorf(domain.CodeInvalidArgument,
				"This is a revocation, not a request for access; give back the request it ends.", "revoke %s: a revocation", id))
			return
		}
		rv, err := b.Revoker.Revoke(r.Context(), id, domain.RevokeGivenBack, "given back by its owner", res.Identity.Account)
		if err != nil {
			if moved := revokeMovedOn(r.Context(), b.Requests, op, err); moved != nil {
				err = moved
			} else {
				err = revokeError(id, err)
			}
			writeError(w, r, s.deps.Logger, err)
			return
		}
		code := domain.CodeAccepted
		if !rv.Created {
			code = domain.CodeOK
		}
		respond(w, s.deps.Logger, code, revokeView{OperationID: id, RevocationID: rv.OperationID, Created: rv.Created, BindingStatus: rv.Binding})
	})
}

// handleOpsRevoke is POST /ops/requests/{operationId}/revoke: an operator
// (ops.write) revokes anyone's access, with a required reason; audited
// like every ops write (opsWrite).
func (s *Server) handleOpsRevoke() http.Handler {
	return s.opsWrite(config.RouteOpsRequestRevoke, []string{"operationId"},
		func(r *http.Request, operator identity.Identity, body map[string]any) (string, domain.Code, any, error) {
			id := r.PathValue("operationId")
			reason, err := opsReason(body, "say why the access is revoked")
			if err != nil {
				return id, "", nil, err
			}
			rk := s.deps.Business.Revoker
			if rk == nil {
				return id, "", nil, domain.Internal("ops revoke: no workflow wired", nil)
			}
			if st := s.deps.Business.Ops; st != nil {
				if op, err := st.OperationGet(r.Context(), id); err == nil && op.Kind == domain.OperationRevoke {
					return id, "", nil, domain.Errorf(domain.CodeInvalidArgument,
						"This is a revocation, not a request for access; revoke the request it ends.", "ops revoke %s: a revocation", id)
				}
			}
			rv, err := rk.Revoke(r.Context(), id, domain.RevokeOperator, reason, operator.Account)
			if err != nil {
				if st := s.deps.Business.Requests; st != nil {
					if op, gerr := st.OperationGet(r.Context(), id); gerr == nil {
						if moved := revokeMovedOn(r.Context(), st, op, err); moved != nil {
							return id, "", nil, moved
						}
					}
				}
				return id, "", nil, revokeError(id, err)
			}
			code := domain.CodeAccepted
			if !rv.Created {
				code = domain.CodeOK
			}
			return id, code, revokeView{OperationID: id, RevocationID: rv.OperationID, Created: rv.Created, BindingStatus: rv.Binding}, nil
		})
}
