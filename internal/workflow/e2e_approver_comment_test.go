package workflow_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// TestARejectionKeepsTheApproversComment: the approver's comment on a
// rejection and who decided — with approval.verifyDecisions, as the
// approval system's own answer gives them — are kept in the rejection's
// step note, where the request page finds the comment
// (domain.ApproverCommentFrom) and the audit export the approver
// (domain.DeciderFrom); by the callback with read-back and by
// poll_approval when the callback is lost alike. The callback inbox
// keeps the approver the delivery named.
func TestARejectionKeepsTheApproversComment(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st, fastApprovalPoll("10s"))
		for _, c := range []struct {
			op, comment  string
			dropCallback bool
		}{
			{"op-rej-cb", "not for this quarter", false},
			{"op-rej-poll", "ask again \"after\" the audit\nplease", true},
		} {
			w.submit(c.op, "mia", tSingle, true)
			w.until(c.op, "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
			if c.dropCallback {
				w.dropNextApprovalCallback()
			}
			as := w.approvalsOf(c.op)
			require.Len(t, as, 1)
			code := w.simJSON(http.MethodPost, "/approval/_control/approvals/"+as[0].ApprovalID+"/reject", map[string]any{"comment": c.comment, "decidedBy": "jane.doe"}, nil)
			require.Equal(t, http.StatusOK, code)
			w.until(c.op, "rejected", at(domain.StepCloseRejected, domain.BindingRejected))

			hist, err := st.OperationStepList(t.Context(), c.op)
			require.NoError(t, err)
			var got, by string
			var found, named bool
			for _, h := range hist {
				if domain.StepStatus(h.ToStep) == domain.StepCloseRejected {
					got, found = domain.ApproverCommentFrom(h.Note)
					by, named = domain.DeciderFrom(h.Note)
				}
			}
			require.True(t, named, "%s: the rejection's note names who decided: %+v", c.op, hist)
			require.Equal(t, "jane.doe", by, c.op)
			inbox, err := st.ApprovalCallbackList(t.Context(), c.op, 10)
			require.NoError(t, err)
			require.NotEmpty(t, inbox)
			require.Equal(t, "jane.doe", inbox[0].DecidedBy, "%s: the inbox keeps the approver", c.op)
			require.True(t, found, "%s: the rejection's note records the comment: %+v", c.op, hist)
			want := c.comment
			if c.dropCallback {
				want = "ask again \"after\" the audit please" // the newline made a space
			}
			require.Equal(t, want, got, c.op)
		}
	})
}
