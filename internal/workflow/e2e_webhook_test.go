package workflow_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// TestWebhookSpeedsUpPolling: with the pipeline poll an hour away, the
// GitLab pipeline webhook (through the real /callbacks/gitlab endpoint)
// makes the waiting poll due now, so the request moves on long before
// the poll would have.
func TestWebhookSpeedsUpPolling(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st, withConfig(map[string]any{
			"polling.pipeline.shortInterval": "1h", "polling.pipeline.longInterval": "1h", "polling.pipeline.timeout": "10h",
		}))
		w.simJSON(http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"outcome": "pass", "delay": "300ms", "count": 1}, nil)
		w.submit("op-hook", "xia", tSingle, false)
		o, _ := w.until("op-hook", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		require.NotZero(t, o.MRIID)
		hist, err := st.OperationStepList(t.Context(), "op-hook")
		require.NoError(t, err)
		waited := false
		for _, h := range hist {
			waited = waited || domain.StepStatus(h.ToStep) == domain.StepCreatePipelineRunning
		}
		require.True(t, waited, "the first poll found the pipeline running and waited an hour")
	})
}
