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

// limitedRun drives four single requests (three on one file, so they
// rebase behind each other) through the simulator with its limits at 25
// API calls per user and 2 pipelines per project per 1 s window, and
// changeflow configured with cfg, to VALIDATED: nobody paged, no hint for
// a person, no security event, the binding files on main exact. It
// returns the 429s the adapter was answered and the pipelines it created.
func limitedRun(t *testing.T, st *store.Store, cfg map[string]any) (limited, created int) {
	t.Helper()
	var mu sync.Mutex
	security := 0
	w := newWorld(t, st, withConfig(cfg), func(s *worldSetup) {
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
	mu.Lock()
	require.Zero(t, security, "a limit raised a security event")
	mu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	t.Logf("429s waited out: %d; pipelines changeflow created: %d", w.limited, w.created)
	return w.limited, w.created
}

// TestGitLabLimitsAreWaitsNotFailures (docs/workflow.md, "GitLab's
// limits"): unpaced, changeflow meets the simulator's 429s and its
// dropped pipelines, and still every request reaches VALIDATED — each
// 429 waited out, each missing pipeline created.
func TestGitLabLimitsAreWaitsNotFailures(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		limited, created := limitedRun(t, st, map[string]any{"gitlab.rateLimit.missedPipelineAfter": "200ms"})
		require.Positive(t, limited, "the API rate was never met: the test proves nothing about 429s")
		require.Positive(t, created, "no pipeline was ever missed: the test proves nothing about the pipeline rate")
	})
}

// TestPacedBelowGitLabsLimitsMeetsNone: paced at 20 calls and one
// pipeline start a second (gitlab.rateLimit.*), under the simulator's 25
// and 2 per second, changeflow is never answered 429 and no pipeline is
// dropped — the same four requests still reach VALIDATED.
func TestPacedBelowGitLabsLimitsMeetsNone(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		limited, created := limitedRun(t, st, map[string]any{
			"gitlab.rateLimit.apiPerMinute": 1200, "gitlab.rateLimit.pipelinesPerMinute": 60,
			"gitlab.rateLimit.missedPipelineAfter": "200ms",
		})
		require.Zero(t, limited, "paced under the API rate, GitLab still answered 429")
		require.Zero(t, created, "paced under the pipeline rate, a pipeline was still dropped")
	})
}
