package workflow_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/flow"
	"changeflow/internal/workflow/single"
)

// TestRetriggerResumesWhereItStopped: a request stopped on a pending
// pipeline and one stopped on a forbidden approval each resume from
// where they stopped once the cause is gone, and finish; a request that
// is not stopped is refused.
func TestRetriggerResumesWhereItStopped(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		var ov map[string]any
		w := newWorld(t, st, withConfig(map[string]any{"polling.pipeline.shortAttempts": 2, "polling.pipeline.timeout": "100ms"}),
			func(s *worldSetup) { ov = s.ov })
		ctx := t.Context()

		// A pipeline that never finished: pending, KEEP_WAITING.
		w.simJSON(http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"outcome": "never", "count": 1}, nil)
		w.submit("op-rt", "uma", tSingle, false)
		o, _ := w.until("op-rt", "pipeline pending", at(domain.StepCreatePipelinePending, domain.BindingMRCreating))
		w.simJSON(http.MethodPost, "/gitlab/_control/pipelines",
			map[string]any{"mr_iid": o.MRIID, "outcome": "pass"}, nil)
		_, err := single.Retrigger(ctx, st, "op-rt", "ops")
		require.NoError(t, err, "a pending step may be retriggered")
		_, err = single.Retrigger(ctx, st, "op-rt", "ops")
		require.ErrorIs(t, err, single.ErrNotStopped, "twice in a row: the first made it due")
		w.until("op-rt", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))

		// A bot without approve permission: forbidden, CONTACT_MAINTAINERS.
		ov["gitlab.tokens.approver1"] = "local-observer-token"
		w.load(ov)
		w.decide("op-rt", "approve")
		o, b := w.until("op-rt", "forbidden", at(domain.StepHandleApproveForbidden, domain.BindingHandleFailed))
		require.Equal(t, domain.HintContactMaintainers, hint(o, b))
		ov["gitlab.tokens.approver1"] = "local-approver-1-token"
		w.load(ov)
		action, err := single.Retrigger(ctx, st, "op-rt", "ops")
		require.NoError(t, err)
		require.Equal(t, flow.ActionApprove, action)
		w.until("op-rt", "validated", at(domain.StepCalledBack, domain.BindingValidated))
		require.ElementsMatch(t, []string{"approver-1", "approver-2"}, approvedBy(w, strconv.FormatInt(o.MRIID, 10)))

		_, err = single.Retrigger(ctx, st, "op-rt", "ops")
		require.ErrorIs(t, err, single.ErrNotStopped, "a finished request")
		_, err = single.Retrigger(ctx, st, "op-none", "ops")
		require.ErrorIs(t, err, domain.ErrNotFound)
	})
}

// TestRetriggerAfterOperatorFix: the runbook's fixes — a repaired binding
// file, then a rebase conflict the operator resolved by merging by hand —
// each followed by a retrigger that finishes the request. Regeneration is
// off (workflow.maxRegenerations 0), so the conflict stops at poll_rebase
// and its retrigger resumes at merge; the regenerate path's retrigger is
// in e2e_regenerate_test.go.
func TestRetriggerAfterOperatorFix(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st, withConfig(map[string]any{"workflow.maxRegenerations": 0}))
		ctx := t.Context()
		file := func(action, content string) {
			code := w.simJSON(http.MethodPost, "/gitlab/api/v4/projects/1/repository/commits", map[string]any{
				"branch": "main", "commit_message": "hand edit",
				"actions": []map[string]any{{"action": action, "file_path": "bindings/" + tOther + ".yaml", "content": content}},
			}, nil)
			require.Equal(t, http.StatusCreated, code)
		}
		file("create", "- subject: a\n- subject: a\n")
		w.submit("op-fix", "zed", tOther, false)
		w.until("op-fix", "create failed", at(domain.StepCreateFailed, domain.BindingCreateFailed))
		file("update", "[]\n")
		action, err := single.Retrigger(ctx, st, "op-fix", "ops")
		require.NoError(t, err)
		require.Equal(t, flow.ActionCreateMR, action)
		o, _ := w.until("op-fix", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))

		iid := strconv.FormatInt(o.MRIID, 10)
		w.simJSON(http.MethodPost, "/gitlab/_control/projects/1/merge_requests/"+iid+"/conflict", map[string]any{}, nil)
		w.decide("op-fix", "approve")
		w.until("op-fix", "rebase conflict", at(domain.StepHandleRebaseConflict, domain.BindingHandleFailed))
		// The operator puts the target's file back as the MR expects it.
		file("update", "[]\n")
		action, err = single.Retrigger(ctx, st, "op-fix", "ops")
		require.NoError(t, err)
		require.Equal(t, flow.ActionMerge, action, "a stopped rebase poll resumes at merge")
		w.until("op-fix", "merged", mergedOrLater)
		require.Contains(t, w.fileOnMain(tOther), `subject: "zed"`)
	})
}
