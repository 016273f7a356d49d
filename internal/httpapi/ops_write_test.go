package httpapi

import (
	"encoding/json"
	"testing"
	"time"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/callbacks"
	"changeflow/internal/workflow/flow"
	"changeflow/internal/workflow/lifecycle"
	"changeflow/internal/workflow/reconcile"
)

// withOpsActions wires the workflow-backed ops actions over the world's
// store and configuration.
func withOpsActions() worldOpt {
	return func(w *bizWorld, d *Deps) {
		env := flow.Env{Config: w.cfg.Current}
		d.Business.OpsActions = WorkflowOps{
			Store: w.st, Reconciler: reconcile.New(env, w.st), Callbacks: callbacks.New(env, w.st, nil),
			Expiry: lifecycle.NewExpiry(env, w.st),
		}
	}
}

// stoppedFixture writes a legacy request stopped in CREATE_FAILED with
// create_mr kept and not due: what a failed create_mr leaves.
func stoppedFixture(t *testing.T, st *store.Store, opID, subject string) {
	t.Helper()
	stoppedOn(t, st, opID, subject, tReplay)
}

// stoppedOn is stoppedFixture on target.
func stoppedOn(t *testing.T, st *store.Store, opID, subject, target string) {
	t.Helper()
	ctx := t.Context()
	_, err := st.OperationSubmit(ctx, store.OperationSubmitParams{
		Operation: store.OperationCreateParams{
			OperationID: opID, Subject: subject, TargetKey: target, ProjectID: 1, Flow: flow.FlowLegacy,
			Step: int(domain.StepCreateStarted), Reason: "r", Days: 1, ExpiresAt: time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC),
			Actor: subject, NextAction: flow.ActionCreateMR,
		},
		BindingStatus: domain.BindingMRCreating,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.DB().ExecContext(ctx,
		"UPDATE operation SET step_status = ?, due_at = NULL, version = version + 1 WHERE operation_id = ?",
		int(domain.StepCreateFailed), opID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DB().ExecContext(ctx,
		"UPDATE binding SET status = 'CREATE_FAILED', version = version + 1 WHERE operation_id = ?", opID); err != nil {
		t.Fatal(err)
	}
}

func auditOf(t *testing.T, st *store.Store, resource string) []store.AuditRecord {
	t.Helper()
	recs, err := st.AuditListByResource(t.Context(), resource, 10)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func TestOpsWrite(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st, withOpsActions())
		ctx := t.Context()
		stoppedFixture(t, st, "op-stopped", "alice")
		w.do(req{method: "POST", path: "/api/requests", user: "alice", body: submitBodyFor(tOpen, "r", ""),
			header: map[string]string{"Idempotency-Key": "op-running"}}).want(t, 202, "ACCEPTED")

		paths := []string{"/ops/requests/op-stopped/retrigger", "/ops/reconcile", "/ops/requests/op-stopped/replay-approval"}
		t.Run("401 before the body is read", func(t *testing.T) {
			for _, p := range paths {
				w.do(req{method: "POST", path: p, body: "{not json"}).want(t, 401, "UNAUTHENTICATED")
			}
		})
		t.Run("403: no rule (alice), or a read rule only (bob)", func(t *testing.T) {
			w.perm.SetGrants("bob", []string{"ops.read"})
			defer w.perm.SetGrants("bob", nil)
			for _, p := range paths {
				for _, u := range []string{"alice", "bob"} {
					r := w.do(req{method: "POST", path: p, user: u, body: "{not json"})
					r.want(t, 403, "ACCESS_DENIED")
					if r.env.Message != "Access denied" {
						t.Fatalf("message %q", r.env.Message)
					}
				}
			}
		})
		t.Run("retrigger: a stopped request resumes, audited with the server-set operator", func(t *testing.T) {
			r := w.do(req{method: "POST", path: "/ops/requests/op-stopped/retrigger", user: "olivia",
				body: `{"step":"CREATE_FAILED","__authenticatedOperator":"mallory","token":"s3cret"}`})
			r.want(t, 202, "ACCEPTED")
			if r.data["action"] != flow.ActionCreateMR || r.data["operationId"] != "op-stopped" ||
				r.data["from"].(map[string]any)["name"] != "CREATE_FAILED" {
				t.Fatalf("data %v", r.data)
			}
			op, err := st.OperationGet(ctx, "op-stopped")
			if err != nil || domain.StepStatus(op.Step) != domain.StepCreateStarted || op.DueAt.IsZero() || op.NextAction != flow.ActionCreateMR {
				t.Fatalf("after retrigger %+v %v", op, err)
			}
			b, _ := st.BindingGetByOperation(ctx, "op-stopped")
			if b.Status != domain.BindingMRCreating {
				t.Fatalf("binding %s", b.Status)
			}
			recs := auditOf(t, st, "op-stopped")
			if len(recs) != 1 {
				t.Fatalf("audit %v", recs)
			}
			var params map[string]string
			if err := json.Unmarshal([]byte(recs[0].Params), &params); err != nil {
				t.Fatal(err)
			}
			if recs[0].Actor != "olivia" || params[OperatorParam] != "olivia" || params["token"] != auditMask ||
				params["step"] != "CREATE_FAILED" || recs[0].Action != config.RouteOpsRequestRetrigger || recs[0].Outcome != "ACCEPTED" {
				t.Fatalf("record %+v params %v", recs[0], params)
			}
			steps, _ := st.OperationStepList(ctx, "op-stopped")
			if last := steps[len(steps)-1]; last.Actor != "olivia" {
				t.Fatalf("step history actor %q", last.Actor)
			}
		})
		t.Run("retrigger: not stopped → 409, unknown → 404, wrong step → 400, all audited", func(t *testing.T) {
			// op-stopped is due again now, op-running was never stopped.
			for _, id := range []string{"op-stopped", "op-running"} {
				r := w.do(req{method: "POST", path: "/ops/requests/" + id + "/retrigger", user: "adam"})
				r.wantRefused(t, 409, "REQUEST_IN_PROGRESS", domain.ReasonNotStopped)
				if r.env.Message == "" || r.env.Message == domain.GenericMessage {
					t.Fatalf("message %q", r.env.Message)
				}
			}
			w.do(req{method: "POST", path: "/ops/requests/none/retrigger", user: "olivia"}).want(t, 404, "NOT_FOUND")
			w.do(req{method: "POST", path: "/ops/requests/op-running/retrigger", user: "olivia", body: `{"step":"merge"}`}).
				want(t, 400, "INVALID_ARGUMENT")
			w.do(req{method: "POST", path: "/ops/requests/op-running/retrigger", user: "olivia", body: `{"step":`}).
				want(t, 400, "INVALID_ARGUMENT")
			if recs := auditOf(t, st, "op-running"); len(recs) != 3 || recs[0].Outcome == "OK" {
				t.Fatalf("audit %v", recs)
			}
			if recs := auditOf(t, st, "none"); len(recs) != 1 || recs[0].Outcome != "NOT_FOUND" {
				t.Fatalf("audit %v", recs)
			}
		})
		t.Run("reconcile: one run now, counts returned, audited", func(t *testing.T) {
			stoppedFixture(t, st, "op-merged", "bob")
			past, arg := st.Dialect().NowMinus(10 * time.Minute)
			if _, err := st.DB().ExecContext(ctx, "UPDATE operation SET step_status = ?, mr_iid = 7 WHERE operation_id = 'op-merged'",
				int(domain.StepHandleMerged)); err != nil {
				t.Fatal(err)
			}
			if _, err := st.DB().ExecContext(ctx,
				"UPDATE binding SET status = 'MERGED', updated_at = "+past+" WHERE operation_id = 'op-merged'", arg); err != nil {
				t.Fatal(err)
			}
			// MR !9, merged by changeflow earlier and deployed, is the
			// watermark (a callback for an MR changeflow did not merge
			// would raise none).
			for _, q := range []string{
				"INSERT INTO operation (operation_id, subject, target_key, project_id, flow, step_status, mr_iid) VALUES ('op-earlier', 'eve', 't', 1, 'LEGACY', 10301, 9)",
				"INSERT INTO binding (subject_id, target_key, status, operation_id) VALUES ('eve', 't', 'VALIDATED', 'op-earlier')",
				"INSERT INTO operation_step (operation_id, from_step, to_step, from_binding_status, to_binding_status) VALUES ('op-earlier', 10101, 10108, 'MERGING', 'MERGED')",
			} {
				if _, err := st.DB().ExecContext(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := st.DeployCallbackInsert(ctx, store.DeployCallbackParams{ProjectID: 1, MRIID: 9, Status: "SUCCESS"}); err != nil {
				t.Fatal(err)
			}
			r := w.do(req{method: "POST", path: "/ops/reconcile", user: "olivia"})
			r.want(t, 200, "OK")
			if r.data["scanned"] != 1.0 || r.data["validated"] != 1.0 || r.data["waiting"] != 0.0 {
				t.Fatalf("data %v", r.data)
			}
			if b, _ := st.BindingGetByOperation(ctx, "op-merged"); b.Status != domain.BindingValidated {
				t.Fatalf("binding %s", b.Status)
			}
			w.do(req{method: "POST", path: "/ops/reconcile", user: "adam", body: "{}"}).want(t, 200, "OK")
			var n int
			if err := st.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM audit_log WHERE action = ? AND outcome = 'OK'",
				config.RouteOpsReconcileRun).Scan(&n); err != nil || n != 2 {
				t.Fatalf("reconcile audit rows %d %v", n, err)
			}
		})
		t.Run("replay-approval: nothing recorded → applied false; unknown → 404", func(t *testing.T) {
			r := w.do(req{method: "POST", path: "/ops/requests/op-running/replay-approval", user: "olivia"})
			r.want(t, 200, "OK")
			if r.data["applied"] != false {
				t.Fatalf("data %v", r.data)
			}
			w.do(req{method: "POST", path: "/ops/requests/none/replay-approval", user: "olivia"}).want(t, 404, "NOT_FOUND")
		})
	})
}

// TestOpsWriteWithoutWorkflow: not wired → 500 with the generic message.
func TestOpsWriteWithoutWorkflow(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st)
		r := w.do(req{method: "POST", path: "/ops/reconcile", user: "olivia"})
		r.want(t, 500, "INTERNAL_ERROR")
		if r.env.Message != domain.GenericMessage {
			t.Fatalf("message %q", r.env.Message)
		}
	})
}
