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
// rejection — read from the approval system, never from the callback —
// is kept in the rejection's step note, where the request page finds it
// (domain.ApproverCommentFrom); by the callback with read-back and by
// poll_approval when the callback is lost alike.
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
			code := w.simJSON(http.MethodPost, "/approval/_control/approvals/"+as[0].ApprovalID+"/reject", map[string]any{"comment": c.comment}, nil)
			require.Equal(t, http.StatusOK, code)
			w.until(c.op, "rejected", at(domain.StepCloseRejected, domain.BindingRejected))

			hist, err := st.OperationStepList(t.Context(), c.op)
			require.NoError(t, err)
			var got string
			var found bool
			for _, h := range hist {
				if domain.StepStatus(h.ToStep) == domain.StepCloseRejected {
					got, found = domain.ApproverCommentFrom(h.Note)
				}
			}
			require.True(t, found, "%s: the rejection's note records the comment: %+v", c.op, hist)
			want := c.comment
			if c.dropCallback {
				want = "ask again \"after\" the audit please" // the newline made a space
			}
			require.Equal(t, want, got, c.op)
		}
	})
}
