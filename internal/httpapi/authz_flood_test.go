package httpapi

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"changeflow/internal/config"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// checksOf counts the permission service's checks about subject.
func (w *bizWorld) checksOf(subject string) int {
	n := 0
	for _, c := range w.perm.Checks() {
		if c.Subject == subject {
			n++
		}
	}
	return n
}

// TestPermissionChecksCostAnAttackerLittle performs the attack: bob, who
// holds no operations rule, sends 100 GET /api/me and 100 POST
// /ops/reconcile. Before, all 200 reached the permission service and
// nothing answered 429 — a flood that slows the service trips its
// breaker, which denies every operator. Now his calls spend the authz
// bucket (120 per window) ahead of authorization, so the rest are 429
// before the service is asked, and the cache answers his repeated checks:
// the service sees one check per rule set. An operator still gets
// through. With the cache off (authz.cacheTTL 0) the bucket alone bounds
// the checks to the bucket's worth.
func TestPermissionChecksCostAnAttackerLittle(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		for _, c := range []struct {
			name  string
			kv    map[string]any
			cache bool
		}{
			{"with the cache (default 30s)", nil, true},
			{"with the cache off", map[string]any{"authz.cacheTTL": "0s"}, false},
		} {
			t.Run(c.name, func(t *testing.T) {
				w := newBizWorld(t, st, withOpsActions(), withOverlay(c.kv))
				limit, _, _ := w.cfg.Current().RateLimit(config.BucketAuthz)
				if limit != 120 {
					t.Fatalf("ratelimit.authz.limit defaults to %d, want 120", limit)
				}
				limited := 0
				start := time.Now()
				for i := range 200 {
					r := req{method: "GET", path: "/api/me", user: "bob"}
					if i%2 == 1 {
						r = req{method: "POST", path: "/ops/reconcile", user: "bob", body: `{}`}
					}
					got := w.do(r)
					switch {
					case i < limit && r.path == "/api/me":
						got.want(t, 200, "OK")
						if got.data["operations"] != false {
							t.Fatalf("bob's /api/me %v", got.data)
						}
					case i < limit:
						got.want(t, 403, "ACCESS_DENIED")
					default:
						got.want(t, 429, "RATE_LIMITED")
						if got.header.Get("Retry-After") == "" || got.env.Message != authzRateMessage {
							t.Fatalf("429 %q, Retry-After %q", got.env.Message, got.header.Get("Retry-After"))
						}
						limited++
					}
				}
				checks := w.checksOf("bob")
				// With the cache: one check per rule set (bob's two routes ask
				// two sets) per life of a deny (10s, the real clock), so two
				// unless the machine took longer than that for the flood.
				maxChecks := limit
				if c.cache {
					maxChecks = 2 * (1 + int(time.Since(start)/permCacheDenyCap))
				}
				if limited != 200-limit || checks > maxChecks || checks < 2 {
					t.Fatalf("%d of bob's 200 calls refused with 429, %d checks reached the permission service (want %d refused, at most %d checks)",
						limited, checks, 200-limit, maxChecks)
				}
				// An operator is not affected: her own bucket, her own answers.
				w.do(req{method: "GET", path: "/api/me", user: "olivia"}).want(t, 200, "OK")
				w.do(req{method: "POST", path: "/ops/reconcile", user: "olivia", body: `{}`}).want(t, 200, "OK")
				w.do(req{method: "GET", path: "/ops/config", user: "olivia"}).want(t, 200, "OK")
			})
		}
	})
}

// fakeChecker answers from grants and counts its calls; fail makes every
// call fail.
type fakeChecker struct {
	mu     sync.Mutex
	grants map[string][]string
	fail   bool
	calls  int
}

func (f *fakeChecker) Check(_ context.Context, subject string, codes []string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.fail {
		return nil, errors.New("permission service down")
	}
	return f.grants[subject], nil
}

func (f *fakeChecker) set(subject string, codes ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.grants[subject] = codes
}

func (f *fakeChecker) down(fail bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = fail
}

