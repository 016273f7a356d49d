package workflow_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/gitlab"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/flow"
)

// failingClose fails CloseMR with a 503 while failing is set: GitLab
// failing while a withdrawal closes the MR.
type failingClose struct {
	gitlab.GitLab
	failing *atomic.Bool
	calls   *atomic.Int64
}

func (f failingClose) CloseMR(ctx context.Context, project string, iid int64) (gitlab.MR, error) {
	f.calls.Add(1)
	if f.failing.Load() {
		return gitlab.MR{}, &gitlab.Error{Op: "CloseMR", Status: http.StatusServiceUnavailable, Message: "injected"}
	}
	return f.GitLab.CloseMR(ctx, project, iid)
}

// TestWithdrawWhileGitLabFailsToCloseTheMR: GitLab refuses to close the
// open MR (503): the answer is 202 (pending), the binding is not CLOSED
// yet and not re-appliable, the step already says withdrawn; once GitLab
// answers again the engine's retry closes the MR and the request ends
// CLOSED — the withdrawal is not lost.
func TestWithdrawWhileGitLabFailsToCloseTheMR(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		var failing atomic.Bool
		var calls atomic.Int64
		w := newWorld(t, st, withGitLab(func(g gitlab.GitLab) gitlab.GitLab { return failingClose{g, &failing, &calls} }))
		code := w.simJSON(http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"outcome": "never", "count": 1}, nil)
		require.Equal(t, http.StatusOK, code)
		w.submit("op-wgf", "wgf", tSingle, false)
		w.until("op-wgf", "pipeline running", at(domain.StepCreatePipelineRunning, domain.BindingMRCreating))

		failing.Store(true)
		ans := w.withdraw("op-wgf")
		require.Equal(t, store.WithdrawApplied, ans.Result.Outcome)
		require.True(t, ans.Pending, "closing the MR is being retried")
		require.Equal(t, domain.BindingMRCreating, ans.Binding.Status, "not CLOSED before the MR is")
		require.False(t, ans.Binding.Reappliable())
		require.Equal(t, domain.StepCloseRequesterWithdrawn, domain.StepStatus(ans.Operation.Step))
		require.Contains(t, ans.Operation.LastError, "close MR")
		require.Equal(t, "opened", w.mrsOf("op-wgf")[0]["state"])

		failing.Store(false)
		w.until("op-wgf", "withdrawn once GitLab answers", withdrawnDone)
		require.Equal(t, "closed", w.mrsOf("op-wgf")[0]["state"])
		require.GreaterOrEqual(t, calls.Load(), int64(2))
		require.Equal(t, 1, w.withdrawnCount(store.WithdrawFromMR))
		w.filesExact("op-wgf")
	})
}

// TestWithdrawBeforeTheApprovalWasSubmitted: withdrawn while
// APPROVAL_SENDING, before submit_approval ever ran: the withdraw action
// finds no approval, looks once more after workflow.leaseDuration (a
// submit cut off mid-call could still land), then ends withdrawn; no
// approval is ever submitted, since the withdrawal replaced the due
// submit_approval.
func TestWithdrawBeforeTheApprovalWasSubmitted(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st, withConfig(map[string]any{"workflow.leaseDuration": "1s"}))
		entry := flow.Entry(true)
		_, err := st.OperationSubmit(t.Context(), store.OperationSubmitParams{
			Operation: store.OperationCreateParams{
				OperationID: "op-wbs", Subject: "wbs", TargetKey: tSingle, ProjectID: 1, Flow: entry.Flow,
				Step: int(entry.Step), Reason: "e2e", Days: 7, ExpiresAt: time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC),
				Actor: "wbs", NextAction: entry.Action,
			},
			BindingStatus: entry.Binding,
		})
		require.NoError(t, err)
		ans := w.withdraw("op-wbs") // no Wake: submit_approval never ran
		require.Equal(t, store.WithdrawFromApproval, ans.Result.Place)
		require.Equal(t, domain.BindingClosed, ans.Binding.Status)

		w.until("op-wbs", "withdrawn", withdrawnDone)
		require.Empty(t, w.approvalsOf("op-wbs"), "no approval was ever submitted")
		w.filesExact("op-wbs")
	})
}
