package httpapi

import (
	"fmt"
	"strconv"
	"testing"

	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// TestExpensiveReadsAndCallbacksAreLimitedByDefault performs the attack of
// issue 13 finding 14 with nothing configured but the built-in defaults:
// one caller hammering the preview (a GitLab read each), /api/stats (row
// counts), other people's operationIds (a permission check each) and the
// callbacks (from one address, with or without the right token). Each is
// refused with 429 and Retry-After at its default; other callers keep
// their own quota; the owner's own look-ups spend nothing of adminCheck.
func TestExpensiveReadsAndCallbacksAreLimitedByDefault(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st)
		exhaust := func(t *testing.T, limit int, r req) {
			t.Helper()
			for i := range limit {
				if got := w.do(r); got.status == 429 {
					t.Fatalf("%s %s refused at call %d of %d", r.method, r.path, i+1, limit)
				}
			}
			got := w.do(r)
			if got.status != 429 || (got.env.Code != "RATE_LIMITED" && r.path != "/api/stats") {
				t.Fatalf("%s %s call %d: %d %s, want 429 RATE_LIMITED", r.method, r.path, limit+1, got.status, got.env.Code)
			}
			if s, err := strconv.Atoi(got.header.Get("Retry-After")); err != nil || s < 1 {
				t.Fatalf("Retry-After %q", got.header.Get("Retry-After"))
			}
		}
		t.Run("preview: 30 per caller", func(t *testing.T) {
			exhaust(t, 30, req{method: "GET", path: "/api/targets/" + tOpen + "/preview", user: "alice"})
			w.do(req{method: "GET", path: "/api/targets/" + tOpen + "/preview", user: "bob"}).want(t, 200, "OK")
		})
		t.Run("stats: 60 per caller", func(t *testing.T) {
			exhaust(t, 60, req{method: "GET", path: "/api/stats", user: "alice"})
			if got := w.do(req{method: "GET", path: "/api/stats", user: "bob"}); got.status != 200 {
				t.Fatalf("bob's stats: %d", got.status)
			}
		})
		t.Run("admin checks on other people's operationIds: 30 per caller", func(t *testing.T) {
			// The cache off, so that every look-up the bucket lets through
			// costs a check and the bucket alone bounds them; with the cache
			// on (below) the same look-ups cost one.
			w.load(map[string]any{"authz.cacheTTL": "0s"})
			defer w.load(nil)
			w.do(req{method: "POST", path: "/api/requests", user: "bob", body: submitBodyFor(tOpen, "mine", ""),
				header: map[string]string{"Idempotency-Key": "k-rl-bob"}}).want(t, 202, "ACCEPTED")
			// bob reading his own request costs no permission check and no quota.
			for range 40 {
				w.do(req{method: "GET", path: "/api/requests/k-rl-bob", user: "bob"}).want(t, 200, "OK")
			}
			before := len(w.perm.Checks())
			for i := range 30 {
				// Someone else's id, and ids that do not exist, alike.
				id := "k-rl-bob"
				if i%2 == 1 {
					id = fmt.Sprintf("k-rl-missing-%d", i)
				}
				w.do(req{method: "GET", path: "/api/requests/" + id, user: "alice"}).want(t, 404, "NOT_FOUND")
			}
			for _, id := range []string{"k-rl-bob", "k-rl-missing-x"} {
				w.do(req{method: "GET", path: "/api/requests/" + id, user: "alice"}).want(t, 429, "RATE_LIMITED")
			}
			if n := len(w.perm.Checks()) - before; n != 30 {
				t.Fatalf("%d permission checks for alice's 32 look-ups, want 30", n)
			}
			w.do(req{method: "GET", path: "/api/requests/k-rl-bob", user: "bob"}).want(t, 200, "OK")

			w.load(nil) // authz.cacheTTL back to its default, 30s
			before = len(w.perm.Checks())
			for i := range 30 {
				w.do(req{method: "GET", path: fmt.Sprintf("/api/requests/k-rl-missing-o%d", i), user: "olivia"}).want(t, 404, "NOT_FOUND")
			}
			if n := len(w.perm.Checks()) - before; n != 1 {
				t.Fatalf("%d permission checks for olivia's 30 look-ups with the cache on, want 1", n)
			}
		})
		t.Run("callbacks: 600 per source address, spent before the token is checked", func(t *testing.T) {
			exhaust(t, 600, req{method: "POST", path: "/callbacks/deploy", body: `{}`, header: map[string]string{"X-Callback-Token": "forged"}})
			w.do(req{method: "POST", path: "/callbacks/approval", body: `{}`, header: map[string]string{"X-Callback-Token": cbToken}}).want(t, 429, "RATE_LIMITED")
			w.do(req{method: "POST", path: "/callbacks/gitlab", body: `{}`, header: map[string]string{"X-Gitlab-Token": hookToken}}).want(t, 429, "RATE_LIMITED")
		})
	})
}
