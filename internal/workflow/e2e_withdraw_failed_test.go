package workflow_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// TestWithdrawAFailedRequestAndAskAgain: a request whose check pipeline
// failed waits for an operator; its owner withdraws it instead — its MR
// is closed and the request ends CLOSED at once — and asks again with a
// new request, which takes effect; main holds exactly the new entry.
func TestWithdrawAFailedRequestAndAskAgain(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st)
		code := w.simJSON(http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"outcome": "fail", "count": 1}, nil)
		require.Equal(t, http.StatusOK, code)
		w.submit("op-wf", "wf", tSingle, false)
		o, _ := w.until("op-wf", "pipeline failed", at(domain.StepCreatePipelineFailed, domain.BindingCreateFailed))
		require.NotZero(t, o.MRIID)

		ans := w.withdraw("op-wf")
		require.Equal(t, store.WithdrawApplied, ans.Result.Outcome)
		require.Equal(t, store.WithdrawFromMR, ans.Result.Place)
		require.False(t, ans.Merged)
		require.False(t, ans.Pending, "the MR was closed before the answer")
		require.Equal(t, domain.BindingClosed, ans.Binding.Status)
		require.Equal(t, domain.StepCloseRequesterWithdrawn, domain.StepStatus(ans.Operation.Step))
		mrs := w.mrsOf("op-wf")
		require.Len(t, mrs, 1)
		require.Equal(t, "closed", mrs[0]["state"])
		w.until("op-wf", "withdrawn", withdrawnDone)
		again := w.withdraw("op-wf")
		require.Equal(t, store.WithdrawAlready, again.Result.Outcome, "a repeat answers the state")

		w.legacyValidated("op-wf2", "wf", tSingle)
		require.Contains(t, w.fileOnMain(tSingle), `operationId: "op-wf2"`)
		w.filesExact("op-wf2")
	})
}

// TestWithdrawAFailedRequestWhoseMRWasMergedByHand: merged wins on a
// failed request too — a person merged its MR after the pipeline failed;
// the withdrawal finds it merged and the request follows its merge to
// VALIDATED; main matches the database.
func TestWithdrawAFailedRequestWhoseMRWasMergedByHand(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st)
		code := w.simJSON(http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"outcome": "fail", "count": 1}, nil)
		require.Equal(t, http.StatusOK, code)
		w.submit("op-wfm", "wfm", tSingle, false)
		o, _ := w.until("op-wfm", "pipeline failed", at(domain.StepCreatePipelineFailed, domain.BindingCreateFailed))
		code = w.simJSON(http.MethodPost, fmt.Sprintf("/gitlab/_control/projects/1/merge_requests/%d/merge", o.MRIID), map[string]any{}, nil)
		require.Equal(t, http.StatusOK, code, "merged by hand")

		ans := w.withdraw("op-wfm")
		require.True(t, ans.Merged, "merged wins: %+v", ans)
		w.until("op-wfm", "validated", at(domain.StepCalledBack, domain.BindingValidated))
		w.validatedOnce("op-wfm")
		require.Contains(t, w.fileOnMain(tSingle), `operationId: "op-wfm"`)
		w.filesExact("op-wfm")
	})
}

// TestOperatorClosesAFailedRequest: an operator closes a request whose
// check pipeline failed — its MR closed, CLOSED with CLOSE_CANCELLED and
// the reason in the history, not counted as a requester's withdrawal; a
// repeat changes nothing; a request merged by hand meanwhile follows its
// merge instead (merged wins); main matches the database.
func TestOperatorClosesAFailedRequest(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st)
		code := w.simJSON(http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"outcome": "fail", "count": 2}, nil)
		require.Equal(t, http.StatusOK, code)
		w.submit("op-oc", "oc", tSingle, false)
		w.submit("op-ocm", "ocm", tSingle, false)
		w.until("op-oc", "pipeline failed", at(domain.StepCreatePipelineFailed, domain.BindingCreateFailed))
		o, _ := w.until("op-ocm", "pipeline failed", at(domain.StepCreatePipelineFailed, domain.BindingCreateFailed))

		ans, err := w.withdrawer().Close(t.Context(), "op-oc", "olivia", "broken for good")
		require.NoError(t, err)
		require.Equal(t, store.WithdrawApplied, ans.Result.Outcome)
		require.False(t, ans.Merged)
		require.Equal(t, domain.BindingClosed, ans.Binding.Status)
		require.Equal(t, domain.StepCloseCancelled, domain.StepStatus(ans.Operation.Step))
		mrs := w.mrsOf("op-oc")
		require.Len(t, mrs, 1)
		require.Equal(t, "closed", mrs[0]["state"])
		require.Zero(t, w.withdrawnCount(store.WithdrawFromMR), "an operator's close is no withdrawal")
		hist, err := st.OperationStepList(t.Context(), "op-oc")
		require.NoError(t, err)
		found := false
		for _, h := range hist {
			found = found || domain.StepStatus(h.ToStep) == domain.StepCloseCancelled && h.Actor == "olivia" && strings.Contains(h.Note, "broken for good")
		}
		require.True(t, found, "history: %+v", hist)
		again, err := w.withdrawer().Close(t.Context(), "op-oc", "olivia", "broken for good")
		require.NoError(t, err)
		require.Equal(t, store.WithdrawAlready, again.Result.Outcome)

		code = w.simJSON(http.MethodPost, fmt.Sprintf("/gitlab/_control/projects/1/merge_requests/%d/merge", o.MRIID), map[string]any{}, nil)
		require.Equal(t, http.StatusOK, code, "merged by hand")
		merged, err := w.withdrawer().Close(t.Context(), "op-ocm", "olivia", "x")
		require.NoError(t, err)
		require.True(t, merged.Merged, "merged wins: %+v", merged)
		w.until("op-ocm", "validated", at(domain.StepCalledBack, domain.BindingValidated))
		w.filesExact("op-ocm")
	})
}
