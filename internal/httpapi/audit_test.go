package httpapi

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"changeflow/internal/config"
	"changeflow/internal/identity"
)

func TestOpsParamsServerSetsTheOperatorLast(t *testing.T) {
	client := map[string]any{"step": "merge", OperatorParam: "adam", "__AuthenticatedOperator": "adam"}
	got := opsParams(client, identity.Identity{Account: "olivia"})
	if got[OperatorParam] != "olivia" {
		t.Fatalf("a client-supplied %s must be replaced by the login identity, got %v", OperatorParam, got[OperatorParam])
	}
	if _, ok := got["__AuthenticatedOperator"]; ok {
		t.Fatal("a look-alike of the reserved name must be dropped")
	}
	if got["step"] != "merge" || len(got) != 2 {
		t.Fatalf("the client's other parameters are kept: %v", got)
	}
	if client[OperatorParam] != "adam" {
		t.Fatal("the client's map must not be modified")
	}
}

func TestAuditParamsAreMaskedAndTruncated(t *testing.T) {
	long := strings.Repeat("é", 1000)
	got := auditParams(map[string]any{
		"step":                   "merge",
		"apiToken":               "glpat-123",
		"Password":               "hunter2",
		"client_secret":          "s3cr3t",
		"Authorization":          "Bearer x",
		"note":                   long,
		"count":                  3,
		"nested":                 map[string]any{"token": "inner"},
		strings.Repeat("k", 400): "v",
	})
	var m map[string]string
	if err := json.Unmarshal([]byte(got), &m); err != nil {
		t.Fatalf("not a JSON object: %v: %s", err, got)
	}
	for _, k := range []string{"apiToken", "Password", "client_secret", "Authorization"} {
		if m[k] != "****" {
			t.Errorf("%s = %q, want masked", k, m[k])
		}
	}
	for _, leak := range []string{"glpat-123", "hunter2", "s3cr3t", "Bearer x", "inner"} {
		if strings.Contains(got, leak) {
			t.Errorf("audit params leak %q", leak)
		}
	}
	if m["step"] != "merge" || m["count"] != "3" {
		t.Errorf("plain values kept: %v", m)
	}
	if n := utf8.RuneCountInString(m["note"]); n != auditValueMax || !strings.HasSuffix(m["note"], "…") {
		t.Errorf("note has %d runes, want %d ending in …", n, auditValueMax)
	}
	for k := range m {
		if utf8.RuneCountInString(k) > auditValueMax {
			t.Errorf("key of %d runes kept", utf8.RuneCountInString(k))
		}
	}
	if m["nested"] != `{"token":"****"}` {
		t.Errorf("nested = %q, want the inner token masked", m["nested"])
	}
}

func TestOpsCallIsAuditedWithTheServerSetOperator(t *testing.T) {
	w := newAuthzWorld(t, nil)
	body := `{"step":"merge","__authenticatedOperator":"adam","token":"abc","note":"` + strings.Repeat("x", 300) + `"}`
	rec, env, _ := w.do(t, "POST", "/t/ops-write/op-7", caller{user: "E10031"}, body)
	wantStatus(t, rec, env, 200)
	params := env.Data.(map[string]any)["params"].(map[string]any)
	if params[OperatorParam] != "olivia" {
		t.Fatalf("handler's parameters carry operator %v, want olivia", params[OperatorParam])
	}
	if len(w.audits.entries) != 1 {
		t.Fatalf("%d audit entries", len(w.audits.entries))
	}
	e := w.audits.entries[0]
	if e.Actor != "olivia" || e.Action != config.RouteOpsRequestRetrigger || e.Resource != "op-7" || e.Outcome != "OK" {
		t.Fatalf("entry %+v", e)
	}
	var stored map[string]string
	if err := json.Unmarshal([]byte(e.Params), &stored); err != nil {
		t.Fatal(err)
	}
	if stored[OperatorParam] != "olivia" || stored["token"] != "****" || len(stored["note"]) > 3*auditValueMax {
		t.Fatalf("stored params %v", stored)
	}

	t.Run("a denied call reaches neither the handler nor the audit", func(t *testing.T) {
		rec, env, _ := w.do(t, "POST", "/t/ops-write/op-8", caller{user: "alice"}, body)
		wantStatus(t, rec, env, 403)
		if len(w.audits.entries) != 1 {
			t.Fatal("audited a denied call")
		}
	})
}
