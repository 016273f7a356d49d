package workflow_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// hint is what the status endpoint would show for the row.
func hint(o store.Operation, b store.Binding) domain.Hint {
	return domain.HintFor(domain.StepStatus(o.Step), b.Status)
}

// TestCheckPipelineFailedIsContactMaintainers: a failed check pipeline is
// deterministic — CREATE_PIPELINE_FAILED, CREATE_FAILED, no approval sent.
func TestCheckPipelineFailedIsContactMaintainers(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st)
		w.simJSON(http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"outcome": "fail", "count": 1}, nil)
		w.submit("op-pf", "carol", tSingle, false)
		o, b := w.until("op-pf", "pipeline failed", at(domain.StepCreatePipelineFailed, domain.BindingCreateFailed))
		require.Equal(t, domain.HintContactMaintainers, hint(o, b))
		require.True(t, o.DueAt.IsZero(), "stopped, not due")
		require.Equal(t, "poll_pipeline", o.NextAction, "remembers where it stopped, for a retrigger")
		require.Empty(t, w.approvalsOf("op-pf"), "no approval for a change that failed its checks")
	})
}

// TestCheckPipelineNeverFinishingTimesOut: a pipeline that never finishes
// is polled in tiers until polling.pipeline.timeout, then
// CREATE_PIPELINE_PENDING with the binding untouched: KEEP_WAITING.
func TestCheckPipelineNeverFinishingTimesOut(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st, withConfig(map[string]any{"polling.pipeline.shortAttempts": 2, "polling.pipeline.timeout": "100ms"}))
		w.simJSON(http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"outcome": "never", "count": 1}, nil)
		w.submit("op-pt", "dave", tSingle, false)
		o, b := w.until("op-pt", "pipeline pending", at(domain.StepCreatePipelinePending, domain.BindingMRCreating))
		require.Equal(t, domain.HintKeepWaiting, hint(o, b))
		require.True(t, o.DueAt.IsZero())
		hist, err := st.OperationStepList(t.Context(), "op-pt")
		require.NoError(t, err)
		var running bool
		for _, h := range hist {
			running = running || domain.StepStatus(h.ToStep) == domain.StepCreatePipelineRunning
		}
		require.True(t, running, "the poll showed CREATE_PIPELINE_RUNNING before it timed out")
	})
}

// TestLostCreateAnswersMakeOneMR: GitLab applies the commit and the MR
// creation but the answers are lost (connection closed): the next runs
// look up the branch, the file and the MR first — exactly one MR.
func TestLostCreateAnswersMakeOneMR(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st)
		w.simJSON(http.MethodPost, "/gitlab/_control/faults",
			map[string]any{"method": "POST", "path": "/projects/*/repository/commits", "kind": "drop"}, nil)
		w.simJSON(http.MethodPost, "/gitlab/_control/faults",
			map[string]any{"method": "POST", "path": "/projects/*/merge_requests", "kind": "drop"}, nil)
		w.submit("op-lost", "erin", tSingle, false)
		o, _ := w.until("op-lost", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		mrs := w.mrsOf("op-lost")
		require.Len(t, mrs, 1, "exactly one MR despite the lost answers")
		require.EqualValues(t, o.MRIID, mrs[0]["iid"])
		var state struct {
			Projects []struct {
				MergeRequests []json.RawMessage `json:"merge_requests"`
			} `json:"projects"`
		}
		w.simJSON(http.MethodGet, "/gitlab/_control/state", nil, &state)
		require.Len(t, state.Projects[0].MergeRequests, 1, "no second MR anywhere")
	})
}

// TestRebaseConflict: the target branch moved under the MR in a way that
// conflicts; the merge is refused, the rebase fails, and with
// regeneration switched off (workflow.maxRegenerations 0: the bound is
// exhausted from the start) — HANDLE_REBASE_CONFLICT, HANDLE_FAILED,
// CONTACT_MAINTAINERS. Regeneration itself: e2e_regenerate_test.go.
func TestRebaseConflict(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st, withConfig(map[string]any{"workflow.maxRegenerations": 0}))
		w.submit("op-rc", "frank", tSingle, false)
		o, _ := w.until("op-rc", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		code := w.simJSON(http.MethodPost, "/gitlab/_control/projects/1/merge_requests/"+strconv.FormatInt(o.MRIID, 10)+"/conflict", map[string]any{}, nil)
		require.Equal(t, http.StatusOK, code)
		w.decide("op-rc", "approve")
		o, b := w.until("op-rc", "rebase conflict", at(domain.StepHandleRebaseConflict, domain.BindingHandleFailed))
		require.Equal(t, domain.HintContactMaintainers, hint(o, b))
		require.Equal(t, "opened", w.mrsOf("op-rc")[0]["state"])
	})
}

// TestMergeFailureRebasesAndRetries: a merge refused once (422) is
// rebased and merged on the next try.
func TestMergeFailureRebasesAndRetries(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st)
		w.submit("op-mf", "gina", tSingle, false)
		w.until("op-mf", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		w.simJSON(http.MethodPost, "/gitlab/_control/merge_failures", map[string]any{"count": 1, "message": "pre-receive hook declined"}, nil)
		w.decide("op-mf", "approve")
		w.until("op-mf", "validated", at(domain.StepCalledBack, domain.BindingValidated))
		hist, err := st.OperationStepList(t.Context(), "op-mf")
		require.NoError(t, err)
		var rebased bool
		for _, h := range hist {
			rebased = rebased || domain.StepStatus(h.ToStep) == domain.StepHandleRebasing
		}
		require.True(t, rebased)
		w.validatedOnce("op-mf")
	})
}

// postCallback posts an approval callback to the real endpoint and
// returns the answer's code.
func (w *world) postCallback(path string, body map[string]any) string {
	w.t.Helper()
	raw, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(w.t.Context(), http.MethodPost, w.cbTS.URL+path, bytes.NewReader(raw))
	require.NoError(w.t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Callback-Token", e2eToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(w.t, err)
	defer resp.Body.Close()
	require.Less(w.t, resp.StatusCode, 300, "callbacks are always answered 2xx")
	var env struct {
		Code string `json:"code"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&env)
	return env.Code
}

// TestUnparsableBindingFileStops: a hand-edited binding file that is not
// a valid list is not rewritten: CREATE_FAILED, and no branch or MR.
func TestUnparsableBindingFileStops(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st)
		code := w.simJSON(http.MethodPost, "/gitlab/api/v4/projects/1/repository/commits", map[string]any{
			"branch": "main", "commit_message": "hand edit",
			"actions": []map[string]any{{"action": "create", "file_path": "bindings/" + tOther + ".yaml",
				"content": "- subject: a\n  expiresAt: \"2031-01-01T00:00:00Z\"\n- subject: a\n  expiresAt: \"2031-01-01T00:00:00Z\"\n"}},
		}, nil)
		require.Equal(t, http.StatusCreated, code)
		w.submit("op-badfile", "yan", tOther, false)
		o, b := w.until("op-badfile", "create failed", at(domain.StepCreateFailed, domain.BindingCreateFailed))
		require.Contains(t, o.LastError, "appears twice")
		require.Equal(t, domain.HintKeepWaiting, hint(o, b))
		require.Empty(t, w.mrsOf("op-badfile"))
	})
}
