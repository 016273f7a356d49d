package httpapi

import (
	"testing"

	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// TestMe: GET /api/me names the caller and says whether the Operations
// tab is theirs — true only for a holder of the console's read rules, and
// false whenever the permission service cannot say (fail closed).
func TestMe(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st)
		for _, c := range []struct {
			user, account string
			operations    bool
		}{
			{"alice", "alice", false},
			{"E10024", "bob", false},
			{"olivia", "olivia", true},
			{"adam", "adam", true},
		} {
			t.Run("me200 "+c.user, func(t *testing.T) {
				r := w.do(req{method: "GET", path: "/api/me", user: c.user})
				r.want(t, 200, "OK")
				if r.data["account"] != c.account || r.data["operations"] != c.operations {
					t.Fatalf("%s: %v, want account %s operations %v", c.user, r.data, c.account, c.operations)
				}
				if got := r.header.Get("Cache-Control"); got != "no-store" {
					t.Fatalf("Cache-Control %q", got)
				}
			})
		}
		t.Run("me401", func(t *testing.T) {
			w.do(req{method: "GET", path: "/api/me"}).want(t, 401, "UNAUTHENTICATED")
		})
		t.Run("permission service down: no Operations tab, and the console still refuses", func(t *testing.T) {
			w.load(map[string]any{"permission.baseURL": "http://127.0.0.1:1/"})
			defer w.load(nil)
			r := w.do(req{method: "GET", path: "/api/me", user: "olivia"})
			r.want(t, 200, "OK")
			if r.data["operations"] != false {
				t.Fatalf("operations %v with the permission service down, want false", r.data["operations"])
			}
			w.do(req{method: "GET", path: "/ops/batches", user: "olivia"}).want(t, 403, "ACCESS_DENIED")
		})
		t.Run("the rules come from the configuration in force", func(t *testing.T) {
			w.load(map[string]any{"authz.routes.ops-request-get.rules": []any{"admin"}})
			defer w.load(nil)
			r := w.do(req{method: "GET", path: "/api/me", user: "olivia"})
			if r.data["operations"] != false {
				t.Fatalf("olivia holds ops.read only, the route now asks for admin: operations %v", r.data["operations"])
			}
		})
	})
}
