package httpapi

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/gitlab"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/batch"
	"changeflow/internal/workflow/flow"
)

// withBatchActions wires the workflow-backed batch actions over the
// world's store, configuration and simulated GitLab.
func withBatchActions() worldOpt {
	return func(w *bizWorld, d *Deps) {
		gl := gitlab.New(gitlab.Options{Settings: func() gitlab.Settings { return gitlab.SettingsFromConfig(w.cfg.Current()) }})
		bf := batch.Flow{Env: flow.Env{GitLab: gl, Config: w.cfg.Current}, Store: w.st}
		d.Business.BatchActions = WorkflowBatchOps{Rounds: batch.NewRounds(bf, nil), Batch: bf}
	}
}

// untilClaimable waits until the database clock has passed the admission
// of operationID. A claim takes only requests created strictly before the
// database's "now" (store.BatchClaim), and SQLite's clock has millisecond
// precision: a claim issued within the admission's millisecond rightly
// finds nothing waiting. Waiting on that state, rather than sleeping or
// backdating the row, keeps the claim under test exactly as production
// runs it.
func untilClaimable(t *testing.T, st *store.Store, operationID string) {
	t.Helper()
	q := "SELECT COUNT(*) FROM merge_batch_request WHERE operation_id = ? AND batch_id IS NULL AND created_at < " + st.Dialect().Now()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := st.DB().QueryRowContext(t.Context(), q, operationID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not claimable after 10s", operationID)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestOpsBatchWrite(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st, withBatchActions())
		ctx := t.Context()
		if _, err := st.BatchAdmit(ctx, "op-waiting", 1); err != nil {
			t.Fatal(err)
		}
		untilClaimable(t, st, "op-waiting")
		claim, err := st.BatchClaim(ctx, store.BatchClaimParams{ProjectID: 1, MaxRequests: 10})
		if err != nil || claim.Outcome != store.ClaimClaimed {
			t.Fatalf("claim %+v %v", claim, err)
		}
		settle := "/ops/batches/" + strconv.FormatInt(claim.BatchID, 10) + "/settle"
		paths := []string{"/ops/rounds", settle}

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
					r := w.do(req{method: "POST", path: p, user: u})
					r.want(t, 403, "ACCESS_DENIED")
					if r.env.Message != "Access denied" {
						t.Fatalf("message %q", r.env.Message)
					}
				}
			}
		})
		t.Run("rounds: the slot answers while the batch runs", func(t *testing.T) {
			r := w.do(req{method: "POST", path: "/ops/rounds", user: "olivia", body: `{"projectId":1}`})
			r.want(t, 200, "OK")
			rounds := r.data["rounds"].([]any)
			if len(rounds) != 1 || rounds[0].(map[string]any)["outcome"] != "NOTHING_WAITING" {
				t.Fatalf("rounds %v", rounds)
			}
			w.do(req{method: "POST", path: "/ops/rounds", user: "olivia", body: `{"projectId":"x"}`}).want(t, 400, "INVALID_ARGUMENT")
		})
		t.Run("settle: no MR → FAILED, then already settled", func(t *testing.T) {
			r := w.do(req{method: "POST", path: settle, user: "olivia"})
			if r.status != 200 {
				t.Log(w.logs.String())
			}
			r.want(t, 200, "OK")
			if r.data["status"] != "FAILED" || r.data["alreadySettled"] != false || r.data["merged"] != false {
				t.Fatalf("data %v", r.data)
			}
			b, err := st.BatchGet(ctx, claim.BatchID)
			if err != nil || b.Status != domain.BatchFailed {
				t.Fatalf("batch %+v %v", b, err)
			}
			r = w.do(req{method: "POST", path: settle, user: "olivia"})
			r.want(t, 200, "OK")
			if r.data["alreadySettled"] != true {
				t.Fatalf("data %v", r.data)
			}
			if recs := auditOf(t, st, strconv.FormatInt(claim.BatchID, 10)); len(recs) != 2 {
				t.Fatalf("audit %v", recs)
			}
		})
		t.Run("settle: unknown batch 404, bad id 400", func(t *testing.T) {
			w.do(req{method: "POST", path: "/ops/batches/999999/settle", user: "olivia"}).want(t, 404, "NOT_FOUND")
			w.do(req{method: "POST", path: "/ops/batches/x/settle", user: "olivia"}).want(t, 400, "INVALID_ARGUMENT")
		})
	})
}

func TestOpsBatchWriteWithoutWorkflow(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st)
		w.do(req{method: "POST", path: "/ops/rounds", user: "olivia"}).want(t, 500, "INTERNAL_ERROR")
		w.do(req{method: "POST", path: "/ops/batches/1/settle", user: "olivia"}).want(t, 500, "INTERNAL_ERROR")
	})
}

