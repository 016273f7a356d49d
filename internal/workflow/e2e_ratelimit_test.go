package workflow_test

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// TestGitLabLimitsAreWaitsNotFailures (docs/workflow.md, "GitLab's
// limits"): with the simulator's API rate low enough that the committer
// meets 429s and a pipeline rate of 2 per window, so pushes and rebases
// land without their pipeline, four single requests (three on one file,
// so they rebase behind each other) all reach VALIDATED: every 429 was
// waited out, every missing pipeline created by changeflow, nobody paged,
// no security event, and the binding files on main are exact.
func TestGitLabLimitsAreWaitsNotFailures(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		var mu sync.Mutex
		security := 0
		w := newWorld(t, st,
			withConfig(map[string]any{"gitlab.rateLimit.missedPipelineAfter": "200ms"}),
			func(s *worldSetup) {
				s.deps = func(d *flowDeps) {
					observe(d).security = func(context.Context, string) { mu.Lock(); security++; mu.Unlock() }
				}
			})
		require.Equal(t, http.StatusOK, w.simJSON(http.MethodPut, "/gitlab/_control/settings",
			map[string]any{"api_rate_per_minute": 25, "pipeline_rate_per_minute": 2, "rate_window": "1s"}, nil))
		ids := []string{"op-rl-a", "op-rl-b", "op-rl-c", "op-rl-d"}
		targets := []string{tSingle, tSingle, tSingle, tOther}
		for i, id := range ids {
			w.submit(id, []string{"amy", "ben", "cleo", "dan"}[i], targets[i], false)
		}
		for _, id := range ids {
			w.until(id, "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		}
		for _, id := range ids {
			w.decide(id, "approve")
		}
		for _, id := range ids {
			w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
		}
		// Limits off before the checks read main as the maintainer.
		require.Equal(t, http.StatusOK, w.simJSON(http.MethodPut, "/gitlab/_control/settings",
			map[string]any{"api_rate_per_minute": 0, "pipeline_rate_per_minute": 0}, nil))
		w.filesExact(ids...)
		w.neverPaged(ids...)
		for _, id := range ids {
			hist, err := st.OperationStepList(t.Context(), id)
			require.NoError(t, err)
			for _, h := range hist {
				require.Equal(t, domain.HintNone, domain.HintFor(domain.StepStatus(h.ToStep), domain.BindingStatus(h.ToBinding)),
					"%s stopped for a person in %s: %s", id, domain.StepStatus(h.ToStep), h.Note)
			}
		}
		w.mu.Lock()
		limited, created := w.limited, w.created
		w.mu.Unlock()
		t.Logf("429s waited out: %d; pipelines changeflow created: %d", limited, created)
		require.Positive(t, limited, "the API rate was never met: the test proves nothing about 429s")
		require.Positive(t, created, "no pipeline was ever missed: the test proves nothing about the pipeline rate")
		mu.Lock()
		defer mu.Unlock()
		require.Zero(t, security, "a limit raised a security event")
	})
}
