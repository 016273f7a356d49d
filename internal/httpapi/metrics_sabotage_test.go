package httpapi

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// TestSabotagedMetricsChangeNoResponse proves the metrics rules across the whole
// server: two identical worlds, one whose every HTTP and business metric
// recorder panics, answer the same sequence of requests — every route
// kind, success and failure, user, ops, callbacks, unmatched — with the
// same status, headers and body. Only what differs by construction is
// normalized: the request id, and timestamps written by each world's own
// database clock.
func TestSabotagedMetricsChangeNoResponse(t *testing.T) {
	world := func(sabotage bool) *bizWorld {
		st := storetest.Open(t, store.DriverSQLite)
		return newBizWorld(t, st, func(w *bizWorld, _ *Deps) {
			if sabotage {
				w.metrics.Sabotage()
			}
		})
	}
	plain, broken := world(false), world(true)
	submit := `{"targetKey":"payments-db-readonly","reason":"incident 42","days":3}`
	steps := []req{
		{method: "GET", path: "/healthz"},
		{method: "GET", path: "/readyz"},
		{method: "GET", path: "/api/nothing-here", user: "alice"},
		{method: "DELETE", path: "/api/targets", user: "alice"},
		{method: "GET", path: "/api/targets"},
		{method: "GET", path: "/api/targets", user: "alice@corp.example"},
		{method: "POST", path: "/api/requests", body: `{bad json`},
		{method: "POST", path: "/api/requests", user: "alice", body: `{bad json`},
		{method: "POST", path: "/api/requests", user: "alice", body: submit, header: map[string]string{"Idempotency-Key": "sab-1"}},
		{method: "POST", path: "/api/requests", user: "E10023", body: submit, header: map[string]string{"Idempotency-Key": "sab-1"}},
		{method: "POST", path: "/api/requests", user: "alice", body: `{"targetKey":"legacy-ftp","reason":"x"}`},
		{method: "GET", path: "/api/requests/sab-1", user: "alice"},
		{method: "GET", path: "/api/requests/sab-1", user: "bob"},
		{method: "GET", path: "/api/requests?limit=5", user: "alice"},
		{method: "GET", path: "/api/stats", user: "alice"},
		{method: "GET", path: "/api/stats"},
		{method: "GET", path: "/ops/config", user: "bob"},
		{method: "GET", path: "/ops/requests/sab-1", user: "olivia"},
		{method: "GET", path: "/ops/batches", user: "olivia"},
		{method: "POST", path: "/callbacks/approval", body: `{}`},
		{method: "POST", path: "/callbacks/deploy", body: `{"requestId":"d-1","project":1,"mrIid":7,"status":"SUCCESS"}`,
			header: map[string]string{"X-Callback-Token": cbToken}},
	}
	stamp := regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z`)
	norm := func(s string) string { return stamp.ReplaceAllString(s, "<time>") }
	headers := func(h http.Header) string {
		var out []string
		for k, vs := range h {
			if k == "X-Request-Id" || k == "Date" {
				continue
			}
			out = append(out, k+": "+strings.Join(vs, ","))
		}
		slices.Sort(out)
		return strings.Join(out, "\n")
	}
	for _, r := range steps {
		a, b := plain.do(r), broken.do(r)
		name := r.method + " " + r.path + " as " + r.user
		t.Logf("%s → %d %s", name, a.status, a.env.Code)
		if a.status != b.status || norm(a.raw) != norm(b.raw) || headers(a.header) != headers(b.header) {
			t.Fatalf("%s differs with sabotaged metrics:\nplain  %d %s\n%s\nbroken %d %s\n%s",
				name, a.status, a.raw, headers(a.header), b.status, b.raw, headers(b.header))
		}
	}
	if !strings.Contains(broken.logs.String(), "metric failed") {
		t.Fatal("the sabotaged world never hit a failing recorder; the test proves nothing")
	}
}
