package httpapi

import (
	"strings"
	"testing"

	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

func TestStats(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st, withOverlay(map[string]any{"ratelimit.stats.limit": 3}))
		for i, tk := range []string{tOpen, tRace} {
			w.do(req{method: "POST", path: "/api/requests", user: "alice", body: submitBodyFor(tk, "r", `,"days":1`)}).want(t, 202, "ACCEPTED")
			if i == 0 {
				page, _ := st.OperationListBySubject(t.Context(), store.OperationListBySubjectParams{Subject: "alice", Limit: 1})
				if _, err := st.BatchAdmit(t.Context(), page.Items[0].OperationID, 1); err != nil {
					t.Fatal(err)
				}
			}
		}
		t.Run("stats200: a bare object with real counts", func(t *testing.T) {
			r := w.do(req{method: "GET", path: "/api/stats", user: "alice"})
			if r.status != 200 || strings.TrimSpace(r.raw) != `{"pending":1,"mine":2}` {
				t.Fatalf("%d %s", r.status, r.raw)
			}
			r = w.do(req{method: "GET", path: "/api/stats", user: "bob"})
			if r.status != 200 || strings.TrimSpace(r.raw) != `{"pending":1,"mine":0}` {
				t.Fatalf("%d %s", r.status, r.raw)
			}
		})
		t.Run("stats401: the envelope", func(t *testing.T) {
			w.do(req{method: "GET", path: "/api/stats"}).want(t, 401, "UNAUTHENTICATED")
		})
		t.Run("stats429: the envelope, with Retry-After", func(t *testing.T) {
			for range 2 { // alice used one of 3 above
				w.do(req{method: "GET", path: "/api/stats", user: "alice"})
			}
			r := w.do(req{method: "GET", path: "/api/stats", user: "alice"})
			r.want(t, 429, "RATE_LIMITED")
			if r.header.Get("Retry-After") == "" {
				t.Fatal("no Retry-After")
			}
		})
	})
}
