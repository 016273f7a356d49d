package httpapi

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// TestOpsAccess: GET /ops/access answers who had access to a target, or
// what a person had, at an instant, and GET /ops/access/history every
// period of a target overlapping a window, each period in the API's
// shape (until null while open, what is unknown null, times in UTC);
// a request's detail links the period it opened; bad or missing
// parameters are a 400 in words; every route needs ops.read.
func TestOpsAccess(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st)
		w.do(req{method: "POST", path: "/api/requests", user: "bob", body: submitBodyFor(tOpen, "r", ""),
			header: map[string]string{"Idempotency-Key": "op-acc-1"}}).want(t, 202, "ACCEPTED")
		d := st.Dialect()
		t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
		ins := func(subject, target string, from, until time.Time, op, approval string, mr any) {
			t.Helper()
			var u any
			if !until.IsZero() {
				u = d.Time(until)
			}
			var ap any
			if approval != "" {
				ap = approval
			}
			if _, err := st.DB().ExecContext(t.Context(),
				"INSERT INTO access_interval (subject, target_key, from_at, until_at, source, operation_id, approval_id, mr_iid) VALUES (?, ?, ?, ?, 'changeflow', ?, ?, ?)",
				subject, target, d.Time(from), u, op, ap, mr); err != nil {
				t.Fatal(err)
			}
		}
		// alice: a grant then its renewal, still open; bob: one ended period.
		ins("alice", tOpen, t0, t0.Add(24*time.Hour), "op-a1", "appr-1", 7)
		ins("alice", tOpen, t0.Add(24*time.Hour), time.Time{}, "op-a2", "appr-2", nil)
		ins("bob", tOpen, t0.Add(time.Hour), t0.Add(2*time.Hour), "op-acc-1", "", 9)
		ins("alice", "billing-dashboard", t0, time.Time{}, "op-a3", "", nil)

		get := func(path string, q url.Values) resp {
			return w.do(req{method: "GET", path: path + "?" + q.Encode(), user: "olivia"})
		}
		items := func(r resp) []map[string]any {
			t.Helper()
			r.want(t, 200, "OK")
			var out []map[string]any
			for _, it := range r.data["items"].([]any) {
				out = append(out, it.(map[string]any))
			}
			return out
		}
		ops := func(its []map[string]any) string {
			var ids []string
			for _, it := range its {
				ids = append(ids, it["operationId"].(string))
			}
			return strings.Join(ids, ",")
		}

		// At 10:30 on March 1st: alice's grant and bob's period.
		at := items(get("/ops/access", url.Values{"target": {tOpen}, "at": {"2026-03-01T10:30:00Z"}}))
		if ops(at) != "op-a1,op-acc-1" {
			t.Fatalf("at 10:30: %v", at)
		}
		want := map[string]any{"subject": "alice", "targetKey": tOpen, "from": "2026-03-01T09:00:00Z", "until": "2026-03-02T09:00:00Z",
			"source": "changeflow", "operationId": "op-a1", "approvalId": "appr-1", "mrIid": float64(7), "mergeSha": nil}
		for k, v := range want {
			if at[0][k] != v {
				t.Fatalf("item %s = %v, want %v (%v)", k, at[0][k], v, at[0])
			}
		}
		if at[1]["approvalId"] != nil || at[1]["until"] != "2026-03-01T11:00:00Z" {
			t.Fatalf("bob's item %v", at[1])
		}
		// An offset names the same instant; the boundary belongs to the renewal.
		at = items(get("/ops/access", url.Values{"target": {tOpen}, "at": {"2026-03-02T10:00:00+01:00"}}))
		if ops(at) != "op-a2" || at[0]["until"] != nil || at[0]["mrIid"] != nil {
			t.Fatalf("at the renewal's start: %v", at)
		}
		if r := get("/ops/access", url.Values{"target": {tOpen}, "at": {"2026-03-02T10:00:00+01:00"}}); r.data["at"] != "2026-03-02T09:00:00Z" {
			t.Fatalf("at in UTC: %v", r.data["at"])
		}
		if at := items(get("/ops/access", url.Values{"target": {tOpen}, "at": {"2026-03-01T08:59:59Z"}})); len(at) != 0 {
			t.Fatalf("before every period: %v", at)
		}
		// What alice had, by target.
		at = items(get("/ops/access", url.Values{"subject": {"alice"}, "at": {"2030-01-01T00:00:00Z"}}))
		if ops(at) != "op-a3,op-a2" {
			t.Fatalf("alice in 2030: %v", at)
		}

		// The history of a window, oldest first; limit and more.
		hist := get("/ops/access/history", url.Values{"target": {tOpen}, "from": {"2026-03-01T09:30:00Z"}, "to": {"2026-03-03T00:00:00Z"}})
		if its := items(hist); ops(its) != "op-a1,op-acc-1,op-a2" || hist.data["more"] != false {
			t.Fatalf("history: %v", hist.data)
		}
		hist = get("/ops/access/history", url.Values{"target": {tOpen}, "from": {"2026-03-01T09:30:00Z"}, "to": {"2026-03-03T00:00:00Z"}, "limit": {"2"}})
		if its := items(hist); ops(its) != "op-a1,op-acc-1" || hist.data["more"] != true {
			t.Fatalf("history, limit 2: %v", hist.data)
		}
		hist = get("/ops/access/history", url.Values{"target": {tOpen}, "from": {"2026-03-01T11:00:00Z"}, "to": {"2026-03-01T12:00:00Z"}})
		if its := items(hist); ops(its) != "op-a1" {
			t.Fatalf("history [11:00, 12:00), bob's ended at 11:00: %v", hist.data)
		}

		// The request's detail links its period.
		r := w.do(req{method: "GET", path: "/ops/requests/op-acc-1", user: "olivia"})
		r.want(t, 200, "OK")
		if a, _ := r.data["access"].(map[string]any); a == nil || a["from"] != "2026-03-01T10:00:00Z" || a["operationId"] != "op-acc-1" {
			t.Fatalf("detail's access: %v", r.data["access"])
		}

		for _, c := range []struct {
			path string
			q    url.Values
			word string
		}{
			{"/ops/access", url.Values{"target": {tOpen}}, "at is required"},
			{"/ops/access", url.Values{"target": {tOpen}, "at": {"yesterday"}}, `at must be an RFC 3339 time such as 2026-03-01T09:30:00Z; "yesterday" is not`},
			{"/ops/access", url.Values{"target": {tOpen}, "at": {"2026-03-01"}}, "at must be an RFC 3339 time"},
			{"/ops/access", url.Values{"at": {"2026-03-01T00:00:00Z"}}, "Name exactly one of target"},
			{"/ops/access", url.Values{"target": {tOpen}, "subject": {"alice"}, "at": {"2026-03-01T00:00:00Z"}}, "Name exactly one of target"},
			{"/ops/access/history", url.Values{"from": {"2026-03-01T00:00:00Z"}, "to": {"2026-03-02T00:00:00Z"}}, "target is required"},
			{"/ops/access/history", url.Values{"target": {tOpen}, "to": {"2026-03-02T00:00:00Z"}}, "from is required"},
			{"/ops/access/history", url.Values{"target": {tOpen}, "from": {"2026-03-02T00:00:00Z"}, "to": {"2026-03-02T00:00:00Z"}}, "to must be after from"},
			{"/ops/access/history", url.Values{"target": {tOpen}, "from": {"2026-03-01T00:00:00Z"}, "to": {"2026-03-02T00:00:00Z"}, "limit": {"1001"}}, "limit must be a number from 1 to 1000"},
		} {
			r := get(c.path, c.q)
			r.want(t, 400, "INVALID_ARGUMENT")
			if !strings.Contains(r.env.Message, c.word) {
				t.Fatalf("%s?%s: message %q, want %q", c.path, c.q.Encode(), r.env.Message, c.word)
			}
		}
		for _, path := range []string{"/ops/access?target=x&at=2026-03-01T00:00:00Z", "/ops/access/history?target=x&from=2026-03-01T00:00:00Z&to=2026-03-02T00:00:00Z"} {
			w.do(req{method: "GET", path: path}).want(t, 401, "UNAUTHENTICATED")
			w.do(req{method: "GET", path: path, user: "alice"}).want(t, 403, "ACCESS_DENIED")
		}
	})
}
