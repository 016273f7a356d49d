package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/gitlab"
	"changeflow/internal/identity"
	"changeflow/internal/store"
	"changeflow/internal/workflow/callbacks"
	"changeflow/internal/workflow/flow"
	"changeflow/internal/workflow/lifecycle"
	"changeflow/internal/workflow/reconcile"
	"changeflow/internal/workflow/single"
)

// The ops write endpoints of the single-request path and reconciliation
// (docs/api.md, "Operations endpoints"): retrigger a stopped request, run reconciliation now, and
// replay a recorded approval decision from the callback inbox. The batch
// endpoints (rounds, settle) are the batch path's.

// OpsActions is what the ops write endpoints do; WorkflowOps is the
// production implementation. A nil OpsActions makes them answer 500 with
// the generic message (logged), never a fake success.
type OpsActions interface {
	// Retrigger re-runs a stopped request and returns the action resumed
	// (single.Retrigger's contract and errors).
	Retrigger(ctx context.Context, operationID, actor string) (action string, err error)
	// Reconcile runs one reconciliation now.
	Reconcile(ctx context.Context) (reconcile.Result, error)
	// ReplayApproval applies the request's latest recorded approval
	// decision again (stale when already acted on).
	ReplayApproval(ctx context.Context, operationID string) (callbacks.Result, error)
	// ExpiryScan runs one expiry scan now (lifecycle.Expiry.ScanOnce: safe
	// beside the scheduled scans of every instance).
	ExpiryScan(ctx context.Context) (lifecycle.ExpiryResult, error)
}

// WorkflowOps implements OpsActions with the workflow.
type WorkflowOps struct {
	Store      *store.Store
	Reconciler *reconcile.Reconciler
	Callbacks  *callbacks.Callbacks
	// Expiry is the instance's expiry scan; a manual scan runs its
	// ScanOnce, so its Wake starts the created removals at once.
	Expiry *lifecycle.Expiry
	// Engine, when non-nil, is woken after a retrigger so the resumed
	// action starts at once rather than at the next poll.
	Engine *engine.Engine
	// Env, when its GitLab is set, lets a retrigger of a failed check
	// pipeline re-run that pipeline first (single.RetryFailedPipeline);
	// without it the retrigger polls the pipeline as it is.
	Env flow.Env
}

// Retrigger implements OpsActions.
func (o WorkflowOps) Retrigger(ctx context.Context, operationID, actor string) (string, error) {
	if o.Store == nil {
		return "", errors.New("retrigger: no store wired")
	}
	if o.Env.GitLab != nil {
		op, err := o.Store.OperationGet(ctx, operationID)
		if err != nil {
			return "", err
		}
		if stopped := op.DueAt.IsZero() && op.LeaseOwner == ""; stopped {
			if _, _, err := single.RetryFailedPipeline(ctx, o.Env, op); err != nil {
				return "", fmt.Errorf("retrigger %s: %w", operationID, err)
			}
		}
	}
	action, err := single.Retrigger(ctx, o.Store, operationID, actor)
	if err == nil && o.Engine != nil {
		o.Engine.Wake()
	}
	return action, err
}

// Reconcile implements OpsActions.
func (o WorkflowOps) Reconcile(ctx context.Context) (reconcile.Result, error) {
	if o.Reconciler == nil {
		return reconcile.Result{}, errors.New("reconcile: no reconciler wired")
	}
	return o.Reconciler.RunOnce(ctx)
}

// ReplayApproval implements OpsActions.
func (o WorkflowOps) ReplayApproval(ctx context.Context, operationID string) (callbacks.Result, error) {
	if o.Callbacks == nil {
		return 0, errors.New("replay approval: no callbacks wired")
	}
	return o.Callbacks.ReplayApproval(ctx, operationID)
}

// ExpiryScan implements OpsActions.
func (o WorkflowOps) ExpiryScan(ctx context.Context) (lifecycle.ExpiryResult, error) {
	if o.Expiry == nil {
		return lifecycle.ExpiryResult{}, errors.New("expiry scan: no expiry scan wired")
	}
	return o.Expiry.ScanOnce(ctx)
}

