package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/gitlab"
	"changeflow/internal/identity"
	"changeflow/internal/workflow/batch"
)

// The ops write endpoints of the batch path (docs/api.md, "Operations endpoints"): run a batch round
// now, and settle a stuck or blocked batch.

// BatchActions is what the batch write endpoints do; WorkflowBatchOps is
// the production implementation. A nil BatchActions makes them answer 500
// with the generic message (logged), never a fake success.
type BatchActions interface {
	// RunRound runs one batch round for the config repo project now
	// (safe to overlap with the scheduler: the project's slot answers).
	RunRound(ctx context.Context, projectID int64) (batch.RoundResult, error)
	// Projects are the configured config repo projects.
	Projects() []int64
	// SettleBatch settles a running or blocked batch: close its MR, re-read
	// it, merged wins (batch.Flow.SettleBatch).
	SettleBatch(ctx context.Context, batchID int64, actor string) (batch.SettleResult, error)
}

// WorkflowBatchOps implements BatchActions with the workflow.
type WorkflowBatchOps struct {
	Rounds *batch.Rounds
	Batch  batch.Flow
}

// RunRound implements BatchActions.
func (o WorkflowBatchOps) RunRound(ctx context.Context, projectID int64) (batch.RoundResult, error) {
	if o.Rounds == nil {
		return batch.RoundResult{}, errors.New("rounds: not wired")
	}
	return o.Rounds.RunRound(ctx, projectID)
}

// Projects implements BatchActions.
func (o WorkflowBatchOps) Projects() []int64 {
	if o.Rounds == nil {
		return nil
	}
	return o.Rounds.Projects()
}

// SettleBatch implements BatchActions.
func (o WorkflowBatchOps) SettleBatch(ctx context.Context, batchID int64, actor string) (batch.SettleResult, error) {
	if o.Batch.Store == nil || o.Batch.GitLab == nil {
		return batch.SettleResult{}, errors.New("settle: no workflow wired")
	}
	return o.Batch.SettleBatch(ctx, batchID, "SETTLED_BY_OPERATOR", "settled by "+actor, actor)
}

// roundsView is POST /ops/rounds' answer: one result per project.
type roundsView struct {
	Rounds []projectRound `json:"rounds"`
}

type projectRound struct {
	ProjectID int64 `json:"projectId"`
	batch.RoundResult
}

// handleOpsRounds is POST /ops/rounds: one round now for the body's
// projectId, or for every configured project.
func (s *Server) handleOpsRounds() http.Handler {
	return s.opsWrite(config.RouteOpsRoundsRun, nil,
		func(r *http.Request, _ identity.Identity, body map[string]any) (string, domain.Code, any, error) {
			acts := s.deps.Business.BatchActions
			if acts == nil {
				return "", "", nil, domain.Internal("ops rounds: no workflow wired", nil)
			}
			projects := acts.Projects()
			if v, ok := body["projectId"]; ok && v != nil {
				f, isNum := v.(float64)
				if !isNum || f <= 0 || f != float64(int64(f)) {
					return "", "", nil, invalidField("projectId", "must be a positive integer")
				}
				projects = []int64{int64(f)}
			}
			out := roundsView{Rounds: []projectRound{}}
			for _, p := range projects {
				res, err := acts.RunRound(r.Context(), p)
				if err != nil {
					return "", "", nil, domain.Internal("ops rounds", err)
				}
				out.Rounds = append(out.Rounds, projectRound{ProjectID: p, RoundResult: res})
			}
			return "", domain.CodeOK, out, nil
		})
}

// handleOpsBatchSettle is POST /ops/batches/{id}/settle. A batch another
// path settled first answers 200 with alreadySettled: true.
func (s *Server) handleOpsBatchSettle() http.Handler {
	return s.opsWrite(config.RouteOpsBatchSettle, []string{"id"},
		func(r *http.Request, operator identity.Identity, _ map[string]any) (string, domain.Code, any, error) {
			raw := r.PathValue("id")
			id, err := strconv.ParseInt(raw, 10, 64)
			if err != nil || id <= 0 {
				var f fieldErrors
				f.addMessage("id", "must be a positive integer", "The batch id must be a positive integer.")
				return raw, "", nil, f.err()
			}
			acts := s.deps.Business.BatchActions
			if acts == nil {
				return raw, "", nil, domain.Internal("ops settle: no workflow wired", nil)
			}
			res, err := acts.SettleBatch(r.Context(), id, operator.Account)
			switch {
			case errors.Is(err, domain.ErrNotFound):
				return raw, "", nil, domain.Errorf(domain.CodeNotFound, "No such batch.", "settle batch %d: %w", id, err)
			case errors.Is(err, batch.ErrMRWontClose):
				return raw, "", nil, domain.Refusef(domain.CodeRequestInProgress, domain.ReasonMRWontClose,
					"The batch's merge request does not close, so the batch cannot be settled while it might still merge: fix the bot's rights or close (or merge) it by hand, then settle again.",
					"settle batch %d: %w", id, err)
			case gitlab.IsTransient(err) || gitlab.OutcomeUnknown(err) || gitlab.IsBreakerOpen(err):
				return raw, "", nil, domain.Errorf(domain.CodeRetryLater,
					"GitLab did not answer while settling the batch; nothing was settled. Try again shortly.",
					"settle batch %d: %w", id, err)
			case err != nil:
				return raw, "", nil, domain.Internal("ops settle", err)
			}
			return raw, domain.CodeOK, res, nil
		})
}
