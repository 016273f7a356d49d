package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/identity"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/flow"
	"changeflow/internal/workflow/lifecycle"
)

// countingVersions records every read of the feed: how many statements,
// and which ids each carried.
type countingVersions struct {
	st *store.Store
	mu sync.Mutex
	// calls holds the ids of each read.
	calls [][]string
}

func (c *countingVersions) OperationVersionsOf(ctx context.Context, ids []string) ([]store.OperationVersions, error) {
	c.mu.Lock()
	c.calls = append(c.calls, append([]string(nil), ids...))
	c.mu.Unlock()
	return c.st.OperationVersionsOf(ctx, ids)
}

func (c *countingVersions) reads() [][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([][]string(nil), c.calls...)
}

// withEventFeed gives the world a live-status feed over reader.
func withEventFeed(feed **EventFeed, reader func(*store.Store) VersionReader) worldOpt {
	return func(w *bizWorld, d *Deps) {
		*feed = NewEventFeed(reader(w.st), w.cfg.Current, nil)
		d.Business.Events = *feed
		w.t.Cleanup((*feed).Close)
	}
}

// sseEvent is one server-sent event.
type sseEvent struct {
	event, id, data string
}

// sseStream reads a stream's events on a goroutine.
type sseStream struct {
	resp   *http.Response
	events chan sseEvent
	ended  chan struct{}
}

// openStream opens GET path on ts as user; a non-200 answer is returned
// with a nil stream.
func openStream(t *testing.T, ts *httptest.Server, path, user string, header map[string]string) (*sseStream, *http.Response) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		r.Header.Set(identity.HeaderUser, user)
	}
	for k, v := range header {
		r.Header.Set(k, v)
	}
	resp, err := ts.Client().Do(r)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, resp
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	s := &sseStream{resp: resp, events: make(chan sseEvent, 64), ended: make(chan struct{})}
	go func() {
		defer close(s.ended)
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.event != "" {
					s.events <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "event: "):
				ev.event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "id: "):
				ev.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	return s, resp
}

// next waits for the stream's next event (the deadline only bounds a
// failing test; nothing is asserted about how fast it comes).
func (s *sseStream) next(t *testing.T) sseEvent {
	t.Helper()
	select {
	case ev := <-s.events:
		return ev
	case <-s.ended:
		t.Fatal("the stream ended")
	case <-time.After(20 * time.Second):
		t.Fatal("no event")
	}
	return sseEvent{}
}

// stepOf decodes the step of a "request" or "step" event.
func stepOf(t *testing.T, ev sseEvent) string {
	t.Helper()
	var v struct {
		Step *stepView `json:"step"`
		To   *stepView `json:"to"`
	}
	if err := json.Unmarshal([]byte(ev.data), &v); err != nil {
		t.Fatalf("event %s: %v: %s", ev.event, err, ev.data)
	}
	switch {
	case v.Step != nil:
		return v.Step.Name
	case v.To != nil:
		return v.To.Name
	}
	t.Fatalf("event %s without a step: %s", ev.event, ev.data)
	return ""
}

