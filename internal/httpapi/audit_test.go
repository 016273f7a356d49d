package httpapi

import (
	"encoding/json"
	"fmt"
	"net/url"
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

// TestLookalikesOfTheReservedOperatorAreDropped performs the attack of
// issue 13 finding 11: parameters whose names a reader of the audit trail
// takes for __authenticatedOperator, sent next to a real call. None may
// reach the parameters or the stored record; the server's own value is
// the only one.
func TestLookalikesOfTheReservedOperatorAreDropped(t *testing.T) {
	lookalikes := map[string]string{
		"exact":                 "__authenticatedOperator",
		"upper case":            "__AUTHENTICATEDOPERATOR",
		"zero-width space":      "__authenticated\u200bOperator",
		"zero-width joiner":     "__authen\u200dticatedOperator",
		"soft hyphen":           "__authenti\u00adcatedOperator",
		"bidi override":         "\u202e__authenticatedOperator",
		"BOM in front":          "\ufeff__authenticatedOperator",
		"trailing space":        "__authenticatedOperator ",
		"trailing no-break":     "__authenticatedOperator\u00a0",
		"leading tab":           "\t__authenticatedOperator",
		"Cyrillic a":            "__\u0430uthenticatedOperator",
		"Cyrillic e and o":      "__authent\u0456cat\u0435dOp\u0435rat\u043er",
		"Greek omicron":         "__authenticatedOperat\u03bfr",
		"fullwidth":             "\uff3f\uff3f\uff41uthenticatedOperator",
		"variation selector":    "__authenticated\ufe0fOperator",
		"one underscore":        "_authenticatedOperator",
		"no underscore":         "authenticatedOperator",
		"dashed":                "authenticated-operator",
		"dashed low line":       "\ufe4d\ufe4dauthenticatedOperator",
		"the cut marker forged": "__truncated",
		"reserved namespace":    "__anything",
	}
	client := map[string]any{"step": "merge"}
	for _, name := range lookalikes {
		client[name] = "adam"
	}
	got := opsParams(client, identity.Identity{Account: "olivia"})
	if len(got) != 2 || got["step"] != "merge" || got[OperatorParam] != "olivia" {
		t.Fatalf("params %v, want only step and the server's operator", got)
	}
	for what, name := range lookalikes {
		if name == OperatorParam {
			continue
		}
		if _, ok := got[name]; ok {
			t.Errorf("%s (%q) kept", what, name)
		}
	}
	stored := auditParams(got)
	if strings.Contains(stored, "adam") {
		t.Fatalf("a look-alike's value reached the record: %s", stored)
	}
	t.Run("ordinary names are kept", func(t *testing.T) {
		for _, name := range []string{"step", "operationId", "operator", "authenticated", "note_", "Schritt", "шаг", "reason"} {
			if reservedParam(name) {
				t.Errorf("%q dropped", name)
			}
		}
	})
}

// TestHugeParameterSetsAreCappedWithAMarker: 8,000 query parameters made a
// 247 KB audit row. The stored object stays within auditParamsMax, keeps
// the server's operator whatever sorts before it, and says how many
// parameters it left out.
func TestHugeParameterSetsAreCappedWithAMarker(t *testing.T) {
	client := map[string]any{}
	for i := range 8000 {
		client[fmt.Sprintf("a%05d", i)] = strings.Repeat("v", 20)
	}
	got := auditParams(opsParams(client, identity.Identity{Account: "olivia"}))
	if len(got) > auditParamsMax {
		t.Fatalf("stored params are %d bytes, cap %d", len(got), auditParamsMax)
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(got), &m); err != nil {
		t.Fatal(err)
	}
	if m[OperatorParam] != "olivia" {
		t.Fatalf("operator lost in the cut: %v", m[OperatorParam])
	}
	kept := len(m) - 2
	want := fmt.Sprintf("%d of 8001 parameters left out", 8000-kept)
	if m[auditCutParam] != want || kept < 100 {
		t.Fatalf("marker %q with %d kept, want %q", m[auditCutParam], kept, want)
	}
	t.Run("a small call is not marked", func(t *testing.T) {
		got := auditParams(opsParams(map[string]any{"step": "merge"}, identity.Identity{Account: "olivia"}))
		if strings.Contains(got, auditCutParam) {
			t.Fatalf("marked: %s", got)
		}
	})
	t.Run("values full of characters JSON escapes stay within the cap", func(t *testing.T) {
		client := map[string]any{}
		for i := range 500 {
			client[fmt.Sprintf("k%03d", i)] = strings.Repeat("<\"\x01", 80)
		}
		if got := auditParams(client); len(got) > auditParamsMax || !strings.Contains(got, auditCutParam) {
			t.Fatalf("%d bytes, marker %v", len(got), strings.Contains(got, auditCutParam))
		}
	})
}

func TestLookalikeOperatorInAnOpsCallIsNotStored(t *testing.T) {
	w := newAuthzWorld(t, nil)
	q := url.Values{}
	for _, name := range []string{"__\u0430uthenticatedOperator", "__authenticatedOperator ", "__authenticated\u200bOperator"} {
		q.Set(name, "adam")
	}
	body := `{"step":"merge","__authenticat\u0435dOperator":"adam"}`
	rec, env, _ := w.do(t, "POST", "/t/ops-write/op-9?"+q.Encode(), caller{user: "E10031"}, body)
	wantStatus(t, rec, env, 200)
	if len(w.audits.entries) != 1 {
		t.Fatalf("%d audit entries", len(w.audits.entries))
	}
	stored := w.audits.entries[0].Params
	var m map[string]string
	if err := json.Unmarshal([]byte(stored), &m); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stored, "adam") || m[OperatorParam] != "olivia" || m["step"] != "merge" {
		t.Fatalf("stored params %s", stored)
	}
}