// TestOpsBatchesShowABlockedBatchWithItsReason: a batch that needs a person
// is listed by GET /ops/batches and GET /ops/batches/{id} as BLOCKED with
// the code and the reason the workflow wrote; an operator's settlement
// then fails it (no MR) and frees the slot.
func TestOpsBatchesShowABlockedBatchWithItsReason(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st, withBatchActions())
		ctx := t.Context()
		if _, err := st.BatchAdmit(ctx, "op-blocked", 1); err != nil {
			t.Fatal(err)
		}
		untilClaimable(t, st, "op-blocked")
		claim, err := st.BatchClaim(ctx, store.BatchClaimParams{ProjectID: 1, MaxRequests: 10})
		if err != nil || claim.Outcome != store.ClaimClaimed {
			t.Fatalf("claim %+v %v", claim, err)
		}
		const reason = "building the batch MR from main: invalid binding file: yaml: line 1"
		if _, err := st.BatchBlock(ctx, store.BatchBlockParams{ID: claim.BatchID, Version: 1, Code: "BATCH_NEEDS_A_PERSON", Message: reason}); err != nil {
			t.Fatal(err)
		}
		id := strconv.FormatInt(claim.BatchID, 10)
		check := func(b map[string]any) {
			t.Helper()
			if b["status"] != "BLOCKED" || b["failureCode"] != "BATCH_NEEDS_A_PERSON" || b["failureMessage"] != reason {
				t.Fatalf("batch %v", b)
			}
		}
		r := w.do(req{method: "GET", path: "/ops/batches", user: "olivia"})
		r.want(t, 200, "OK")
		items := r.data["items"].([]any)
		if len(items) != 1 {
			t.Fatalf("items %v", items)
		}
		check(items[0].(map[string]any))
		// The list carries each batch's members, so the console links them
		// to their requests.
		if ms, _ := items[0].(map[string]any)["members"].([]any); len(ms) != 1 || ms[0].(map[string]any)["operationId"] != "op-blocked" {
			t.Fatalf("members in the list: %v", items[0].(map[string]any)["members"])
		}
		r = w.do(req{method: "GET", path: "/ops/batches/" + id, user: "olivia"})
		r.want(t, 200, "OK")
		check(r.data)

		r = w.do(req{method: "POST", path: "/ops/batches/" + id + "/settle", user: "olivia"})
		r.want(t, 200, "OK")
		if r.data["status"] != "FAILED" {
			t.Fatalf("settle %v", r.data)
		}
		if _, err := st.BatchActive(ctx, 1); err == nil {
			t.Fatal("the slot is still held")
		}
	})
}

// TestOpsRetriggerOfABatchMemberResumesTheBlockedBatch: POST
// /ops/requests/{id}/retrigger on a member that is not the driver re-drives
// the batch: the BLOCKED batch runs again and its driver (stopped at
// CREATE_PIPELINE_FAILED, no action kept) is due at batch_poll_pipeline
// from CREATE_PIPELINE_RUNNING; a second retrigger finds the driver due
// (409).
func TestOpsRetriggerOfABatchMemberResumesTheBlockedBatch(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st, withOpsActions())
		ctx := t.Context()
		ids := []string{"op-bd", "op-bm"}
		for _, id := range ids {
			_, err := st.OperationSubmit(ctx, store.OperationSubmitParams{
				Operation: store.OperationCreateParams{
					OperationID: id, Subject: id, TargetKey: tReplay, ProjectID: 1, Flow: flow.FlowApproveFirst,
					Step: int(domain.StepCreateAdmitted), Reason: "r", Days: 1,
					ExpiresAt: time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC), Actor: id,
				},
				BindingStatus: domain.BindingMRCreating,
			})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.BatchAdmit(ctx, id, 1); err != nil {
				t.Fatal(err)
			}
			untilClaimable(t, st, id)
		}
		claim, err := st.BatchClaim(ctx, store.BatchClaimParams{ProjectID: 1, MaxRequests: 10})
		if err != nil || claim.Outcome != store.ClaimClaimed || len(claim.Members) != 2 {
			t.Fatalf("claim %+v %v", claim, err)
		}
		mr := &store.BatchMR{IID: 5, URL: "u", Branch: flow.BatchBranchName(claim.BatchID)}
		if _, err := st.BatchApply(ctx, store.BatchApplyParams{BatchID: claim.BatchID, SetMR: mr, LinkMR: mr, LinkOps: ids}); err != nil {
			t.Fatal(err)
		}
		// The driver's checks failed and the batch was blocked: its row
		// shows the failure and keeps no action.
		if _, err := st.DB().ExecContext(ctx, "UPDATE operation SET step_status = ?, version = version + 1 WHERE operation_id = ?",
			int(domain.StepCreatePipelineFailed), ids[0]); err != nil {
			t.Fatal(err)
		}
		if _, err := st.DB().ExecContext(ctx, "UPDATE binding SET status = 'CREATE_FAILED', version = version + 1 WHERE operation_id = ?", ids[0]); err != nil {
			t.Fatal(err)
		}
		if _, err := st.BatchBlock(ctx, store.BatchBlockParams{ID: claim.BatchID, Version: 1, Code: "BATCH_NEEDS_A_PERSON", Message: "checks"}); err != nil {
			t.Fatal(err)
		}

		r := w.do(req{method: "POST", path: "/ops/requests/op-bm/retrigger", user: "olivia"})
		r.want(t, 202, "ACCEPTED")
		if r.data["action"] != flow.ActionBatchPollPipeline || r.data["operationId"] != "op-bm" {
			t.Fatalf("data %v", r.data)
		}
		b, err := st.BatchGet(ctx, claim.BatchID)
		if err != nil || b.Status != domain.BatchRunning || b.FailureCode != "" {
			t.Fatalf("batch %+v %v", b, err)
		}
		driver, err := st.OperationGet(ctx, ids[0])
		if err != nil || domain.StepStatus(driver.Step) != domain.StepCreatePipelineRunning || driver.DueAt.IsZero() ||
			driver.NextAction != flow.ActionBatchPollPipeline {
			t.Fatalf("driver %+v %v", driver, err)
		}
		bd, _ := st.BindingGetByOperation(ctx, ids[0])
		if bd.Status != domain.BindingMRCreating {
			t.Fatalf("driver's binding %s", bd.Status)
		}
		w.do(req{method: "POST", path: "/ops/requests/op-bd/retrigger", user: "olivia"}).wantRefused(t, 409, "REQUEST_IN_PROGRESS", domain.ReasonNotStopped)
	})
}

