package httpapi

import (
	"testing"

	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// TestOpsSecurityEvents: GET /ops/security-events lists the security
// events the workflow recorded (audit records security.<kind>), newest
// first, with their params unpacked, and nothing else of the audit log;
// limit bounds it; a caller without ops.read is refused.
func TestOpsSecurityEvents(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st)
		ctx := t.Context()
		for _, p := range []store.AuditInsertParams{
			{Key: "security:foreign_branch:op-1", Actor: "changeflow", Action: "security.foreign_branch", Resource: "op-1",
				Params: `{"branch":"changeflow/op-op-1","sha":"abc","why":"commit abc is by Dev Eloper"}`, Outcome: "REFUSED"},
			{Key: "other", Actor: "olivia", Action: "ops-request-get", Resource: "op-1", Outcome: "OK"},
			{Key: "security:foreign_head:batch-2", Actor: "changeflow", Action: "security.foreign_head", Resource: "batch-2",
				Params: `{"mrIid":7,"branch":"changeflow/batch-2","sha":"def","why":"the change touches bindings/sneak.yaml"}`, Outcome: "REFUSED"},
		} {
			if _, err := st.AuditInsert(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		r := w.do(req{method: "GET", path: "/ops/security-events", user: "olivia"})
		r.want(t, 200, "OK")
		items, _ := r.data["items"].([]any)
		if len(items) != 2 {
			t.Fatalf("want the 2 security events, got %s", r.raw)
		}
		first, _ := items[0].(map[string]any)
		if first["kind"] != "foreign_head" || first["resource"] != "batch-2" || first["mrIid"] != float64(7) ||
			first["why"] != "the change touches bindings/sneak.yaml" || first["branch"] != "changeflow/batch-2" {
			t.Fatalf("newest first, params unpacked: %v", first)
		}
		if second, _ := items[1].(map[string]any); second["kind"] != "foreign_branch" || second["sha"] != "abc" {
			t.Fatalf("second: %v", second)
		}
		r = w.do(req{method: "GET", path: "/ops/security-events?limit=1", user: "olivia"})
		r.want(t, 200, "OK")
		if items, _ := r.data["items"].([]any); len(items) != 1 {
			t.Fatalf("limit=1: %s", r.raw)
		}
		w.do(req{method: "GET", path: "/ops/security-events?limit=0", user: "olivia"}).want(t, 400, "INVALID_ARGUMENT")
		w.do(req{method: "GET", path: "/ops/security-events", user: "bob"}).want(t, 403, "ACCESS_DENIED")
	})
}