func (f *fakeChecker) n() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// TestPermissionCacheRules: what the cache keeps, for how long, and what
// it never does (serve a deny longer than an allow, cache a failure,
// serve an expired answer while the service is down, grow without bound).
func TestPermissionCacheRules(t *testing.T) {
	read, write := []string{"ops.read", "admin"}, []string{"ops.write", "admin"}
	// The TTL is what *ttl says; each change of it is a new generation
	// (a reload), as a new snapshot is in the server.
	type knob struct {
		mu  sync.Mutex
		ttl time.Duration
		gen int
	}
	setup := func(ttl time.Duration) (*cachedPermissions, *fakeChecker, *testClock, func(time.Duration)) {
		f := &fakeChecker{grants: map[string][]string{"olivia": {"ops.read"}}}
		clock := newTestClock()
		k := &knob{ttl: ttl}
		reload := func(d time.Duration) { k.mu.Lock(); k.ttl, k.gen = d, k.gen+1; k.mu.Unlock() }
		return newCachedPermissions(f, func() (time.Duration, any) { k.mu.Lock(); defer k.mu.Unlock(); return k.ttl, k.gen }, clock.Now), f, clock, reload
	}
	ask := func(t *testing.T, c *cachedPermissions, subject string, codes []string) []string {
		t.Helper()
		g, err := c.Check(t.Context(), subject, codes)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}

	t.Run("an allow is reused for the TTL, then asked again", func(t *testing.T) {
		c, f, clock, _ := setup(30 * time.Second)
		for range 5 {
			if g := ask(t, c, "olivia", read); fmt.Sprint(g) != "[ops.read]" {
				t.Fatalf("granted %v", g)
			}
		}
		clock.Advance(29 * time.Second)
		ask(t, c, "olivia", read)
		if f.n() != 1 {
			t.Fatalf("%d calls within the TTL", f.n())
		}
		clock.Advance(time.Second)
		ask(t, c, "olivia", read)
		if f.n() != 2 {
			t.Fatalf("%d calls after the TTL", f.n())
		}
	})
	t.Run("a deny is kept at most 10s and never longer than an allow", func(t *testing.T) {
		c, f, clock, reload := setup(30 * time.Second)
		ask(t, c, "bob", read)
		clock.Advance(9 * time.Second)
		ask(t, c, "bob", read)
		if f.n() != 1 {
			t.Fatalf("%d calls", f.n())
		}
		f.set("bob", "ops.read") // bob is given the rule
		clock.Advance(time.Second)
		if g := ask(t, c, "bob", read); fmt.Sprint(g) != "[ops.read]" || f.n() != 2 {
			t.Fatalf("10s after a deny bob got %v in %d calls", g, f.n())
		}
		reload(3 * time.Second) // a TTL below the cap bounds denies too
		ask(t, c, "carol", read)
		clock.Advance(3 * time.Second)
		ask(t, c, "carol", read)
		if f.n() != 4 {
			t.Fatalf("%d calls: a deny outlived a 3s TTL", f.n())
		}
	})
	t.Run("answers are per account and per rule codes", func(t *testing.T) {
		c, f, _, _ := setup(30 * time.Second)
		ask(t, c, "olivia", read)
		ask(t, c, "olivia", write)
		ask(t, c, "adam", read)
		ask(t, c, "olivia", []string{"admin", "ops.read"}) // the same set, in another order
		if f.n() != 3 {
			t.Fatalf("%d calls, want 3", f.n())
		}
	})
	t.Run("a failure is not cached, and a cached answer is served while the service is down until it expires", func(t *testing.T) {
		c, f, clock, _ := setup(30 * time.Second)
		ask(t, c, "olivia", read)
		f.down(true)
		clock.Advance(10 * time.Second)
		if g := ask(t, c, "olivia", read); fmt.Sprint(g) != "[ops.read]" {
			t.Fatalf("cached allow while down: %v", g)
		}
		if _, err := c.Check(t.Context(), "adam", read); err == nil {
			t.Fatal("a failed check answered")
		}
		clock.Advance(20 * time.Second)
		if _, err := c.Check(t.Context(), "olivia", read); err == nil {
			t.Fatal("an expired allow was served while the service is down")
		}
		f.down(false)
		calls := f.n()
		ask(t, c, "adam", read)
		if f.n() != calls+1 {
			t.Fatal("a failure was cached")
		}
	})
	t.Run("a reload empties the cache, 0 turns it off", func(t *testing.T) {
		c, f, _, reload := setup(30 * time.Second)
		ask(t, c, "olivia", read)
		ask(t, c, "olivia", read)
		reload(30 * time.Second) // any reload: the rules, the service, the TTL
		ask(t, c, "olivia", read)
		if f.n() != 2 {
			t.Fatalf("%d calls: an answer survived a reload", f.n())
		}
		reload(0)
		ask(t, c, "olivia", read)
		ask(t, c, "olivia", read)
		if f.n() != 4 || c.len() != 0 {
			t.Fatalf("cache off: %d calls, %d entries", f.n(), c.len())
		}
	})
	t.Run("the cache is bounded", func(t *testing.T) {
		c, _, _, _ := setup(time.Hour)
		for i := range permCacheMaxEntries + 500 {
			ask(t, c, "user"+strconv.Itoa(i), read)
		}
		if n := c.len(); n > permCacheMaxEntries {
			t.Fatalf("%d entries, bound %d", n, permCacheMaxEntries)
		}
	})
}