// worded is an ops write's answer with a message in words besides its
// data (the envelope's message is empty otherwise).
type worded struct {
	message string
	data    any
}

// opsWrite runs an ops write and records it, like opsCall for reads: the
// body (a JSON object, optional) is read only here, after rate limiting
// and authorization passed; its fields, the query and the path
// parameters are the audit record's parameters, with the reserved
// __authenticatedOperator written over them by the server (opsParams).
func (s *Server) opsWrite(action string, pathParams []string, run func(r *http.Request, operator identity.Identity, body map[string]any) (resource string, code domain.Code, data any, err error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, _ := identity.FromContext(r.Context())
		client := map[string]any{}
		for k, v := range r.URL.Query() {
			if len(v) == 1 {
				client[k] = v[0]
			} else {
				client[k] = v
			}
		}
		fields := map[string]any{}
		raw, err := readBody(w, r)
		if err == nil && len(strings.TrimSpace(string(raw))) > 0 {
			if err = decodeJSON(raw, &fields); err == nil {
				for k, v := range fields {
					client[k] = v
				}
			}
		}
		for _, p := range pathParams {
			client[p] = r.PathValue(p)
		}
		params := opsParams(client, res.Identity)
		resource := ""
		if len(pathParams) > 0 {
			resource = r.PathValue(pathParams[0])
		}
		code, data := domain.CodeOK, any(nil)
		if err == nil {
			resource, code, data, err = run(r, res.Identity, fields)
		}
		outcome := code
		if err != nil {
			outcome = domain.ErrorCode(err)
		}
		s.audit(context.WithoutCancel(r.Context()), res.Identity, action, resource, "ops-"+uuid.NewString(), params, string(outcome))
		if err != nil {
			writeError(w, r, s.deps.Logger, err)
			return
		}
		if wd, ok := data.(worded); ok {
			writeJSON(w, s.deps.Logger, StatusOf(code), Envelope{Code: code, Message: wd.message, Data: wd.data})
			return
		}
		respond(w, s.deps.Logger, code, data)
	})
}

// retriggerView is the 202 answer.
type retriggerView struct {
	OperationID string `json:"operationId"`
	// Action is the action resumed (due now).
	Action string `json:"action"`
	// From is the step the request stopped at.
	From stepView `json:"from"`
}

// handleOpsRetrigger is POST /ops/requests/{operationId}/retrigger. The
// optional body field "step", when given, must name where the request
// stopped — its step (e.g. HANDLE_MERGE_FAILED) or the action it keeps
// (e.g. merge) — so an operator never resumes a request that moved since
// they looked.
func (s *Server) handleOpsRetrigger() http.Handler {
	return s.opsWrite(config.RouteOpsRequestRetrigger, []string{"operationId"},
		func(r *http.Request, operator identity.Identity, body map[string]any) (string, domain.Code, any, error) {
			id := r.PathValue("operationId")
			want, ok := body["step"].(string)
			if v, present := body["step"]; present && v != nil && !ok {
				return id, "", nil, invalidField("step", "must be a string")
			}
			acts, st := s.deps.Business.OpsActions, s.deps.Business.Ops
			if acts == nil || st == nil {
				return id, "", nil, domain.Internal("ops retrigger: no workflow wired", nil)
			}
			ctx := r.Context()
			op, err := st.OperationGet(ctx, id)
			if errors.Is(err, domain.ErrNotFound) {
				return id, "", nil, domain.Errorf(domain.CodeNotFound, "No such request.", "retrigger %s", id)
			} else if err != nil {
				return id, "", nil, domain.Internal("ops retrigger", err)
			}
			from := stepView{op.Step, domain.StepStatus(op.Step).String()}
			if want = strings.TrimSpace(want); want != "" && !strings.EqualFold(want, from.Name) && !strings.EqualFold(want, op.NextAction) {
				var f fieldErrors
				f.addMessage("step", "does not name where the request stopped: it is at "+from.Name,
					"The request is not stopped at "+want+": it is at "+from.Name+".")
				return id, "", nil, f.err()
			}
			action, err := acts.Retrigger(ctx, id, operator.Account)
			switch {
			case errors.Is(err, single.ErrNotStopped), errors.Is(err, domain.ErrPreempted):
				return id, "", nil, domain.Refusef(domain.CodeRequestInProgress, domain.ReasonNotStopped,
					"The request is not stopped: it is waiting for its next step, running, or finished, so there is nothing to retrigger.",
					"retrigger %s: %w", id, err)
			case errors.Is(err, domain.ErrNotFound):
				return id, "", nil, domain.Errorf(domain.CodeNotFound, "No such request.", "retrigger %s: %w", id, err)
			case errors.Is(err, single.ErrPipelineRateLimited):
				return id, "", nil, domain.Errorf(domain.CodeRetryLater,
					"GitLab is at its rate limit, so the failed pipeline was not re-run yet and the request has not moved. "+retryIn(gitlab.RetryAfterOf(err)),
					"retrigger %s: %w", id, err)
			case errors.Is(err, single.ErrPipelineNotRetried):
				return id, "", nil, domain.Refusef(domain.CodeRequestInProgress, domain.ReasonPipelineNotRetried,
					"The failed pipeline could not be re-run: GitLab refused to retry it (it may have nothing left to retry, or the bot may not run pipelines). Open the merge request, run its pipeline there, then re-trigger.",
					"retrigger %s: %w", id, err)
			case errors.Is(err, domain.ErrIllegalTransition):
				return id, "", nil, domain.Refusef(domain.CodeRequestInProgress, domain.ReasonNotRetriggerable,
					"The request cannot be retriggered from "+from.Name+".", "retrigger %s: %w", id, err)
			case err != nil:
				return id, "", nil, domain.Internal("ops retrigger", err)
			}
			return id, domain.CodeAccepted, retriggerView{OperationID: id, Action: action, From: from}, nil
		})
}

