package single

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/gitlab"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flow"
	"changeflow/internal/workflow/flowtest"
)

// TestPollPipelineRecoversAMissedPipeline: an MR head GitLab created no
// pipeline for (its pipeline rate) gets one from changeflow once the poll
// has waited gitlab.rateLimit.missedPipelineAfter — not before, never
// when a pipeline exists — and a 429 on that creation is a wait.
func TestPollPipelineRecoversAMissedPipeline(t *testing.T) {
	// Polls 1 s apart: the 3rd poll has waited 2 s, the 4th 3 s.
	snap := flowtest.Config(t, flowtest.Targets(nil), map[string]any{
		"polling.pipeline.shortInterval": "1s", "polling.pipeline.shortAttempts": 100,
		"gitlab.rateLimit.missedPipelineAfter": "3s",
	})
	op := store.Operation{OperationID: "p", ProjectID: 1, MRIID: 4, Flow: flow.FlowLegacy}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	headless := gitlab.MR{IID: 4, SHA: "abc123", State: gitlab.MRStateOpened}
	running := headless
	running.HeadPipeline = &gitlab.Pipeline{ID: 9, Status: "running", SHA: "abc123"}
	rateLimited := &gitlab.Error{Op: "CreateMRPipeline", Status: http.StatusTooManyRequests, RetryAfter: 20 * time.Second}
	for _, c := range []struct {
		name    string
		mr      gitlab.MR
		attempt int
		gl      flowtest.GitLab
		kind    engine.OutcomeKind
		calls   []string
		at      time.Duration // WaitUntil's offset from now
		delay   time.Duration // a retry's delay
	}{
		{name: "too early: poll again", mr: headless, attempt: 3, kind: engine.OutcomeWait, at: time.Second,
			calls: []string{"GetMR 1 !4"}},
		{name: "waited long enough: create it", mr: headless, attempt: 4, gl: flowtest.GitLab{Created: gitlab.Pipeline{ID: 11}},
			kind: engine.OutcomeWait, at: time.Second, calls: []string{"GetMR 1 !4", "CreateMRPipeline 1 !4"}},
		{name: "a pipeline exists: never created", mr: running, attempt: 40, kind: engine.OutcomeWait, at: time.Second,
			calls: []string{"GetMR 1 !4"}},
		{name: "429 on the creation: a wait, unattempted", mr: headless, attempt: 5, gl: flowtest.GitLab{CreateErr: rateLimited},
			kind: engine.OutcomeRetry, delay: 20 * time.Second, calls: []string{"GetMR 1 !4", "CreateMRPipeline 1 !4"}},
		{name: "refused for good: poll on", mr: headless, attempt: 5, gl: flowtest.GitLab{CreateErr: flowtest.GitLabError(http.StatusForbidden)},
			kind: engine.OutcomeWait, at: time.Second, calls: []string{"GetMR 1 !4", "CreateMRPipeline 1 !4"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			gl := c.gl
			gl.MR = c.mr
			d := Steps{Env: flow.Env{GitLab: &gl, Config: snap}}
			out, err := d.PollPipeline(t.Context(), engine.Work{Operation: op, Action: flow.ActionPollPipeline, Attempt: c.attempt, Now: now})
			require.NoError(t, err)
			require.Equal(t, c.kind, out.Kind(), out.Reason())
			require.Equal(t, c.calls, gl.Calls)
			if len(c.calls) == 2 && c.gl.CreateErr == nil {
				require.Equal(t, domain.StepCreatePipelineRunning, out.Transition().Step)
				require.Contains(t, out.Transition().Note, "created pipeline 11")
			}
			if c.kind == engine.OutcomeRetry {
				require.Equal(t, c.delay, out.Delay())
				require.True(t, out.IsUnattempted(), "a 429 must not spend the retry budget")
			}
			if c.kind == engine.OutcomeWait {
				require.Equal(t, now.Add(c.at), out.At())
			}
		})
	}
}

// TestMergeWaitsForAMissedPipeline: merge on a head GitLab wants a passed
// pipeline for but created none for (ci_must_pass, no head pipeline) does
// not ask GitLab to merge — that would be refused and lead to rebases
// that change nothing — but waits, and creates the pipeline once
// gitlab.rateLimit.missedPipelineAfter has passed.
func TestMergeWaitsForAMissedPipeline(t *testing.T) {
	snap := flowtest.Config(t, flowtest.Targets(nil), map[string]any{
		"polling.rebase.shortInterval": "1s", "polling.rebase.shortAttempts": 100,
		"gitlab.rateLimit.missedPipelineAfter": "3s",
	})
	op := store.Operation{OperationID: "m", ProjectID: 1, MRIID: 5, Flow: flow.FlowLegacy, Step: int(domain.StepHandleApproved)}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	mr := gitlab.MR{IID: 5, SHA: "def456", State: gitlab.MRStateOpened, DetailedMergeStatus: "ci_must_pass"}
	for _, c := range []struct {
		name    string
		attempt int
		calls   []string
	}{
		{name: "too early: look again", attempt: 2, calls: []string{"GetMR 1 !5"}},
		{name: "waited long enough: create it", attempt: 4, calls: []string{"GetMR 1 !5", "CreateMRPipeline 1 !5"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			gl := flowtest.GitLab{MR: mr, Created: gitlab.Pipeline{ID: 12}}
			d := Steps{Env: flow.Env{GitLab: &gl, Config: snap}}
			out, err := d.Merge(t.Context(), engine.Work{Operation: op, Action: flow.ActionMerge, Attempt: c.attempt, Now: now})
			require.NoError(t, err)
			require.Equal(t, engine.OutcomeWait, out.Kind(), out.Reason())
			require.Equal(t, now.Add(time.Second), out.At())
			require.Equal(t, c.calls, gl.Calls)
		})
	}
}
