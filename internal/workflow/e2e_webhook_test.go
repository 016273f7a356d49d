package workflow_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/gitlab"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/callbacks"
)

// TestWebhookSpeedsUpPolling: with the pipeline poll an hour away, the
// GitLab pipeline webhook (through the real /callbacks/gitlab endpoint)
// makes the waiting poll due now, so the request moves on long before
// the poll would have.
func TestWebhookSpeedsUpPolling(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
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

// TestWebhookDuringARunningPollIsNotLost: the webhook "pipeline passed"
// arrives while the poll that read "running" a moment before is still
// running (it would write "wait an hour"). The webhook may not pre-empt
// the running step, but it is not lost either: the poll's next run is due
// at once and finds the pipeline passed. Before, the request waited the
// whole tier — how TestWebhookSpeedsUpPolling failed under load, when a
// late webhook of the MR's opening had started that second poll.
func TestWebhookDuringARunningPollIsNotLost(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		g := &heldPoll{held: make(chan struct{}), release: make(chan struct{})}
		// The simulator sends no webhooks of its own: its webhook of the
		// MR's opening, delivered late, made the poll due just before this
		// test's first webhook, which then rightly changed nothing
		// (WorkExpedite) — twice in CI, also after waiting for the poll
		// to wait an hour.
		w := newWorld(t, st, withGitLab(g.wrap), withoutGitLabWebhooks(), withConfig(map[string]any{
			"polling.pipeline.shortInterval": "1h", "polling.pipeline.longInterval": "1h", "polling.pipeline.timeout": "10h",
		}))
		w.simJSON(http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"outcome": "never", "count": 1}, nil)
		w.submit("op-held", "yara", tSingle, false)
		// The first poll has written its step and waits an hour.
		running, _ := w.until("op-held", "first poll waiting an hour", func(o store.Operation, _ store.Binding) bool {
			return domain.StepStatus(o.Step) == domain.StepCreatePipelineRunning && o.LeaseOwner == "" &&
				o.DueAt.After(time.Now().Add(30*time.Minute))
		})
		hook := []byte(fmt.Sprintf(`{"object_kind":"pipeline","project":{"id":1},"object_attributes":{"id":1,"status":"running"},"merge_request":{"iid":%d}}`, running.MRIID))

		// A webhook starts the next poll, which reads "running" and is
		// held before it writes its outcome.
		g.armed.Store(true)
		res, err := w.cbs.GitLab(t.Context(), "pipeline", hook)
		require.NoError(t, err)
		require.Equal(t, callbacks.Applied, res)
		select {
		case <-g.held:
		case <-time.After(20 * time.Second):
			t.Fatal("the expedited poll never ran")
		}
		// Now the pipeline passes and its webhook arrives: the poll runs.
		g.passed.Store(true)
		res, err = w.cbs.GitLab(t.Context(), "pipeline", hook)
		require.NoError(t, err)
		require.Equal(t, callbacks.Applied, res, "noted for the running poll")
		o, err := st.OperationGet(t.Context(), "op-held")
		require.NoError(t, err)
		require.NotEmpty(t, o.LeaseOwner, "the running poll was not pre-empted")
		close(g.release)

		o, _ = w.until("op-held", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		require.Equal(t, running.MRIID, o.MRIID)
	})
}

// heldPoll is a GitLab client whose MR read, once armed, returns what it
// read only after the test released it; once passed, it reports the head
// pipeline passed (the simulator's stays running, so it sends no webhook
// of its own).
type heldPoll struct {
	gitlab.GitLab
	armed, passed atomic.Bool
	held, release chan struct{}
}

func (h *heldPoll) wrap(g gitlab.GitLab) gitlab.GitLab {
	h.GitLab = g
	return h
}

func (h *heldPoll) GetMR(ctx context.Context, project string, iid int64) (gitlab.MR, error) {
	mr, err := h.GitLab.GetMR(ctx, project, iid)
	if err == nil && mr.HeadPipeline != nil && h.passed.Load() {
		p := *mr.HeadPipeline
		p.Status = "success"
		mr.HeadPipeline = &p
	}
	if h.armed.CompareAndSwap(true, false) {
		close(h.held)
		select {
		case <-h.release:
		case <-ctx.Done():
		}
	}
	return mr, err
}