// TestRequestEventsAcrossInstances: two instances on one database. The
// owner's stream on A starts with the request's state; a change written
// by instance B (its own store, as B's engine would) is pushed by A as a
// "step" event and the new "request" state; a stream resumed with
// Last-Event-ID replays exactly the steps after it; A's feed reads the
// versions of every watched request in one statement per poll, however
// many streams watch; closing the feed (shutdown) ends the streams.
func TestRequestEventsAcrossInstances(t *testing.T) {
	for _, driver := range storetest.Drivers() {
		t.Run(driver, func(t *testing.T) {
			dsn := storetest.NewMigratedDatabase(t, driver)
			stA := storetest.OpenDSN(t, driver, dsn)
			if _, err := stA.Migrate(t.Context()); err != nil {
				t.Fatal(err)
			}
			stB := storetest.OpenDSN(t, driver, dsn)
			var feed *EventFeed
			counter := &countingVersions{st: stA}
			a := newBizWorld(t, stA, withEventFeed(&feed, func(*store.Store) VersionReader { return counter }),
				withOverlay(map[string]any{"events.pollInterval": "50ms"}))
			b := newBizWorld(t, stB)
			tsA := httptest.NewServer(a.h)
			t.Cleanup(tsA.Close)

			for id, target := range map[string]string{"ev-1": tOpen, "ev-2": "billing-dashboard"} {
				b.do(req{method: "POST", path: "/api/requests", user: "alice", body: submitBodyFor(target, "live", ""),
					header: map[string]string{"Idempotency-Key": id}}).want(t, 202, "ACCEPTED")
			}

			s1, _ := openStream(t, tsA, "/api/requests/ev-1/events", "alice", nil)
			if ct := s1.resp.Header.Get("Content-Type"); ct != "text/event-stream" {
				t.Fatalf("content type %q", ct)
			}
			first := s1.next(t)
			if first.event != "request" || stepOf(t, first) != domain.StepCreateApprovalSubmitting.String() || first.id == "" {
				t.Fatalf("first event %+v", first)
			}
			// More streams on the same request and on another one.
			s2, _ := openStream(t, tsA, "/api/requests/ev-1/events", "alice", nil)
			s2.next(t)
			s3, _ := openStream(t, tsA, "/api/requests/ev-2/events", "alice", nil)
			s3.next(t)

			storetest.WalkTo(t, stB, "ev-1", storetest.ApproveFirstPath, domain.StepCreateApprovalSubmitted)
			for _, s := range []*sseStream{s1, s2} {
				step := s.next(t)
				if step.event != "step" || stepOf(t, step) != domain.StepCreateApprovalSubmitted.String() {
					t.Fatalf("want the step event, got %+v", step)
				}
				now := s.next(t)
				if now.event != "request" || stepOf(t, now) != domain.StepCreateApprovalSubmitted.String() || now.id != step.id {
					t.Fatalf("want the new state with the step's id %s, got %+v", step.id, now)
				}
			}

			// Resume from the first event: the step after it, then the state.
			s4, _ := openStream(t, tsA, "/api/requests/ev-1/events", "alice", map[string]string{"Last-Event-ID": first.id})
			if ev := s4.next(t); ev.event != "step" || stepOf(t, ev) != domain.StepCreateApprovalSubmitted.String() {
				t.Fatalf("resume: want the missed step, got %+v", ev)
			}
			if ev := s4.next(t); ev.event != "request" {
				t.Fatalf("resume: want the state, got %+v", ev)
			}

			// A grant given back on B: its binding now belongs to the
			// revocation, whose writes are not the grant's steps; the
			// grant's stream on A still pushes its new state (REVOKING),
			// with no step event, as the status read shows it.
			validatedFixture(t, stB, "ev-3", "alice")
			s5, _ := openStream(t, tsA, "/api/requests/ev-3/events", "alice", nil)
			if ev := s5.next(t); ev.event != "request" || !strings.Contains(ev.data, `"status":"VALIDATED"`) {
				t.Fatalf("given back: first event %+v", ev)
			}
			if _, err := (lifecycle.Revoker{Env: flow.Env{Config: b.cfg.Current}, Store: stB}).Revoke(t.Context(), "ev-3", domain.RevokeGivenBack, "given back", "alice"); err != nil {
				t.Fatal(err)
			}
			if ev := s5.next(t); ev.event != "request" || !strings.Contains(ev.data, `"status":"REVOKING"`) ||
				!strings.Contains(ev.data, `"revocationId":"`+domain.RevocationID("ev-3")+`"`) {
				t.Fatalf("given back: want the grant's new state, got %+v", ev)
			}

			// One read per poll for all streams: every read carried the
			// watched requests (each with its revocation's id), never one
			// read per stream.
			watchable := map[string]bool{}
			for _, id := range []string{"ev-1", "ev-2", "ev-3"} {
				watchable[id], watchable[domain.RevocationID(id)] = true, true
			}
			for i, ids := range counter.reads() {
				seen := map[string]bool{}
				for _, id := range ids {
					if !watchable[id] || seen[id] {
						t.Fatalf("read %d carried %v", i, ids)
					}
					seen[id] = true
				}
			}
			if got, polls := len(counter.reads()), feed.Polls(); int64(got) != polls {
				t.Fatalf("%d reads for %d polls", got, polls)
			}

			feed.Close()
			for _, s := range []*sseStream{s1, s2, s3, s4, s5} {
				select {
				case <-s.ended:
				case <-time.After(20 * time.Second):
					t.Fatal("a stream outlived the feed's close")
				}
			}
			_, resp := openStream(t, tsA, "/api/requests/ev-1/events", "alice", nil)
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("after close: %d", resp.StatusCode)
			}
		})
	}
}

// TestRequestEventsAuthorization: the stream is the status read's: another
// user's request and a missing one are 404 alike, no login is 401, a
// malformed Last-Event-ID is 400, the stream cap answers 503 RETRY_LATER,
// and an idle feed (no stream open) reads nothing.
func TestRequestEventsAuthorization(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		var feed *EventFeed
		counter := &countingVersions{st: st}
		w := newBizWorld(t, st, withEventFeed(&feed, func(*store.Store) VersionReader { return counter }),
			withOverlay(map[string]any{"events.maxStreams": 1, "events.pollInterval": "50ms"}))
		ts := httptest.NewServer(w.h)
		t.Cleanup(ts.Close)
		w.do(req{method: "POST", path: "/api/requests", user: "alice", body: submitBodyFor(tOpen, "live", ""),
			header: map[string]string{"Idempotency-Key": "ev-auth"}}).want(t, 202, "ACCEPTED")

		for _, c := range []struct {
			name, path, user string
			header           map[string]string
			status           int
			code             string
		}{
			{"another user's request is not found", "/api/requests/ev-auth/events", "bob", nil, 404, "NOT_FOUND"},
			{"a missing request is not found", "/api/requests/nope/events", "alice", nil, 404, "NOT_FOUND"},
			{"no login", "/api/requests/ev-auth/events", "", nil, 401, "UNAUTHENTICATED"},
			{"a malformed Last-Event-ID", "/api/requests/ev-auth/events", "alice", map[string]string{"Last-Event-ID": "x"}, 400, "INVALID_ARGUMENT"},
		} {
			t.Run(c.name, func(t *testing.T) {
				got := w.do(req{method: "GET", path: c.path, user: c.user, header: c.header})
				got.want(t, c.status, c.code)
			})
		}
		if n := len(counter.reads()); n != 0 {
			t.Fatalf("no stream was open, yet the feed read %d times", n)
		}

		s, _ := openStream(t, ts, "/api/requests/ev-auth/events", "alice", nil)
		s.next(t)
		_, resp := openStream(t, ts, "/api/requests/ev-auth/events", "alice", nil)
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("over the cap: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	})
}
