package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/identity"
	"changeflow/internal/store"
	"changeflow/internal/workflow/withdraw"
)

// RequestCloser closes a stopped request for an operator;
// withdraw.Withdrawer implements it (its Close: contract and errors). The
// close endpoint finds it on Business.Withdraw, which does both.
type RequestCloser interface {
	Close(ctx context.Context, operationID, actor, reason string) (withdraw.Answer, error)
}

// opsReason reads an ops write's required "reason" field: one line of
// text, at most maxRevokeReason characters; why completes "is required: ".
func opsReason(body map[string]any, why string) (string, error) {
	reason, ok := body["reason"].(string)
	reason = strings.TrimSpace(reason)
	if v, present := body["reason"]; present && v != nil && !ok {
		return "", invalidField("reason", "must be a string")
	}
	switch n := utf8.RuneCountInString(reason); {
	case n == 0:
		return "", invalidField("reason", "is required: "+why)
	case n > maxRevokeReason:
		return "", invalidField("reason", fmt.Sprintf("must be at most %d characters", maxRevokeReason))
	}
	// The reason goes into the step history and the console: refused,
	// not stripped, like a request's reason.
	if c, pos, bad := domain.FirstUnsafeTextRune(reason); bad {
		return "", invalidField("reason", fmt.Sprintf(
			"must be one line of text without control or bidirectional-formatting characters (U+%04X at character %d)", c, pos+1))
	}
	return reason, nil
}

// handleOpsClose is POST /ops/requests/{operationId}/close {reason}
// (docs/api.md): an operator ends a request stopped on a failure or in a
// pending step as CLOSED, closing its MR; "merged wins" — an MR merged
// meanwhile makes the request follow its merge, and the answer says so.
// A repeat answers the state (idempotent); a request not stopped is
// refused in words. Audited like every ops write (opsWrite), the step
// history names the operator and the reason.
func (s *Server) handleOpsClose() http.Handler {
	return s.opsWrite(config.RouteOpsRequestClose, []string{"operationId"},
		func(r *http.Request, operator identity.Identity, body map[string]any) (string, domain.Code, any, error) {
			id := r.PathValue("operationId")
			reason, err := opsReason(body, "say why the request is closed")
			if err != nil {
				return id, "", nil, err
			}
			closer, _ := s.deps.Business.Withdraw.(RequestCloser)
			st := s.deps.Business.Requests
			if closer == nil || st == nil {
				return id, "", nil, domain.Internal("ops close: no workflow wired", nil)
			}
			ctx := r.Context()
			op, err := st.OperationGet(ctx, id)
			switch {
			case errors.Is(err, domain.ErrNotFound):
				return id, "", nil, domain.Errorf(domain.CodeNotFound, "No such request.", "close %s", id)
			case err != nil:
				return id, "", nil, domain.Internal("ops close: read request", err)
			case op.Kind == domain.OperationRevoke:
				return id, "", nil, domain.Refusef(domain.CodeRequestInProgress, domain.ReasonIsRevocation,
					"This is a removal of access: closing it would leave the access on the default branch. Retrigger it instead, or revoke again once it ended.",
					"close %s: a revocation", id)
			}
			ans, err := closer.Close(ctx, id, operator.Account, reason)
			if err != nil {
				return id, "", nil, domain.Internal("ops close", err)
			}
			return s.closeAnswer(ctx, id, ans)
		})
}

// closeAnswer maps a close's answer onto the API's.
func (s *Server) closeAnswer(ctx context.Context, id string, ans withdraw.Answer) (string, domain.Code, any, error) {
	if ans.Merged {
		return id, "", nil, domain.Refusef(domain.CodeAlreadyInEffect, domain.ReasonMergedFirst,
			fmt.Sprintf("The merge request was merged before it could be closed: the request follows its merge and takes effect. To end the access, revoke it (POST /ops/requests/%s/revoke).", id),
			"close %s: merged wins", id)
	}
	step := domain.StepStatus(ans.Operation.Step)
	status := ans.Operation.Kind.GrantView(ans.Binding.Status, step)
	switch ans.Result.Outcome {
	case store.WithdrawClaimed:
		where := "a batch"
		if ans.Result.BatchID != 0 {
			where = fmt.Sprintf("batch %d", ans.Result.BatchID)
		}
		return id, "", nil, domain.Refusef(domain.CodeRequestInProgress, domain.ReasonClaimedByBatch,
			fmt.Sprintf("The request is in %s, whose merge request is under way: a member is closed only once its batch is blocked or has ended. Settle the batch instead.", where),
			"close %s: claimed by %s", id, where)
	case store.WithdrawRefused:
		ended := ans.Result.Binding.OperationID != id || step.Kind() == domain.KindClosed ||
			status == domain.BindingClosed || status == domain.BindingRejected
		switch {
		case status == domain.BindingMerged || status == domain.BindingValidated:
			return id, "", nil, domain.Refusef(domain.CodeAlreadyInEffect, domain.ReasonInEffect,
				fmt.Sprintf("The request has already taken effect; there is nothing to close. To end the access, revoke it (POST /ops/requests/%s/revoke).", id),
				"close %s: %s", id, status)
		case ended:
			v, err := s.requestView(ctx, ans.Operation, true)
			if err != nil {
				return id, "", nil, domain.Internal("ops close: request view", err)
			}
			return id, domain.CodeOK, worded{message: "The request has already ended; there is nothing to close.", data: v}, nil
		}
		if step.Stopped() {
			return id, "", nil, domain.Refusef(domain.CodeRequestInProgress, domain.ReasonStoppedWhileMerging,
				fmt.Sprintf("The request stopped while it was being merged (it is at %s): closing it could race the merge. Retrigger it instead.", step),
				"close %s: stopped while merging (%s, %s)", id, step, status)
		}
		return id, "", nil, domain.Refusef(domain.CodeRequestInProgress, domain.ReasonNotStopped,
			fmt.Sprintf("The request is not stopped on a failure (it is at %s): it is waiting for its next step or running, so there is nothing to close. Only a failed or stuck request can be closed.", step),
			"close %s: not stopped (%s, %s)", id, step, status)
	}
	closed := ans.Binding.Status == domain.BindingClosed || ans.Binding.OperationID != id
	if ans.Stopped && !closed {
		return id, "", nil, domain.Refusef(domain.CodeRequestInProgress, domain.ReasonCloseFailed,
			"The close is recorded, but closing the request's merge request failed; retrigger it once GitLab answers again.",
			"close %s: stopped in %s", id, step)
	}
	v, err := s.requestView(ctx, ans.Operation, true)
	if err != nil {
		return id, "", nil, domain.Internal("ops close: request view", err)
	}
	if ans.Pending && !closed {
		return id, domain.CodeAccepted, v, nil // closing its MR is being retried
	}
	return id, domain.CodeOK, v, nil
}
