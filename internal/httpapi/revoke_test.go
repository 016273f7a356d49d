package httpapi

import (
	"testing"
	"time"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/flow"
	"changeflow/internal/workflow/lifecycle"
)

// withRevoker wires the workflow-backed revoker over the world's store.
func withRevoker() worldOpt {
	return func(w *bizWorld, d *Deps) {
		d.Business.Revoker = WorkflowRevoker{Revoker: lifecycle.Revoker{Env: flow.Env{Config: w.cfg.Current}, Store: w.st}}
	}
}

// validatedFixture writes a grant of subject that is in effect.
func validatedFixture(t *testing.T, st *store.Store, opID, subject string) {
	t.Helper()
	_, err := st.OperationSubmit(t.Context(), store.OperationSubmitParams{
		Operation: store.OperationCreateParams{
			OperationID: opID, Subject: subject, TargetKey: tReplay, ProjectID: 1, Flow: flow.FlowApproveFirst,
			Step: int(domain.StepCreateApprovalSubmitting), Reason: "r", Days: 1, ExpiresAt: time.Now().Add(24 * time.Hour), Actor: subject,
		},
		BindingStatus: domain.BindingApprovalSending,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.DB().ExecContext(t.Context(),
		"UPDATE binding SET status = 'VALIDATED', version = version + 1 WHERE operation_id = ?", opID); err != nil {
		t.Fatal(err)
	}
}

func TestRevokeEndpoints(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st, withOpsActions(), withRevoker())
		ctx := t.Context()
		validatedFixture(t, st, "g-alice", "alice")
		validatedFixture(t, st, "g-bob", "bob")
		stoppedFixture(t, st, "g-failed", "adam")

		t.Run("give back: the owner only, 202 then 200 with the same revocation", func(t *testing.T) {
			w.do(req{method: "POST", path: "/api/requests/g-alice/revoke"}).want(t, 401, "UNAUTHENTICATED")
			w.do(req{method: "POST", path: "/api/requests/g-alice/revoke", user: "bob"}).want(t, 404, "NOT_FOUND")
			w.do(req{method: "POST", path: "/api/requests/nope/revoke", user: "alice"}).want(t, 404, "NOT_FOUND")
			r := w.do(req{method: "POST", path: "/api/requests/g-alice/revoke", user: "alice"})
			r.want(t, 202, "ACCEPTED")
			rev := domain.RevocationID("g-alice")
			if r.data["revocationId"] != rev || r.data["created"] != true || r.data["bindingStatus"] != "REVOKING" {
				t.Fatalf("data %v", r.data)
			}
			op, err := st.OperationGet(ctx, rev)
			if err != nil || op.RevokeReason != domain.RevokeGivenBack || op.GrantOperationID != "g-alice" {
				t.Fatalf("revocation %+v %v", op, err)
			}
			again := w.do(req{method: "POST", path: "/api/requests/g-alice/revoke", user: "alice"})
			again.want(t, 200, "OK")
			if again.data["revocationId"] != rev || again.data["created"] != false {
				t.Fatalf("second call %v", again.data)
			}
			w.do(req{method: "POST", path: "/api/requests/" + rev + "/revoke", user: "alice"}).want(t, 400, "INVALID_ARGUMENT")
			// The grant reads as its access's state now, and so does the
			// revocation.
			for _, id := range []string{"g-alice", rev} {
				g := w.do(req{method: "GET", path: "/api/requests/" + id, user: "alice"})
				g.want(t, 200, "OK")
				if g.data["status"] != "REVOKING" {
					t.Fatalf("%s: %v", id, g.data)
				}
			}
			// Each says what it is: the grant names the revocation that
			// took its binding over, the revocation its grant and why.
			g := w.do(req{method: "GET", path: "/api/requests/g-alice", user: "alice"})
			if g.data["kind"] != "GRANT" || g.data["revocationId"] != rev || g.data["grantOperationId"] != nil {
				t.Fatalf("grant view %v", g.data)
			}
			rv := w.do(req{method: "GET", path: "/api/requests/" + rev, user: "alice"})
			if rv.data["kind"] != "REVOKE" || rv.data["grantOperationId"] != "g-alice" || rv.data["revokeReason"] != "GIVEN_BACK" || rv.data["revocationId"] != nil {
				t.Fatalf("revocation view %v", rv.data)
			}
			// "My requests" lists both, each with its kind.
			l := w.do(req{method: "GET", path: "/api/requests", user: "alice"})
			kinds := map[string]any{}
			for _, it := range l.data["items"].([]any) {
				m := it.(map[string]any)
				kinds[m["operationId"].(string)] = m["kind"]
			}
			if kinds["g-alice"] != "GRANT" || kinds[rev] != "REVOKE" {
				t.Fatalf("list kinds %v", kinds)
			}
			// The console: the grant's detail names its revocation and
			// shows the binding the revocation holds; the revocation's
			// names its grant.
			o := w.do(req{method: "GET", path: "/ops/requests/g-alice", user: "olivia"})
			o.want(t, 200, "OK")
			ov, _ := o.data["revocation"].(map[string]any)
			ob, _ := o.data["binding"].(map[string]any)
			if ov["operationId"] != rev || ov["status"] != "REVOKING" || ov["reason"] != "GIVEN_BACK" || ov["text"] == "" ||
				ob["operationId"] != rev || ob["status"] != "REVOKING" {
				t.Fatalf("ops grant view: revocation %v binding %v", ov, ob)
			}
			or := w.do(req{method: "GET", path: "/ops/requests/" + rev, user: "olivia"})
			orop := or.data["operation"].(map[string]any)
			if orop["kind"] != "REVOKE" || orop["grantOperationId"] != "g-alice" || orop["revokeReason"] != "GIVEN_BACK" || or.data["revocation"] != nil {
				t.Fatalf("ops revocation view %v", or.data)
			}
		})
		t.Run("give back of a request not in effect: 409 with what to do", func(t *testing.T) {
			r := w.do(req{method: "POST", path: "/api/requests/g-failed/revoke", user: "adam"})
			r.wantRefused(t, 409, "NOT_IN_EFFECT", domain.ReasonNotInEffect)
			if r.env.Message == "" || r.env.Message == domain.GenericMessage {
				t.Fatalf("message %q", r.env.Message)
			}
		})
		t.Run("operator revoke: ops.write, a reason, audited", func(t *testing.T) {
			w.do(req{method: "POST", path: "/ops/requests/g-bob/revoke", user: "alice", body: `{"reason":"x"}`}).want(t, 403, "ACCESS_DENIED")
			w.do(req{method: "POST", path: "/ops/requests/g-bob/revoke", user: "olivia"}).want(t, 400, "INVALID_ARGUMENT")
			w.do(req{method: "POST", path: "/ops/requests/g-bob/revoke", user: "olivia", body: `{"reason":"a\u202eb"}`}).want(t, 400, "INVALID_ARGUMENT")
			r := w.do(req{method: "POST", path: "/ops/requests/g-bob/revoke", user: "olivia", body: `{"reason":"left the team"}`})
			r.want(t, 202, "ACCEPTED")
			op, err := st.OperationGet(ctx, domain.RevocationID("g-bob"))
			if err != nil || op.RevokeReason != domain.RevokeOperator || op.Reason != "left the team" {
				t.Fatalf("revocation %+v %v", op, err)
			}
			steps, _ := st.OperationStepList(ctx, op.OperationID)
			if len(steps) == 0 || steps[0].Actor != "olivia" {
				t.Fatalf("history %+v", steps)
			}
			recs := auditOf(t, st, "g-bob")
			ok := 0
			for _, rec := range recs {
				if rec.Action == config.RouteOpsRequestRevoke && rec.Actor == "olivia" && rec.Outcome == "ACCEPTED" {
					ok++
				}
			}
			if ok != 1 || len(recs) != 3 { // two refused (400), one accepted
				t.Fatalf("audit %+v", recs)
			}
			w.do(req{method: "POST", path: "/ops/requests/none/revoke", user: "olivia", body: `{"reason":"x"}`}).want(t, 404, "NOT_FOUND")
		})
	})
}
