package httpapi

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

func TestRequestGet(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st)
		w.do(req{method: "POST", path: "/api/requests", user: "alice", body: submitBodyFor(tOpen, "audit", ""),
			header: map[string]string{"Idempotency-Key": "op-alice"}}).want(t, 202, "ACCEPTED")

		t.Run("get200", func(t *testing.T) {
			for name, user := range map[string]string{"the owner": "alice", "the owner by employee ID": "E10023", "an admin": "adam"} {
				t.Run(name, func(t *testing.T) {
					r := w.do(req{method: "GET", path: "/api/requests/op-alice", user: user})
					r.want(t, 200, "OK")
					var v requestView
					b, _ := json.Marshal(r.env.Data)
					if err := json.Unmarshal(b, &v); err != nil {
						t.Fatal(err)
					}
					if v.OperationID != "op-alice" || v.Subject != "alice" || v.TargetKey != tOpen || v.Status != domain.BindingApprovalSending ||
						v.Step.Code != int(domain.StepCreateApprovalSubmitting) || v.Step.Name != domain.StepCreateApprovalSubmitting.String() ||
						v.Hint != domain.HintNone || v.UpdatedAt.IsZero() {
						t.Fatalf("view %+v", v)
					}
					// Approve-first, waiting for its approval: the days
					// count from the approval, so no end date yet.
					if v.ExpiresAt != nil || !v.ExpiresFromApproval {
						t.Fatalf("view %+v", v)
					}
					// What the person asked for, in the request's own words:
					// the target's title, the reason, and the days (the
					// target's maximum, 30, when the submission left them out).
					if v.TargetTitle != "Payments DB" || v.Reason != "audit" || v.Days != 30 {
						t.Fatalf("title %q, reason %q, days %d; want Payments DB, audit, 30", v.TargetTitle, v.Reason, v.Days)
					}
					if v.Blocker == nil || v.Blocker.Kind != blockApproval {
						t.Fatalf("blocker %+v", v.Blocker)
					}
				})
			}
		})
		t.Run("get404", func(t *testing.T) {
			for name, c := range map[string]struct{ path, user string }{
				"someone else's request: 404, not 403": {"/api/requests/op-alice", "bob"},
				"an operator is not an admin":          {"/api/requests/op-alice", "olivia"},
				"no such request":                      {"/api/requests/op-none", "alice"},
			} {
				t.Run(name, func(t *testing.T) {
					r := w.do(req{method: "GET", path: c.path, user: c.user})
					r.want(t, 404, "NOT_FOUND")
				})
			}
		})
		t.Run("get401", func(t *testing.T) {
			w.do(req{method: "GET", path: "/api/requests/op-alice"}).want(t, 401, "UNAUTHENTICATED")
		})
		t.Run("permission service down: someone else's request is 404", func(t *testing.T) {
			w.load(map[string]any{"permission.baseURL": "http://127.0.0.1:1/"})
			defer w.load(nil)
			w.do(req{method: "GET", path: "/api/requests/op-alice", user: "adam"}).want(t, 404, "NOT_FOUND")
			w.do(req{method: "GET", path: "/api/requests/op-alice", user: "alice"}).want(t, 200, "OK")
		})
	})
}

func TestRequestList(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st)
		targets := []string{tOpen, tRace, tReplay, "billing-dashboard", tOpen + "-x"}
		for i, tk := range targets[:4] {
			w.do(req{method: "POST", path: "/api/requests", user: "bob", body: submitBodyFor(tk, "r", `,"days":1`),
				header: map[string]string{"Idempotency-Key": fmt.Sprintf("bob-%d", i)}}).want(t, 202, "ACCEPTED")
		}
		w.do(req{method: "POST", path: "/api/requests", user: "alice", body: submitBodyFor(tOpen, "r", `,"days":1`)}).want(t, 202, "ACCEPTED")

		t.Run("list200: mine only, newest first, cursor-paged", func(t *testing.T) {
			var got []string
			cursor := ""
			for page := 0; ; page++ {
				r := w.do(req{method: "GET", path: "/api/requests?limit=3&cursor=" + cursor, user: "bob"})
				r.want(t, 200, "OK")
				for _, it := range r.data["items"].([]any) {
					m := it.(map[string]any)
					if m["subject"] != "bob" {
						t.Fatalf("someone else's item: %v", m)
					}
					got = append(got, m["operationId"].(string))
				}
				cursor, _ = r.data["nextCursor"].(string)
				if cursor == "" {
					break
				}
				if page > 3 {
					t.Fatal("paging does not end")
				}
			}
			if fmt.Sprint(got) != "[bob-3 bob-2 bob-1 bob-0]" {
				t.Fatalf("got %v", got)
			}
		})
		t.Run("list400", func(t *testing.T) {
			for _, q := range []string{"limit=0", "limit=101", "limit=x", "cursor=%21%21", "cursor=Zm9v"} {
				t.Run(q, func(t *testing.T) {
					w.do(req{method: "GET", path: "/api/requests?" + q, user: "bob"}).want(t, 400, "INVALID_ARGUMENT")
				})
			}
		})
		t.Run("list401", func(t *testing.T) {
			w.do(req{method: "GET", path: "/api/requests"}).want(t, 401, "UNAUTHENTICATED")
		})
	})
}

