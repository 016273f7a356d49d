package httpapi

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/gitlab"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/flow"
)

// retryGitLab is the part of GitLab a pipeline re-run reads and writes:
// the MR's newest pipeline failed; a retry is answered by refuse (nil:
// accepted, the pipeline pending again) and recorded.
type retryGitLab struct {
	gitlab.GitLab
	mu      sync.Mutex
	refuse  error
	retried []int64
}

func (g *retryGitLab) ListMRPipelines(context.Context, string, int64) ([]gitlab.Pipeline, error) {
	return []gitlab.Pipeline{{ID: 41, Status: "failed", SHA: "abc"}}, nil
}

func (g *retryGitLab) RetryPipeline(_ context.Context, _ string, id int64) (gitlab.Pipeline, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.refuse != nil {
		return gitlab.Pipeline{}, g.refuse
	}
	g.retried = append(g.retried, id)
	return gitlab.Pipeline{ID: id, Status: "pending", SHA: "abc"}, nil
}

// TestOpsRetriggerReRunsTheFailedPipeline: on SQLite and MariaDB, the
// retrigger of a request whose check pipeline failed re-runs that
// pipeline with GitLab's retry before it polls it; when GitLab refuses
// the retry, the answer says why in words and the request stays where it
// stopped.
func TestOpsRetriggerReRunsTheFailedPipeline(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		gl := &retryGitLab{}
		w := newBizWorld(t, st, func(w *bizWorld, d *Deps) {
			env := flow.Env{Config: w.cfg.Current, GitLab: gl}
			d.Business.OpsActions = WorkflowOps{Store: w.st, Env: env}
		})
		ctx := t.Context()
		pipelineFailed := func(id, subject string) {
			stoppedFixture(t, st, id, subject)
			if _, err := st.DB().ExecContext(ctx, "UPDATE operation SET step_status = ?, next_action = ?, mr_iid = 7, version = version + 1 WHERE operation_id = ?",
				int(domain.StepCreatePipelineFailed), flow.ActionPollPipeline, id); err != nil {
				t.Fatal(err)
			}
		}

		pipelineFailed("rp-1", "alice")
		r := w.do(req{method: "POST", path: "/ops/requests/rp-1/retrigger", user: "olivia"})
		r.want(t, 202, "ACCEPTED")
		if r.data["action"] != flow.ActionPollPipeline || len(gl.retried) != 1 || gl.retried[0] != 41 {
			t.Fatalf("data %v, retried %v", r.data, gl.retried)
		}
		op, _ := st.OperationGet(ctx, "rp-1")
		if domain.StepStatus(op.Step) != domain.StepCreatePipelineRunning || op.DueAt.IsZero() {
			t.Fatalf("after the re-run: %s due %v", domain.StepStatus(op.Step), op.DueAt)
		}

		gl.refuse = &gitlab.Error{Op: "RetryPipeline", Status: 403, Message: "403 Forbidden"}
		pipelineFailed("rp-2", "bob")
		r = w.do(req{method: "POST", path: "/ops/requests/rp-2/retrigger", user: "olivia"})
		r.wantRefused(t, 409, "REQUEST_IN_PROGRESS", domain.ReasonPipelineNotRetried)
		if !strings.Contains(r.env.Message, "could not be re-run") {
			t.Fatalf("message %q", r.env.Message)
		}
		if op, _ := st.OperationGet(ctx, "rp-2"); domain.StepStatus(op.Step) != domain.StepCreatePipelineFailed || !op.DueAt.IsZero() {
			t.Fatalf("a refused re-run moved the request: %s", domain.StepStatus(op.Step))
		}

		// GitLab's rate limit is "later", not a refusal: 503 with the wait
		// in words, and the request stays where it stopped.
		gl.refuse = &gitlab.Error{Op: "RetryPipeline", Status: 429, Message: "429 Too Many Requests", RetryAfter: 40 * time.Second}
		pipelineFailed("rp-3", "carol")
		r = w.do(req{method: "POST", path: "/ops/requests/rp-3/retrigger", user: "olivia"})
		r.want(t, 503, "RETRY_LATER")
		if !strings.Contains(r.env.Message, "rate limit") || !strings.Contains(r.env.Message, "40 seconds") {
			t.Fatalf("message %q", r.env.Message)
		}
		if op, _ := st.OperationGet(ctx, "rp-3"); domain.StepStatus(op.Step) != domain.StepCreatePipelineFailed || !op.DueAt.IsZero() {
			t.Fatalf("a rate-limited re-run moved the request: %s", domain.StepStatus(op.Step))
		}
	})
}
