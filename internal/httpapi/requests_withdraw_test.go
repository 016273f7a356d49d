package httpapi

import (
	"strings"
	"testing"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/flow"
	"changeflow/internal/workflow/withdraw"
)

// withWithdraw wires the workflow's withdrawal over the world's store
// (no engine: the upstream half is left due, as on an instance whose
// pool is busy).
func withWithdraw() worldOpt {
	return func(w *bizWorld, d *Deps) {
		d.Business.Withdraw = withdraw.Withdrawer{Flow: withdraw.Flow{Env: flow.Env{Config: w.cfg.Current}, Store: w.st}}
	}
}

// submitApproveFirst writes subject's approve-first request opID at its
// entry (APPROVAL_SENDING), as the submit endpoint does.
func submitApproveFirst(t *testing.T, st *store.Store, opID, subject, target string) {
	t.Helper()
	_, err := st.OperationSubmit(t.Context(), store.OperationSubmitParams{
		Operation: store.OperationCreateParams{
			OperationID: opID, Subject: subject, TargetKey: target, ProjectID: 1, Flow: flow.FlowApproveFirst,
			Step: int(domain.StepCreateApprovalSubmitting), Reason: "r", Days: 1, ExpiresAt: time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC),
			Actor: subject, NextAction: flow.ActionSubmitApproval,
		},
		BindingStatus: domain.BindingApprovalSending,
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestWithdrawEndpoint(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st, withWithdraw())
		path := func(id string) string { return "/api/requests/" + id + "/withdraw" }

		t.Run("withdraw200", func(t *testing.T) {
			t.Run("waiting for approval: CLOSED, the requester's step, audited", func(t *testing.T) {
				submitApproveFirst(t, st, "wd-1", "alice", tOpen)
				r := w.do(req{method: "POST", path: path("wd-1"), user: "alice"})
				r.want(t, 200, "OK")
				step, _ := r.data["step"].(map[string]any)
				if r.data["status"] != "CLOSED" || step["name"] != "CLOSE_REQUESTER_WITHDRAWN" || r.data["hint"] != "NONE" {
					t.Fatalf("data: %v", r.data)
				}
				op, _ := st.OperationGet(t.Context(), "wd-1")
				if op.NextAction != flow.ActionWithdraw {
					t.Fatalf("the approval's withdrawal is not due: %q", op.NextAction)
				}
				recs := auditOf(t, st, "wd-1")
				if len(recs) != 1 || recs[0].Actor != "alice" || recs[0].Action != auditActionWithdraw || recs[0].Outcome != "OK" {
					t.Fatalf("audit: %+v", recs)
				}
			})
			t.Run("idempotent: a second withdrawal answers the state", func(t *testing.T) {
				r := w.do(req{method: "POST", path: path("wd-1"), user: "alice@corp.example"})
				r.want(t, 200, "OK")
				if r.data["status"] != "CLOSED" {
					t.Fatalf("data: %v", r.data)
				}
			})
		})
		t.Run("withdraw202", func(t *testing.T) {
			t.Run("stopped on a failure: withdrawn, its MR's close due, audited", func(t *testing.T) {
				stoppedOn(t, st, "wd-failed", "alice", tOpen) // alice's earlier request there is CLOSED
				r := w.do(req{method: "POST", path: path("wd-failed"), user: "alice"})
				r.want(t, 202, "ACCEPTED")
				step, _ := r.data["step"].(map[string]any)
				if step["name"] != "CLOSE_REQUESTER_WITHDRAWN" {
					t.Fatalf("data: %v", r.data)
				}
				op, _ := st.OperationGet(t.Context(), "wd-failed")
				if op.NextAction != flow.ActionWithdraw || op.DueAt.IsZero() {
					t.Fatalf("closing the MR is not due: %q %v", op.NextAction, op.DueAt)
				}
				if recs := auditOf(t, st, "wd-failed"); len(recs) != 1 || recs[0].Actor != "alice" || recs[0].Outcome != "ACCEPTED" {
					t.Fatalf("audit: %+v", recs)
				}
				again := w.do(req{method: "POST", path: path("wd-failed"), user: "alice"})
				again.want(t, 202, "ACCEPTED")
			})
		})
		t.Run("withdraw404", func(t *testing.T) {
			submitApproveFirst(t, st, "wd-bob", "bob", tOpen)
			other := w.do(req{method: "POST", path: path("wd-bob"), user: "alice"})
			other.want(t, 404, "NOT_FOUND")
			unknown := w.do(req{method: "POST", path: path("wd-nope"), user: "alice"})
			unknown.want(t, 404, "NOT_FOUND")
			if other.raw != unknown.raw {
				t.Fatalf("someone else's request must read like an unknown one:\n%s\n%s", other.raw, unknown.raw)
			}
			// An admin gets no exception either: olivia holds the admin rule.
			w.do(req{method: "POST", path: path("wd-bob"), user: "olivia"}).want(t, 404, "NOT_FOUND")
			b, err := st.BindingGetByOperation(t.Context(), "wd-bob")
			if err != nil || b.Status != domain.BindingApprovalSending {
				t.Fatalf("someone else's withdrawal changed the request: %+v %v", b, err)
			}
		})
		t.Run("withdraw401", func(t *testing.T) {
			w.do(req{method: "POST", path: path("wd-bob")}).want(t, 401, "UNAUTHENTICATED")
		})
		t.Run("withdraw409", func(t *testing.T) {
			t.Run("claimed by a batch round", func(t *testing.T) {
				submitApproveFirst(t, st, "wd-claimed", "alice", tRace)
				res, err := st.WorkCallbackApply(t.Context(), store.WorkCallbackParams{
					OperationID: "wd-claimed", Waiting: []domain.BindingStatus{domain.BindingApprovalSending},
					Step: int(domain.StepCreateAdmitted), Binding: domain.BindingMRCreating, AdmitProject: 77, Actor: "test",
				})
				if err != nil || !res.Applied {
					t.Fatalf("admit: %+v %v", res, err)
				}
				storetest.UntilAdmittedBeforeNow(t, st, "wd-claimed")
				if c, err := st.BatchClaim(t.Context(), store.BatchClaimParams{ProjectID: 77, MaxRequests: 10}); err != nil || c.Outcome != store.ClaimClaimed {
					t.Fatalf("claim: %+v %v", c, err)
				}
				r := w.do(req{method: "POST", path: path("wd-claimed"), user: "alice"})
				r.wantRefused(t, 409, "REQUEST_IN_PROGRESS", domain.ReasonClaimedByBatch)
				if !strings.Contains(r.env.Message, "batch") || !strings.Contains(r.env.Message, "give the access back") {
					t.Fatalf("message: %q", r.env.Message)
				}
			})
			t.Run("withdrawn, but closing its MR stopped on a failure", func(t *testing.T) {
				stoppedFixture(t, st, "wd-stuck", "bob")
				if _, err := st.DB().ExecContext(t.Context(), "UPDATE binding SET status = 'MR_CREATED', version = version + 1 WHERE operation_id = ?", "wd-stuck"); err != nil {
					t.Fatal(err)
				}
				if _, err := st.DB().ExecContext(t.Context(), "UPDATE operation SET step_status = ?, version = version + 1 WHERE operation_id = ?",
					int(domain.StepCreateSucceeded), "wd-stuck"); err != nil {
					t.Fatal(err)
				}
				res, err := st.OperationWithdraw(t.Context(), store.WithdrawParams{OperationID: "wd-stuck", Action: flow.ActionWithdraw, Actor: "bob"})
				if err != nil || res.Place != store.WithdrawFromMR {
					t.Fatalf("withdraw: %+v %v", res, err)
				}
				// What the engine's safety net leaves when the close keeps failing.
				if _, err := st.DB().ExecContext(t.Context(), "UPDATE operation SET step_status = ?, due_at = NULL, version = version + 1 WHERE operation_id = ?",
					int(domain.StepCloseFailed), "wd-stuck"); err != nil {
					t.Fatal(err)
				}
				r := w.do(req{method: "POST", path: path("wd-stuck"), user: "bob"})
				r.wantRefused(t, 409, "REQUEST_IN_PROGRESS", domain.ReasonCloseFailed)
				if !strings.Contains(r.env.Message, "withdrawal is recorded") {
					t.Fatalf("message: %q", r.env.Message)
				}
			})
			t.Run("in effect: says how to give it back", func(t *testing.T) {
				submitApproveFirst(t, st, "wd-live", "alice", tReplay)
				if _, err := st.DB().ExecContext(t.Context(), "UPDATE binding SET status = 'VALIDATED', version = version + 1 WHERE operation_id = ?", "wd-live"); err != nil {
					t.Fatal(err)
				}
				r := w.do(req{method: "POST", path: path("wd-live"), user: "alice"})
				r.wantRefused(t, 409, "ALREADY_IN_EFFECT", domain.ReasonInEffect)
				if !strings.Contains(r.env.Message, "/api/requests/wd-live/revoke") {
					t.Fatalf("message: %q", r.env.Message)
				}
				if recs := auditOf(t, st, "wd-live"); len(recs) != 1 || recs[0].Outcome != "ALREADY_IN_EFFECT" {
					t.Fatalf("audit: %+v", recs)
				}
			})
		})
	})
}
