package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/uuid"

	"changeflow/internal/domain"
	"changeflow/internal/identity"
	"changeflow/internal/store"
	"changeflow/internal/workflow/withdraw"
)

// RequestWithdrawer withdraws a request for its owner;
// withdraw.Withdrawer implements it (its contract and errors).
type RequestWithdrawer interface {
	Withdraw(ctx context.Context, operationID, actor string) (withdraw.Answer, error)
}

// auditActionWithdraw names a withdrawal in the audit records.
const auditActionWithdraw = "requests.withdraw"

// handleWithdraw is POST /api/requests/{operationId}/withdraw (docs/api.md,
// "Withdraw a request"): the owner withdraws a request that has not taken
// effect. Only the owner: someone else's request answers 404 exactly like
// an unknown id — the same message, and the same path through the code
// (one read, one comparison), so neither the answer nor its timing tells
// that the id exists. Unlike the status read, an admin gets no exception:
// withdrawing is the requester's own decision; operators cancel through
// the ops endpoints.
//
// Answers: 200 OK with the request's view when it is withdrawn (CLOSED,
// step CLOSE_REQUESTER_WITHDRAWN; the approval system is told in the
// background) or had already ended otherwise (its status says how); 202
// ACCEPTED while closing its MR is being retried; 409 REQUEST_IN_PROGRESS
// once a batch round claimed it, while it merges, or while it waits for an
// operator, and for a revocation (the removal of an access: the owner's
// own give-back too) at any step; 409 ALREADY_IN_EFFECT when it merged
// (also when the merge won the race with this withdrawal) — the message
// says what to do instead. Every call on an existing request of the
// caller's is audited.
func (s *Server) handleWithdraw() http.Handler {
	b := s.deps.Business
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, _ := identity.FromContext(r.Context())
		caller := res.Identity.Account
		id := r.PathValue("operationId")
		if b.Requests == nil || b.Withdraw == nil {
			writeError(w, r, s.deps.Logger, domain.Internal("withdraw: no request store or withdrawer wired", nil))
			return
		}
		op, err := b.Requests.OperationGet(r.Context(), id)
		switch {
		case errors.Is(err, domain.ErrNotFound) || err == nil && op.Subject != caller:
			writeError(w, r, s.deps.Logger, domain.Errorf(domain.CodeNotFound, "No such request.",
				"withdraw %s by %s: unknown, or not the caller's", id, caller))
			return
		case err != nil:
			writeError(w, r, s.deps.Logger, domain.Internal("withdraw: read request", err))
			return
		}
		code, data, err := s.withdraw(r.Context(), op, caller)
		outcome := code
		if err != nil {
			outcome = domain.ErrorCode(err)
		}
		s.audit(context.WithoutCancel(r.Context()), res.Identity, auditActionWithdraw, id, "withdraw-"+uuid.NewString(),
			map[string]any{"operationId": id}, string(outcome))
		if err != nil {
			writeError(w, r, s.deps.Logger, err)
			return
		}
		respond(w, s.deps.Logger, code, data)
	})
}

// withdraw runs the withdrawal of op and maps its answer onto the API's.
//
// A revocation is refused by its kind here, before anything is locked,
// as the operator's close refuses it: domain.Withdraw refuses it too, but
// its refusal is worded by where the binding stands, and a removal's
// binding read in the grant's vocabulary looks like a grant's open MR.
// The kind never changes, so this answer cannot race the decision.
func (s *Server) withdraw(ctx context.Context, op store.Operation, caller string) (domain.Code, any, error) {
	id := op.OperationID
	if op.Kind == domain.OperationRevoke {
		return "", nil, domain.Refusef(domain.CodeRequestInProgress, domain.ReasonIsRevocation,
			"This is a removal of access, which cannot be withdrawn: it goes on until the access is removed (should it stop on a failure, an operator retries it). Once it is done you can ask for the access again.",
			"withdraw %s: a revocation", id)
	}
	ans, err := s.deps.Business.Withdraw.Withdraw(ctx, id, caller)
	switch {
	case errors.Is(err, domain.ErrNotFound):
		return "", nil, domain.Errorf(domain.CodeNotFound, "No such request.", "withdraw %s: %v", id, err)
	case err != nil:
		return "", nil, domain.Internal("withdraw", err)
	}
	giveBack := fmt.Sprintf("To end the access, give it back (POST /api/requests/%s/revoke).", id)
	if ans.Merged {
		return "", nil, domain.Refusef(domain.CodeAlreadyInEffect, domain.ReasonMergedFirst,
			"The change was merged before it could be withdrawn and takes effect. "+giveBack,
			"withdraw %s: merged wins", id)
	}
	switch ans.Result.Outcome {
	case store.WithdrawClaimed:
		where := "a batch"
		if ans.Result.BatchID != 0 {
			where = fmt.Sprintf("batch %d", ans.Result.BatchID)
		}
		return "", nil, domain.Refusef(domain.CodeRequestInProgress, domain.ReasonClaimedByBatch,
			fmt.Sprintf("The request was already taken into %s, whose merge request is under way; it can no longer be withdrawn. Once it takes effect you can give the access back.", where),
			"withdraw %s: claimed by %s", id, where)
	case store.WithdrawRefused:
		if err := refusedWithdrawal(id, ans.Result.View, giveBack); err != nil {
			return "", nil, err
		}
	}
	// A withdrawn renewal's row goes back to its grant, so a row no longer
	// this request's counts as closed for it.
	closed := ans.Binding.Status == domain.BindingClosed || ans.Binding.OperationID != id
	if ans.Stopped && !closed {
		// Withdrawn, but closing its MR kept failing: the binding is not
		// CLOSED and an operator has to retry (runbook: CLOSE_FAILED).
		return "", nil, domain.Refusef(domain.CodeRequestInProgress, domain.ReasonCloseFailed,
			"The withdrawal is recorded, but closing the request's merge request failed; an operator retries it. Nothing more to do on your side.",
			"withdraw %s: stopped in %s", id, domain.StepStatus(ans.Operation.Step))
	}
	v, err := s.requestView(ctx, ans.Operation, true)
	if err != nil {
		return "", nil, domain.Internal("withdraw: request view", err)
	}
	if ans.Pending && !closed {
		return domain.CodeAccepted, v, nil // closing its MR is being retried
	}
	return domain.CodeOK, v, nil
}

// refusedWithdrawal is the error for a request past the point of
// withdrawal, by where its binding is; nil for one that has ended already
// (rejected, closed, re-applied), whose state is the answer.
func refusedWithdrawal(id string, status domain.BindingStatus, giveBack string) error {
	switch status {
	case domain.BindingMerging:
		return domain.Refusef(domain.CodeRequestInProgress, domain.ReasonMerging,
			"The request is being merged and can no longer be withdrawn. Once it takes effect you can give the access back.",
			"withdraw %s: merging", id)
	case domain.BindingMerged, domain.BindingValidated:
		return domain.Refusef(domain.CodeAlreadyInEffect, domain.ReasonInEffect, "The request has already taken effect. "+giveBack,
			"withdraw %s: %s", id, status)
	case domain.BindingCreateFailed, domain.BindingHandleFailed:
		return domain.Refusef(domain.CodeRequestInProgress, domain.ReasonStoppedOnFailure,
			"The request stopped on a failure and waits for an operator, who can retry or cancel it; it cannot be withdrawn meanwhile.",
			"withdraw %s: %s", id, status)
	}
	return nil
}