// TestBlocker checks what a request is said to wait on, from its step and
// binding.
func TestBlocker(t *testing.T) {
	s := &Server{}
	for _, c := range []struct {
		name    string
		step    domain.StepStatus
		binding domain.BindingStatus
		kind    string
	}{
		{"approval sent", domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent, blockApproval},
		{"check pipeline running", domain.StepCreatePipelineRunning, domain.BindingMRCreating, blockPipeline},
		{"pipeline timed out", domain.StepCreatePipelinePending, domain.BindingMRCreating, blockPipeline},
		{"rebasing", domain.StepHandleRebasing, domain.BindingMerging, blockRebase},
		{"merged, waiting for deployment", domain.StepHandleMerged, domain.BindingMerged, blockDeployment},
		{"validated: nothing", domain.StepCalledBack, domain.BindingValidated, ""},
		{"failed: nothing to wait on", domain.StepCreatePipelineFailed, domain.BindingCreateFailed, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := s.blocker(t.Context(), store.Operation{Step: int(c.step)}, c.binding)
			if err != nil {
				t.Fatal(err)
			}
			kind := ""
			if b != nil {
				kind = b.Kind
			}
			if kind != c.kind {
				t.Fatalf("kind %q, want %q", kind, c.kind)
			}
		})
	}
}

// TestBlockerBatchQueue: an admitted request waits on a batch round, at
// its place in the project's queue.
func TestBlockerBatchQueue(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st)
		for _, u := range []string{"alice", "bob"} {
			w.do(req{method: "POST", path: "/api/requests", user: u, body: submitBodyFor(tOpen, "r", ""),
				header: map[string]string{"Idempotency-Key": "q-" + u}}).want(t, 202, "ACCEPTED")
			if _, err := st.BatchAdmit(t.Context(), "q-"+u, 1); err != nil {
				t.Fatal(err)
			}
		}
		s := &Server{deps: Deps{Business: Business{Requests: st}}}
		b, err := s.blocker(t.Context(), store.Operation{OperationID: "q-bob", Step: int(domain.StepCreateAdmitted)}, domain.BindingMRCreating)
		if err != nil {
			t.Fatal(err)
		}
		if b == nil || b.Kind != blockBatch || b.Detail != "Position 2 in the queue for the next batch round." {
			t.Fatalf("blocker %+v", b)
		}
	})
}

// TestBlockerBlockedBatch: a member following its batch (MR created, the
// batch's) waits on the pipeline while the batch runs, and on a person
// once the batch is BLOCKED — the state its owner may withdraw it from,
// which the page offers on this blocker (MR created, checks passed, or
// following the batch into handling); a merged member waits for its
// deployment.
func TestBlockerBlockedBatch(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		ctx := t.Context()
		if _, err := st.BatchAdmit(ctx, "op-bbm", 1); err != nil {
			t.Fatal(err)
		}
		untilClaimable(t, st, "op-bbm")
		claim, err := st.BatchClaim(ctx, store.BatchClaimParams{ProjectID: 1, MaxRequests: 10})
		if err != nil || claim.Outcome != store.ClaimClaimed {
			t.Fatalf("claim %+v %v", claim, err)
		}
		s := &Server{deps: Deps{Business: Business{Requests: st}}}
		member := store.Operation{OperationID: "op-bbm", BatchID: claim.BatchID, Step: int(domain.StepCreateMRCreated)}
		kindOf := func(op store.Operation, status domain.BindingStatus) *blockerView {
			t.Helper()
			b, err := s.blocker(ctx, op, status)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		if b := kindOf(member, domain.BindingMRCreating); b == nil || b.Kind != blockPipeline {
			t.Fatalf("running batch: %+v", b)
		}
		if _, err := st.BatchBlock(ctx, store.BatchBlockParams{ID: claim.BatchID, Version: 1, Code: "BATCH_NEEDS_A_PERSON", Message: "a bot may not approve"}); err != nil {
			t.Fatal(err)
		}
		b := kindOf(member, domain.BindingMRCreating)
		if b == nil || b.Kind != blockBlockedBatch || !strings.Contains(b.Detail, "You can withdraw this request and ask again.") {
			t.Fatalf("blocked batch: %+v", b)
		}
		succeeded := member
		succeeded.Step = int(domain.StepCreateSucceeded)
		if b := kindOf(succeeded, domain.BindingMRCreated); b == nil || b.Kind != blockBlockedBatch {
			t.Fatalf("blocked batch, checks passed: %+v", b)
		}
		merging := member
		merging.Step = int(domain.StepHandleStarted)
		if b := kindOf(merging, domain.BindingMerging); b == nil || b.Kind != blockBlockedBatch {
			t.Fatalf("blocked batch, the member in handling: %+v", b)
		}
		merged := member
		merged.Step = int(domain.StepHandleMerged)
		if b := kindOf(merged, domain.BindingMerged); b == nil || b.Kind != blockDeployment {
			t.Fatalf("a merged member waits for its deployment: %+v", b)
		}
	})
}
