package httpapi

import (
	"strings"
	"testing"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/flow"
	"changeflow/internal/workflow/lifecycle"
)

// TestOpsClose: POST /ops/requests/{id}/close on SQLite and MariaDB — an
// operator closes a request stopped on a failure (CLOSE_CANCELLED, its
// MR's close due, the reason in the step history, audited); a repeat
// answers the same; a request that is not stopped, one in effect and a
// removal are refused in words; the reason is required; only ops.write.
func TestOpsClose(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st, withWithdraw())
		ctx := t.Context()
		path := func(id string) string { return "/ops/requests/" + id + "/close" }
		stoppedFixture(t, st, "cl-failed", "alice")

		t.Run("403 without ops.write, 400 without a reason, 404 unknown", func(t *testing.T) {
			w.do(req{method: "POST", path: path("cl-failed"), user: "alice", body: `{"reason":"x"}`}).want(t, 403, "ACCESS_DENIED")
			r := w.do(req{method: "POST", path: path("cl-failed"), user: "olivia", body: `{}`})
			r.want(t, 400, "INVALID_ARGUMENT")
			w.do(req{method: "POST", path: path("cl-failed"), user: "olivia", body: `{"reason":"a\u202eb"}`}).want(t, 400, "INVALID_ARGUMENT")
			w.do(req{method: "POST", path: path("cl-nope"), user: "olivia", body: `{"reason":"x"}`}).want(t, 404, "NOT_FOUND")
			if op, _ := st.OperationGet(ctx, "cl-failed"); domain.StepStatus(op.Step) != domain.StepCreateFailed {
				t.Fatalf("a refused close moved the request: %s", domain.StepStatus(op.Step))
			}
		})
		t.Run("a failed request is closed, audited, the reason in its history", func(t *testing.T) {
			r := w.do(req{method: "POST", path: path("cl-failed"), user: "olivia", body: `{"reason":"pipeline broken for good"}`})
			r.want(t, 202, "ACCEPTED") // no engine here: closing its MR is left due
			step, _ := r.data["step"].(map[string]any)
			if step["name"] != "CLOSE_CANCELLED" {
				t.Fatalf("data: %v", r.data)
			}
			op, _ := st.OperationGet(ctx, "cl-failed")
			if op.NextAction != flow.ActionWithdraw || op.DueAt.IsZero() {
				t.Fatalf("closing the MR is not due: %q %v", op.NextAction, op.DueAt)
			}
			hist, err := st.OperationStepList(ctx, "cl-failed")
			if err != nil {
				t.Fatal(err)
			}
			last := hist[len(hist)-1]
			if domain.StepStatus(last.ToStep) != domain.StepCloseCancelled || last.Actor != "olivia" || !strings.Contains(last.Note, "pipeline broken for good") {
				t.Fatalf("history: %+v", last)
			}
			recs := auditOf(t, st, "cl-failed")
			found := false
			for _, rec := range recs {
				found = found || rec.Action == config.RouteOpsRequestClose && rec.Actor == "olivia" && rec.Outcome == "ACCEPTED"
			}
			if !found {
				t.Fatalf("audit: %+v", recs)
			}
			again := w.do(req{method: "POST", path: path("cl-failed"), user: "olivia", body: `{"reason":"pipeline broken for good"}`})
			again.want(t, 202, "ACCEPTED")
		})
		t.Run("refused in words: not stopped, in effect, a removal", func(t *testing.T) {
			submitApproveFirst(t, st, "cl-waiting", "bob", tOpen)
			r := w.do(req{method: "POST", path: path("cl-waiting"), user: "olivia", body: `{"reason":"x"}`})
			r.wantRefused(t, 409, "REQUEST_IN_PROGRESS", domain.ReasonNotStopped)
			if !strings.Contains(r.env.Message, "not stopped") {
				t.Fatalf("message: %q", r.env.Message)
			}
			validatedFixture(t, st, "cl-live", "adam")
			r = w.do(req{method: "POST", path: path("cl-live"), user: "olivia", body: `{"reason":"x"}`})
			r.wantRefused(t, 409, "ALREADY_IN_EFFECT", domain.ReasonInEffect)
			if !strings.Contains(r.env.Message, "/ops/requests/cl-live/revoke") {
				t.Fatalf("message: %q", r.env.Message)
			}
			if b, _ := st.BindingGetByOperation(ctx, "cl-waiting"); b.Status != domain.BindingApprovalSending {
				t.Fatalf("a refused close moved the binding: %s", b.Status)
			}
			// The removal of cl-live's access: closing it would leave the
			// entry on main.
			rv := WorkflowRevoker{Revoker: lifecycle.Revoker{Env: flow.Env{Config: w.cfg.Current}, Store: st}}
			if res, err := rv.Revoke(ctx, "cl-live", domain.RevokeOperator, "left the team", "olivia"); err != nil || !res.Created {
				t.Fatalf("revoke: %+v %v", res, err)
			}
			rev := domain.RevocationID("cl-live")
			r = w.do(req{method: "POST", path: path(rev), user: "olivia", body: `{"reason":"x"}`})
			r.wantRefused(t, 409, "REQUEST_IN_PROGRESS", domain.ReasonIsRevocation)
			if !strings.Contains(r.env.Message, "removal of access") {
				t.Fatalf("message: %q", r.env.Message)
			}
			if b, _ := st.BindingGetByOperation(ctx, rev); b.Status != domain.BindingRevoking {
				t.Fatalf("a refused close moved the removal's binding: %s", b.Status)
			}
		})
	})
}
