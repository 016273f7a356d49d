package workflow_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/single"
)

// TestRetriggerReRunsTheFailedPipeline: a request's check pipeline failed
// (a flaky job); the operator's re-trigger re-runs that pipeline with
// GitLab's retry — the same pipeline runs again and passes — instead of
// polling the failed one again, and the request goes on to take effect;
// a pipeline with nothing to retry is refused by GitLab; main matches the
// database.
func TestRetriggerReRunsTheFailedPipeline(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st)
		code := w.simJSON(http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"outcome": "fail", "count": 1}, nil)
		require.Equal(t, http.StatusOK, code)
		w.submit("op-rp", "rp", tSingle, false)
		o, _ := w.until("op-rp", "pipeline failed", at(domain.StepCreatePipelineFailed, domain.BindingCreateFailed))

		pl, ok, err := single.RetryFailedPipeline(t.Context(), w.deps.Env, o)
		require.NoError(t, err)
		require.True(t, ok, "the failed pipeline is re-run")
		require.Contains(t, []string{"pending", "running"}, pl.Status)
		_, err = single.Retrigger(t.Context(), st, "op-rp", "olivia")
		require.NoError(t, err)
		w.until("op-rp", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		var pls []map[string]any
		w.simJSON(http.MethodGet, fmt.Sprintf("/gitlab/api/v4/projects/1/merge_requests/%d/pipelines", o.MRIID), nil, &pls)
		require.Len(t, pls, 1, "the same pipeline ran again, no second one")
		require.Equal(t, pl.ID, int64(pls[0]["id"].(float64)))
		require.Equal(t, "success", pls[0]["status"])
		w.decide("op-rp", "approve")
		w.until("op-rp", "validated", at(domain.StepCalledBack, domain.BindingValidated))

		// A pipeline that passed has nothing to retry: GitLab refuses.
		code = w.simJSON(http.MethodPost, fmt.Sprintf("/gitlab/api/v4/projects/1/pipelines/%d/retry", pl.ID), nil, nil)
		require.Equal(t, http.StatusForbidden, code)
		w.filesExact("op-rp")
	})
}