func (s *Server) handleOpsReconcile() http.Handler {
	return s.opsWrite(config.RouteOpsReconcileRun, nil,
		func(r *http.Request, _ identity.Identity, _ map[string]any) (string, domain.Code, any, error) {
			acts := s.deps.Business.OpsActions
			if acts == nil {
				return "", "", nil, domain.Internal("ops reconcile: no workflow wired", nil)
			}
			res, err := acts.Reconcile(r.Context())
			if err != nil {
				return "", "", nil, domain.Internal("ops reconcile", err)
			}
			return "", domain.CodeOK, res, nil
		})
}

// replayView is POST /ops/requests/{operationId}/replay-approval's answer.
type replayView struct {
	OperationID string `json:"operationId"`
	// Applied: the recorded decision moved the request on; false when
	// there is none or it was already acted on.
	Applied bool `json:"applied"`
}

func (s *Server) handleOpsReplayApproval() http.Handler {
	return s.opsWrite(config.RouteOpsRequestRetrigger, []string{"operationId"},
		func(r *http.Request, _ identity.Identity, _ map[string]any) (string, domain.Code, any, error) {
			id := r.PathValue("operationId")
			acts, st := s.deps.Business.OpsActions, s.deps.Business.Ops
			if acts == nil || st == nil {
				return id, "", nil, domain.Internal("ops replay: no workflow wired", nil)
			}
			if _, err := st.OperationGet(r.Context(), id); errors.Is(err, domain.ErrNotFound) {
				return id, "", nil, domain.Errorf(domain.CodeNotFound, "No such request.", "replay %s", id)
			} else if err != nil {
				return id, "", nil, domain.Internal("ops replay", err)
			}
			res, err := acts.ReplayApproval(r.Context(), id)
			if err != nil {
				return id, "", nil, domain.Internal("ops replay", err)
			}
			return id, domain.CodeOK, replayView{OperationID: id, Applied: res == callbacks.Applied}, nil
		})
}

// retryIn says in words when to try again after GitLab's Retry-After (a
// minute when GitLab named no wait).
func retryIn(after time.Duration) string {
	if after <= 0 {
		return "Try again in a minute."
	}
	secs := int((after + time.Second - 1) / time.Second)
	if secs == 1 {
		return "Try again in a second."
	}
	return fmt.Sprintf("Try again in %d seconds.", secs)
}
