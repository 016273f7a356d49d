package httpapi

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"changeflow/internal/config"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// streamRefusal reads a non-200 stream answer's envelope.
func streamRefusal(t *testing.T, resp *http.Response) Envelope {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var env Envelope
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatalf("%d %s: %v", resp.StatusCode, b, err)
	}
	return env
}

// TestStreamsPerCallerAreBounded performs the attack: alice opens a
// thousand live-status streams of her own request. Before, every one got
// 200 (and held a connection and a goroutine) until the instance's
// events.maxStreams was taken and bob's stream got 503. Now her sixth and
// every later one is 429 RATE_LIMITED with Retry-After, bob still gets
// his, a stream that ends gives its slot back, and at shutdown every slot
// is given back.
func TestStreamsPerCallerAreBounded(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		var feed *EventFeed
		// The opening rate is proven below; here it must not be what refuses.
		w := newBizWorld(t, st, withEventFeed(&feed, func(st *store.Store) VersionReader { return st }),
			withOverlay(map[string]any{"ratelimit.events.limit": 100000, "events.pollInterval": "50ms"}))
		ts := httptest.NewServer(w.h)
		t.Cleanup(ts.Close)
		for user, id := range map[string]string{"alice": "sl-alice", "bob": "sl-bob"} {
			w.do(req{method: "POST", path: "/api/requests", user: user, body: submitBodyFor(tOpen, "live", ""),
				header: map[string]string{"Idempotency-Key": id}}).want(t, 202, "ACCEPTED")
		}
		if got := w.cfg.Current().Events().MaxStreamsPerCaller; got != 5 {
			t.Fatalf("events.maxStreamsPerCaller defaults to %d, want 5", got)
		}

		var open []*sseStream
		refused := 0
		for i := range 1000 {
			s, resp := openStream(t, ts, "/api/requests/sl-alice/events", "alice", nil)
			if i < 5 {
				if s == nil {
					t.Fatalf("alice's stream %d: %d", i+1, resp.StatusCode)
				}
				s.next(t)
				open = append(open, s)
				continue
			}
			if s != nil {
				t.Fatalf("alice's stream %d was opened; at most 5 per caller", i+1)
			}
			env := streamRefusal(t, resp)
			if resp.StatusCode != http.StatusTooManyRequests || env.Code != "RATE_LIMITED" || env.Message == "" {
				t.Fatalf("alice's stream %d: %d %s %q, want 429 RATE_LIMITED", i+1, resp.StatusCode, env.Code, env.Message)
			}
			if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 {
				t.Fatalf("Retry-After %q", resp.Header.Get("Retry-After"))
			}
			refused++
		}
		if refused != 995 || feed.callerStreams("alice") != 5 {
			t.Fatalf("%d refused, alice holds %d", refused, feed.callerStreams("alice"))
		}

		// bob is not affected by alice's flood.
		bob, resp := openStream(t, ts, "/api/requests/sl-bob/events", "bob", nil)
		if bob == nil {
			t.Fatalf("bob's stream: %d", resp.StatusCode)
		}
		bob.next(t)

		// A stream that ends (its client goes) gives its slot back.
		_ = open[0].resp.Body.Close()
		deadline := time.Now().Add(20 * time.Second)
		for feed.callerStreams("alice") != 4 {
			if time.Now().After(deadline) {
				t.Fatalf("alice still holds %d streams after closing one", feed.callerStreams("alice"))
			}
			time.Sleep(10 * time.Millisecond)
		}
		again, resp := openStream(t, ts, "/api/requests/sl-alice/events", "alice", nil)
		if again == nil {
			t.Fatalf("after one ended: %d", resp.StatusCode)
		}
		again.next(t)

		// Shutdown ends every stream and gives every slot back.
		feed.Close()
		for _, s := range append(open[1:], again, bob) {
			select {
			case <-s.ended:
			case <-time.After(20 * time.Second):
				t.Fatal("a stream outlived the feed's close")
			}
		}
		for deadline := time.Now().Add(20 * time.Second); feed.callerStreams("alice")+feed.callerStreams("bob") != 0; {
			if time.Now().After(deadline) {
				t.Fatalf("after close alice holds %d, bob %d", feed.callerStreams("alice"), feed.callerStreams("bob"))
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// TestOpeningStreamsIsRateLimited: opening a stream spends the caller's
// "events" bucket (30 per window by default), before authorization, so a
// client that opens and drops streams in a loop — each opening reads the
// request and its history — is refused with 429 and Retry-After; another
// caller is not. Before, every opening was served.
func TestOpeningStreamsIsRateLimited(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		var feed *EventFeed
		w := newBizWorld(t, st, withEventFeed(&feed, func(st *store.Store) VersionReader { return st }))
		for user, id := range map[string]string{"alice": "or-alice", "bob": "or-bob"} {
			w.do(req{method: "POST", path: "/api/requests", user: user, body: submitBodyFor(tOpen, "live", ""),
				header: map[string]string{"Idempotency-Key": id}}).want(t, 202, "ACCEPTED")
		}
		limit, _, _ := w.cfg.Current().RateLimit(config.BucketEvents)
		if limit != 30 {
			t.Fatalf("ratelimit.events.limit defaults to %d, want 30", limit)
		}
		// Each stream ends at its first write (the handler returns, its slot
		// is free), so only the opening rate can refuse.
		for i := range limit {
			if got := w.do(req{method: "GET", path: "/api/requests/or-alice/events", user: "alice", stream: true}); got.status != 200 {
				t.Fatalf("opening %d: %d %s", i+1, got.status, got.raw)
			}
		}
		got := w.do(req{method: "GET", path: "/api/requests/or-alice/events", user: "alice", stream: true})
		got.want(t, 429, "RATE_LIMITED")
		if got.env.Message != eventsOpenMessage || got.header.Get("Retry-After") == "" {
			t.Fatalf("429 %q, Retry-After %q", got.env.Message, got.header.Get("Retry-After"))
		}
		// Spent before authorization: someone else's id is refused the same.
		w.do(req{method: "GET", path: "/api/requests/or-bob/events", user: "alice", stream: true}).want(t, 429, "RATE_LIMITED")
		if got := w.do(req{method: "GET", path: "/api/requests/or-bob/events", user: "bob", stream: true}); got.status != 200 {
			t.Fatalf("bob: %d %s", got.status, got.raw)
		}
	})
}

// TestStreamCounterRace: many goroutines of one caller open and end
// subscriptions at once; the caller never holds more than the bound, the
// instance never more than its own, and once they are done every count
// is back to zero (no slot lost, none given back twice).
func TestStreamCounterRace(t *testing.T) {
	mgr, err := config.Load(t.Context(), config.Options{Overlay: map[string]any{"events.maxStreamsPerCaller": 3, "events.maxStreams": 8}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mgr.Close() })
	feed := NewEventFeed(nil, mgr.Current, nil)
	feed.mu.Lock()
	feed.running = true // no poller: this test is about the counts alone
	feed.mu.Unlock()

	var held [3]atomic.Int64 // per caller
	var total atomic.Int64
	var wg sync.WaitGroup
	var over atomic.Value
	callers := []string{"alice", "bob", "ip:192.0.2.7"}
	for g := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := g % len(callers)
			for range 300 {
				// Each goroutine holds up to two streams at once, across a
				// yield, so the callers' openings really overlap.
				var dones []func()
				for range 2 {
					_, done, err := feed.subscribe("op-"+strconv.Itoa(g%4), callers[c])
					if err != nil {
						continue
					}
					dones = append(dones, done)
					if n := held[c].Add(1); n > 3 {
						over.Store(callers[c] + " held " + strconv.FormatInt(n, 10))
					}
					if n := total.Add(1); n > 8 {
						over.Store("the instance held " + strconv.FormatInt(n, 10))
					}
				}
				runtime.Gosched()
				for _, done := range dones {
					held[c].Add(-1)
					total.Add(-1)
					done()
					done() // ending twice gives the slot back once
				}
			}
		}()
	}
	wg.Wait()
	if v := over.Load(); v != nil {
		t.Fatal(v)
	}
	feed.mu.Lock()
	defer feed.mu.Unlock()
	if feed.streams != 0 || len(feed.callers) != 0 || len(feed.watched) != 0 {
		t.Fatalf("after every stream ended: %d streams, callers %v, %d watched", feed.streams, feed.callers, len(feed.watched))
	}
}
