package workflow_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// TestLostApproveAndMergeAnswers: GitLab applies an approval and the
// merge but the answers are lost. Reading before writing (approvals
// before every attempt, the MR before the merge is tried again) turns
// both into success — no false "approval failed", no second merge.
func TestLostApproveAndMergeAnswers(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st)
		w.submit("op-la", "liam", tSingle, false)
		w.until("op-la", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		w.simJSON(http.MethodPost, "/gitlab/_control/faults",
			map[string]any{"method": "POST", "path": "/projects/*/merge_requests/*/approve", "kind": "drop", "count": 2}, nil)
		w.simJSON(http.MethodPost, "/gitlab/_control/faults",
			map[string]any{"method": "PUT", "path": "/projects/*/merge_requests/*/merge", "kind": "drop"}, nil)
		w.decide("op-la", "approve")
		w.until("op-la", "validated", at(domain.StepCalledBack, domain.BindingValidated))
		hist, err := st.OperationStepList(t.Context(), "op-la")
		require.NoError(t, err)
		for _, h := range hist {
			require.NotEqual(t, domain.StepHandleApproveFailed, domain.StepStatus(h.ToStep), h.Note)
		}
		w.validatedOnce("op-la")
	})
}

// TestMergedOutsideFinishesAsMerged: an MR merged by someone else before
// the bots approve is finished as merged, without approving.
func TestMergedOutsideFinishesAsMerged(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st)
		w.submit("op-mo", "mia", tSingle, false)
		o, _ := w.until("op-mo", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		w.simJSON(http.MethodPost, "/gitlab/_control/projects/1/merge_requests/"+strconv.FormatInt(o.MRIID, 10)+"/merge", map[string]any{}, nil)
		w.decide("op-mo", "approve")
		w.until("op-mo", "validated", at(domain.StepCalledBack, domain.BindingValidated))
		var ap struct {
			ApprovedBy []any `json:"approved_by"`
		}
		w.simJSON(http.MethodGet, "/gitlab/api/v4/projects/1/merge_requests/"+strconv.FormatInt(o.MRIID, 10)+"/approvals", nil, &ap)
		require.Empty(t, ap.ApprovedBy, "a merged MR is not approved again")
	})
}

// TestDeployCallbacksFlipOnce: duplicate and repeated deploy callbacks for
// the MR flip the binding once and emit the success side effect once; a
// callback for an unknown MR is stale.
func TestDeployCallbacksFlipOnce(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st)
		w.simJSON(http.MethodPost, "/deploy/_control/faults", map[string]any{"duplicateNext": 1}, nil)
		w.submit("op-dc", "noah", tSingle, false)
		w.until("op-dc", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		w.decide("op-dc", "approve")
		o, _ := w.until("op-dc", "validated", at(domain.StepCalledBack, domain.BindingValidated))
		body := map[string]any{"requestId": "dep-x", "project": 1, "mrIid": o.MRIID, "status": "SUCCESS"}
		require.Equal(t, "IGNORED_STALE", w.postCallback("/callbacks/deploy", body))
		require.Equal(t, "DUPLICATE", w.postCallback("/callbacks/deploy", body))
		require.Equal(t, "IGNORED_STALE", w.postCallback("/callbacks/deploy",
			map[string]any{"requestId": "dep-y", "project": 1, "mrIid": 999, "status": "SUCCESS"}))
		w.validatedOnce("op-dc")
	})
}

// TestEarlyDeployCallback: the deployment reports before MERGED is
// written (the callback finds MERGING and flips nothing); the merge
// step's after-commit check of the inbox validates it, once.
func TestEarlyDeployCallback(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st)
		w.submit("op-ed", "olga", tSingle, false)
		o, _ := w.until("op-ed", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		// Recorded ahead of time, as if the deployment had been faster
		// than the merge step's own write.
		_, err := st.DeployCallbackInsert(t.Context(), store.DeployCallbackParams{DeliveryKey: "early", ProjectID: 1, MRIID: o.MRIID, Status: "SUCCESS"})
		require.NoError(t, err)
		w.simJSON(http.MethodPost, "/deploy/_control/faults", map[string]any{"dropNext": 1}, nil)
		w.decide("op-ed", "approve")
		w.until("op-ed", "validated", at(domain.StepCalledBack, domain.BindingValidated))
		w.validatedOnce("op-ed")
	})
}

// TestStepOrderSwitchMidFlight: workflow.approveFirst is switched on while
// a legacy approval is pending; its callback carries ext.mrId, so it
// finishes on the legacy flow, and a request submitted after
// the switch takes the approve-first flow.
func TestStepOrderSwitchMidFlight(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		var ov map[string]any
		w := newWorld(t, st, func(s *worldSetup) { ov = s.ov })
		w.submit("op-sw-old", "pia", tSingle, false)
		w.until("op-sw-old", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		ov["workflow.approveFirst"] = true
		w.load(ov)
		// Another file: two single-request MRs adding adjacent entries to
		// one file conflict textually, and the second would be regenerated
		// (docs/flows/single.md, "Rebase conflicts: regenerate") — not what
		// this test is about.
		w.submit("op-sw-new", "quinn", tOther, w.Current().Workflow().ApproveFirst)
		w.until("op-sw-new", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		w.decide("op-sw-old", "approve")
		w.decide("op-sw-new", "approve")
		w.until("op-sw-old", "validated", at(domain.StepCalledBack, domain.BindingValidated))
		w.until("op-sw-new", "validated", at(domain.StepCalledBack, domain.BindingValidated))
		require.NotEmpty(t, w.approvalsOf("op-sw-old")[0].Ext.MRID)
		require.Empty(t, w.approvalsOf("op-sw-new")[0].Ext.MRID)
	})
}

// TestCheckItemsChangeSelfHeals: with approval.checkItems.enabled the
// direct-HTTP approver sends the project's check items (read once, cached
// per project); when GitLab's list changes between two requests, the
// first approve of the second request answers 422 with the current list,
// and the approver rebuilds and retries exactly once.
func TestCheckItemsChangeSelfHeals(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st, withConfig(map[string]any{"approval.checkItems.enabled": true}))
		items := func(version int) {
			code := w.simJSON(http.MethodPut, "/gitlab/_control/projects/1/check_items",
				map[string]any{"check_items": []map[string]any{{"key": "security", "version": version, "title": "Security review"}}}, nil)
			require.Equal(t, http.StatusOK, code)
		}
		w.simJSON(http.MethodPut, "/gitlab/_control/settings", map[string]any{"require_check_items": true}, nil)
		items(1)
		w.submit("op-ci-1", "rae", tSingle, false)
		w.until("op-ci-1", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		w.decide("op-ci-1", "approve")
		w.until("op-ci-1", "merged", mergedOrLater)
		require.Equal(t, 2, w.approveCalls(), "one approve per bot with the cached list")

		items(2)
		w.submit("op-ci-2", "sam", tOther, false)
		w.until("op-ci-2", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		w.decide("op-ci-2", "approve")
		w.until("op-ci-2", "merged", mergedOrLater)
		require.Equal(t, 2+3, w.approveCalls(), "the stale list costs exactly one retry")
	})
}

// mergedOrLater: MERGED, or already VALIDATED by a fast deploy callback.
func mergedOrLater(_ store.Operation, b store.Binding) bool {
	return b.Status == domain.BindingMerged || b.Status == domain.BindingValidated
}
