package httpapi

import (
	"encoding/json"
	"strings"
	"testing"

	"changeflow/internal/config"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

func TestOps(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st)
		ctx := t.Context()
		w.do(req{method: "POST", path: "/api/requests", user: "alice", body: submitBodyFor(tOpen, "r", ""),
			header: map[string]string{"Idempotency-Key": "op-ops"}}).want(t, 202, "ACCEPTED")

		paths := []string{"/ops/requests/op-ops", "/ops/batches", "/ops/batches/1", "/ops/config", "/ops/callbacks/deploy"}
		t.Run("ops401", func(t *testing.T) {
			for _, p := range paths {
				w.do(req{method: "GET", path: p}).want(t, 401, "UNAUTHENTICATED")
			}
		})
		t.Run("ops403: no rule, or the permission service down", func(t *testing.T) {
			for _, p := range paths {
				r := w.do(req{method: "GET", path: p, user: "alice"})
				r.want(t, 403, "ACCESS_DENIED")
				if r.env.Message != "Access denied" {
					t.Fatalf("message %q", r.env.Message)
				}
			}
			w.load(map[string]any{"permission.baseURL": "http://127.0.0.1:1/"})
			defer w.load(nil)
			w.do(req{method: "GET", path: "/ops/config", user: "olivia"}).want(t, 403, "ACCESS_DENIED")
		})
		t.Run("ops200: the request in full, audited with the server-set operator", func(t *testing.T) {
			r := w.do(req{method: "GET", path: "/ops/requests/op-ops?__authenticatedOperator=mallory&token=s3cret", user: "olivia"})
			r.want(t, 200, "OK")
			op := r.data["operation"].(map[string]any)
			if op["operationId"] != "op-ops" || op["flow"] != "APPROVE_FIRST" || r.data["status"] != "APPROVAL_SENDING" {
				t.Fatalf("data %v", r.data)
			}
			if steps := r.data["steps"].([]any); len(steps) != 1 {
				t.Fatalf("steps %v", steps)
			}

			recs, err := st.AuditListByResource(ctx, "op-ops", 10)
			if err != nil || len(recs) != 1 {
				t.Fatalf("audit %v %v", recs, err)
			}
			var params map[string]string
			if err := json.Unmarshal([]byte(recs[0].Params), &params); err != nil {
				t.Fatal(err)
			}
			if recs[0].Actor != "olivia" || params[OperatorParam] != "olivia" || params["token"] != auditMask ||
				recs[0].Action != config.RouteOpsRequestGet || recs[0].Outcome != "OK" {
				t.Fatalf("record %+v params %v", recs[0], params)
			}
			// The next read shows the previous one in the audit trail.
			r = w.do(req{method: "GET", path: "/ops/requests/op-ops", user: "adam"})
			if a := r.data["audit"].([]any); len(a) != 1 {
				t.Fatalf("audit in view %v", a)
			}
		})
		t.Run("ops200: the approval callback inbox, newest first", func(t *testing.T) {
			r := w.do(req{method: "GET", path: "/ops/requests/op-ops", user: "olivia"})
			r.want(t, 200, "OK")
			if inbox := r.data["approvalCallbacks"].([]any); len(inbox) != 0 {
				t.Fatalf("inbox before any callback %v", inbox)
			}
			for _, p := range []store.ApprovalCallbackParams{
				{DeliveryKey: "cb-1", OperationID: "op-ops", ApprovalID: "ap-1", Result: "REJECTED"},
				{DeliveryKey: "cb-2", OperationID: "op-ops", ApprovalID: "ap-1", Result: "APPROVED"},
				{DeliveryKey: "cb-x", OperationID: "op-other", ApprovalID: "ap-9", Result: "APPROVED"},
			} {
				if _, err := st.ApprovalCallbackInsert(ctx, p); err != nil {
					t.Fatal(err)
				}
			}
			r = w.do(req{method: "GET", path: "/ops/requests/op-ops", user: "olivia"})
			r.want(t, 200, "OK")
			inbox := r.data["approvalCallbacks"].([]any)
			if len(inbox) != 2 {
				t.Fatalf("inbox %v", inbox)
			}
			first, second := inbox[0].(map[string]any), inbox[1].(map[string]any)
			if first["deliveryKey"] != "cb-2" || first["approvalId"] != "ap-1" || first["result"] != "APPROVED" || first["receivedAt"] == "" ||
				second["deliveryKey"] != "cb-1" || second["result"] != "REJECTED" {
				t.Fatalf("inbox %v", inbox)
			}
			if first["disposition"] != "RECORDED" || first["source"] != "callback" || first["duplicates"] != float64(0) {
				t.Fatalf("a decision nobody acted on yet %v", first)
			}
			// What the workflow did with it, and a duplicate delivery.
			if err := st.ApprovalCallbackDisposition(ctx, "cb-2", store.InboxStale, "not waiting"); err != nil {
				t.Fatal(err)
			}
			if _, err := st.ApprovalCallbackInsert(ctx, store.ApprovalCallbackParams{DeliveryKey: "cb-2", OperationID: "op-ops", ApprovalID: "ap-1", Result: "APPROVED"}); err != nil {
				t.Fatal(err)
			}
			r = w.do(req{method: "GET", path: "/ops/requests/op-ops", user: "olivia"})
			first = r.data["approvalCallbacks"].([]any)[0].(map[string]any)
			if first["disposition"] != "STALE" || first["reason"] != "not waiting" || first["duplicates"] != float64(1) {
				t.Fatalf("disposition and duplicates %v", first)
			}
		})
		t.Run("ops200: the deploy callback inbox, per request and listed", func(t *testing.T) {
			r := w.do(req{method: "GET", path: "/ops/requests/op-ops", user: "olivia"})
			if d := r.data["deployCallbacks"].([]any); len(d) != 0 {
				t.Fatalf("no MR, no deploy callbacks %v", d)
			}
			if _, err := st.DB().ExecContext(ctx, "UPDATE operation SET mr_iid = 7 WHERE operation_id = 'op-ops'"); err != nil {
				t.Fatal(err)
			}
			own, err := st.DeployCallbackInsert(ctx, store.DeployCallbackParams{DeliveryKey: "dep-7", ProjectID: 1, MRIID: 7, Status: "SUCCESS"})
			if err != nil {
				t.Fatal(err)
			}
			forged, err := st.DeployCallbackInsert(ctx, store.DeployCallbackParams{DeliveryKey: "dep-x", ProjectID: 1, MRIID: 99999, Status: "SUCCESS"})
			if err != nil {
				t.Fatal(err)
			}
			if err := st.DeployCallbackClassify(ctx, own.ID, store.DeployEarly, "being merged"); err != nil {
				t.Fatal(err)
			}
			if err := st.DeployCallbackClassify(ctx, forged.ID, store.DeployUnknownMR, "no request has it"); err != nil {
				t.Fatal(err)
			}
			r = w.do(req{method: "GET", path: "/ops/requests/op-ops", user: "olivia"})
			r.want(t, 200, "OK")
			d := r.data["deployCallbacks"].([]any)
			if len(d) != 1 {
				t.Fatalf("the request's MR only %v", d)
			}
			if c := d[0].(map[string]any); c["deliveryKey"] != "dep-7" || c["disposition"] != "EARLY" || c["mrIid"] != float64(7) || c["reason"] != "being merged" {
				t.Fatalf("deploy callback %v", c)
			}

			r = w.do(req{method: "GET", path: "/ops/callbacks/deploy?limit=1", user: "olivia"})
			r.want(t, 200, "OK")
			items := r.data["items"].([]any)
			if len(items) != 1 || items[0].(map[string]any)["deliveryKey"] != "dep-x" || r.data["nextCursor"] == "" {
				t.Fatalf("first page %v", r.data)
			}
			r = w.do(req{method: "GET", path: "/ops/callbacks/deploy?limit=1&cursor=" + r.data["nextCursor"].(string), user: "olivia"})
			items = r.data["items"].([]any)
			if len(items) != 1 || items[0].(map[string]any)["deliveryKey"] != "dep-7" || r.data["nextCursor"] != "" {
				t.Fatalf("second page %v", r.data)
			}
			r = w.do(req{method: "GET", path: "/ops/callbacks/deploy?disposition=unknown_mr", user: "adam"})
			r.want(t, 200, "OK")
			if items := r.data["items"].([]any); len(items) != 1 || items[0].(map[string]any)["mrIid"] != float64(99999) {
				t.Fatalf("filtered %v", items)
			}
			for _, q := range []string{"?disposition=PWNED", "?limit=0", "?limit=201", "?cursor=nope"} {
				w.do(req{method: "GET", path: "/ops/callbacks/deploy" + q, user: "olivia"}).want(t, 400, "INVALID_ARGUMENT")
			}
		})
		t.Run("ops404 is audited too", func(t *testing.T) {
			w.do(req{method: "GET", path: "/ops/requests/none", user: "olivia"}).want(t, 404, "NOT_FOUND")
			w.do(req{method: "GET", path: "/ops/batches/999", user: "olivia"}).want(t, 404, "NOT_FOUND")
			recs, _ := st.AuditListByResource(ctx, "none", 10)
			if len(recs) != 1 || recs[0].Outcome != "NOT_FOUND" {
				t.Fatalf("audit %+v", recs)
			}
		})
		t.Run("batches: list, cursor, one batch with members", func(t *testing.T) {
			r := w.do(req{method: "GET", path: "/ops/batches", user: "olivia"})
			r.want(t, 200, "OK")
			if items := r.data["items"].([]any); len(items) != 0 || r.data["nextCursor"] != "" {
				t.Fatalf("data %v", r.data)
			}
			w.do(req{method: "GET", path: "/ops/batches?cursor=bad", user: "olivia"}).want(t, 400, "INVALID_ARGUMENT")
			w.do(req{method: "GET", path: "/ops/batches?limit=0", user: "olivia"}).want(t, 400, "INVALID_ARGUMENT")
		})
		t.Run("config: every item, masked, with source and fall-back", func(t *testing.T) {
			r := w.do(req{method: "GET", path: "/ops/config", user: "olivia"})
			r.want(t, 200, "OK")
			if strings.Contains(r.raw, cbToken) || strings.Contains(r.raw, "local-committer-token") {
				t.Fatal("a secret leaked")
			}
			items := r.data["items"].([]any)
			found := false
			for _, it := range items {
				m := it.(map[string]any)
				if m["key"] == "workflow.approveFirst" {
					found = m["value"] == "true" && m["source"] != nil
				}
			}
			if !found || len(items) < 20 {
				t.Fatalf("items %d, approveFirst found %v", len(items), found)
			}
			recs, _ := st.AuditListByResource(ctx, "config", 10)
			if len(recs) == 0 || recs[0].Actor != "olivia" {
				t.Fatalf("config read not audited: %+v", recs)
			}
		})
	})
}
