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
		// The pipeline stays running until the test says otherwise, so the
		// first poll is sure to find it running and wait an hour, however
		// slowly the machine runs (a timed pass raced the first poll).
		w.simJSON(http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"outcome": "never", "count": 1}, nil)
		w.submit("op-hook", "xia", tSingle, false)
		running, _ := w.until("op-hook", "first poll waiting", at(domain.StepCreatePipelineRunning, ""))
		require.NotZero(t, running.MRIID)
		// Passing the pipeline sends the Pipeline Hook; only the webhook can
		// make the hour-long wait due now.
		w.simJSON(http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"mr_iid": running.MRIID, "outcome": "pass"}, nil)
		o, _ := w.until("op-hook", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		require.Equal(t, running.MRIID, o.MRIID)
	})
}