// TestOpsSettleABatchWhoseMRDoesNotClose: the operator settles a batch
// whose MR GitLab refuses to close (403): nothing is settled and the
// answer says why and what to do (409), not a 500; GitLab not answering
// is 503 RETRY_LATER; once the close works the settlement goes through.
func TestOpsSettleABatchWhoseMRDoesNotClose(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st, withBatchActions())
		ctx := t.Context()
		if _, err := st.BatchAdmit(ctx, "op-nc", 1); err != nil {
			t.Fatal(err)
		}
		untilClaimable(t, st, "op-nc")
		claim, err := st.BatchClaim(ctx, store.BatchClaimParams{ProjectID: 1, MaxRequests: 10})
		if err != nil || claim.Outcome != store.ClaimClaimed {
			t.Fatalf("claim %+v %v", claim, err)
		}
		branch := flow.BatchBranchName(claim.BatchID)
		if _, err := w.gl.CreateCommit(ctx, "1", gitlab.CommitRequest{Branch: branch, StartBranch: "main", Message: "m",
			Actions: []gitlab.FileAction{{Action: gitlab.ActionCreate, Path: "nc.yaml", Content: "[]\n"}}}); err != nil {
			t.Fatal(err)
		}
		mr, err := w.gl.CreateMR(ctx, "1", gitlab.CreateMRRequest{SourceBranch: branch, TargetBranch: "main", Title: "t"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.BatchApply(ctx, store.BatchApplyParams{BatchID: claim.BatchID,
			SetMR: &store.BatchMR{IID: mr.IID, URL: mr.WebURL, Branch: branch}}); err != nil {
			t.Fatal(err)
		}
		fault := func(body string) {
			t.Helper()
			resp, err := http.Post(w.glURL+"_control/faults", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				t.Fatalf("fault: %d", resp.StatusCode)
			}
		}
		settle := "/ops/batches/" + strconv.FormatInt(claim.BatchID, 10) + "/settle"

		fault(`{"method":"PUT","path":"/projects/*/merge_requests/*","kind":"status","status":403,"count":1}`)
		r := w.do(req{method: "POST", path: settle, user: "olivia"})
		r.wantRefused(t, 409, "REQUEST_IN_PROGRESS", domain.ReasonMRWontClose)
		if !strings.Contains(r.env.Message, "does not close") {
			t.Fatalf("message %q", r.env.Message)
		}
		fault(`{"method":"GET","path":"/projects/*/merge_requests/*","kind":"status","status":503,"count":1}`)
		w.do(req{method: "POST", path: settle, user: "olivia"}).want(t, 503, "RETRY_LATER")
		if b, err := st.BatchGet(ctx, claim.BatchID); err != nil || b.Status != domain.BatchRunning {
			t.Fatalf("batch %+v %v: nothing may be settled yet", b, err)
		}

		r = w.do(req{method: "POST", path: settle, user: "olivia"})
		r.want(t, 200, "OK")
		if r.data["status"] != "FAILED" {
			t.Fatalf("data %v", r.data)
		}
	})
}
