package approval_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"changeflow/internal/approval"
	simap "changeflow/internal/sim/approval"
)

type env struct {
	t        *testing.T
	sim      *simap.Server
	base     string
	settings atomic.Pointer[approval.Settings]
	c        *approval.Client
	slow     atomic.Int64 // delay every public API answer by this many ns

	mu    sync.Mutex
	posts int
}

func newEnv(t *testing.T) *env {
	t.Helper()
	sim, err := simap.New(simap.Options{}) // manual policy: nothing is decided
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, sim: sim}
	mux := http.NewServeMux()
	inner := http.StripPrefix("/approval", sim)
	mux.Handle("/approval/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/approval/v1/") {
			if r.Method == http.MethodPost {
				e.mu.Lock()
				e.posts++
				e.mu.Unlock()
			}
			if d := time.Duration(e.slow.Load()); d > 0 {
				// Test-side slowness, not production code; it ends when the
				// client gives up, so a long delay does not hold the cleanup.
				// The server notices a closed connection only once the body
				// is read, so read it first and hand on a copy.
				body, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(body))
				select {
				case <-time.After(d):
				case <-r.Context().Done():
					return
				}
			}
		}
		inner.ServeHTTP(w, r)
	}))
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { srv.Close(); _ = sim.Close() })
	e.base = srv.URL + "/approval/"
	e.settings.Store(&approval.Settings{BaseURL: e.base, Timeout: 5 * time.Second, BreakerFailures: 100, BreakerOpenFor: time.Minute})
	e.c = approval.New(approval.Options{Settings: func() approval.Settings { return *e.settings.Load() }})
	return e
}

func (e *env) set(f func(*approval.Settings)) {
	s := *e.settings.Load()
	f(&s)
	e.settings.Store(&s)
}

func (e *env) faults(f simap.Faults) {
	e.t.Helper()
	b, _ := json.Marshal(f)
	res, err := http.Post(e.base+"_control/faults", "application/json", bytes.NewReader(b))
	if err != nil || res.StatusCode != 200 {
		e.t.Fatalf("faults: %v %v", err, res)
	}
	res.Body.Close()
}

func (e *env) postCount() int { e.mu.Lock(); defer e.mu.Unlock(); return e.posts }

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func form(op string) approval.Form {
	return approval.Form{
		OperationID: op, Requester: "alice", Title: "payments-db-readonly for alice",
		Fields: map[string]any{"targetKey": "payments-db-readonly"}, Ext: approval.Ext{MRID: "7"},
	}
}

func wantErr(t *testing.T, err error, op string, status int) *approval.Error {
	t.Helper()
	var e *approval.Error
	if !errors.As(err, &e) || e.Op != op || e.Status != status {
		t.Fatalf("want *approval.Error %s %d, got %T %v", op, status, err, err)
	}
	return e
}

func TestSubmitFindGet(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	a, err := e.c.Submit(c, form("op-1"))
	if err != nil || a.ApprovalID == "" || a.Status != approval.Pending || a.OperationID != "op-1" || a.Ext.MRID != "7" {
		t.Fatalf("Submit: %+v %v", a, err)
	}
	t.Run("idempotent by operationId", func(t *testing.T) {
		again, err := e.c.Submit(c, form("op-1"))
		if err != nil || again.ApprovalID != a.ApprovalID {
			t.Fatalf("second submit: %+v %v", again, err)
		}
		if n := len(e.sim.List()); n != 1 {
			t.Fatalf("%d approvals, want 1", n)
		}
	})
	t.Run("find by operationId", func(t *testing.T) {
		got, ok, err := e.c.FindByOperationID(c, "op-1")
		if err != nil || !ok || got.ApprovalID != a.ApprovalID {
			t.Fatalf("find: %+v %v %v", got, ok, err)
		}
		if _, ok, err := e.c.FindByOperationID(c, "op-none"); ok || err != nil {
			t.Fatalf("find missing: %v %v", ok, err)
		}
	})
	t.Run("get, and an unknown id is a typed 404", func(t *testing.T) {
		got, err := e.c.Get(c, a.ApprovalID)
		if err != nil || got.OperationID != "op-1" {
			t.Fatalf("get: %+v %v", got, err)
		}
		_, err = e.c.Get(c, "APR-999999")
		wantErr(t, err, "Get", 404)
		if !approval.IsNotFound(err) || approval.OutcomeUnknown(err) {
			t.Fatal("helpers")
		}
	})
	t.Run("a decision is visible", func(t *testing.T) {
		if _, err := e.sim.Decide(a.ApprovalID, simap.Approved, ""); err != nil {
			t.Fatal(err)
		}
		got, err := e.c.Get(c, a.ApprovalID)
		if err != nil || got.Status != approval.Approved || got.DecidedAt == nil || !got.Status.Decided() {
			t.Fatalf("decided: %+v %v", got, err)
		}
		// The decision's callback delivery id, as the system reports it.
		if got.CallbackRequestID == "" {
			t.Fatalf("decided without its callback requestId: %+v", got)
		}
		found, ok, err := e.c.FindByOperationID(c, "op-1")
		if err != nil || !ok || found.CallbackRequestID != got.CallbackRequestID {
			t.Fatalf("find decided: %+v %v %v", found, ok, err)
		}
		if approval.Pending.Decided() {
			t.Fatal("PENDING is not a decision")
		}
	})
}

func TestErrorsAreTyped(t *testing.T) {
	e := newEnv(t)
	_, err := e.c.Submit(ctx(t), approval.Form{OperationID: "op-x", Requester: "alice"})
	if ae := wantErr(t, err, "Submit", 400); ae.Message != "title is required" {
		t.Fatalf("message %q", ae.Message)
	}
	e.faults(simap.Faults{FailNext: simap.FailNext{Status: 503, Count: 1}})
	_, err = e.c.Submit(ctx(t), form("op-503"))
	wantErr(t, err, "Submit", 503)
	if !approval.IsTransient(err) || approval.OutcomeUnknown(err) {
		t.Fatal("503 is transient and known")
	}
	if len(e.sim.List()) != 0 {
		t.Fatal("a failed submit created an approval")
	}
	e.set(func(s *approval.Settings) { s.BaseURL = "" })
	_, err = e.c.Submit(ctx(t), form("op-y"))
	wantErr(t, err, "Submit", 0)
}

func TestLostResponse(t *testing.T) {
	t.Run("unknown outcome, then the lookup finds it", func(t *testing.T) {
		e := newEnv(t)
		e.faults(simap.Faults{LoseResponseNext: 1})
		_, err := e.c.Submit(ctx(t), form("op-lost"))
		ae := wantErr(t, err, "Submit", 0)
		if !ae.Unknown || !approval.OutcomeUnknown(err) {
			t.Fatalf("lost response must be unknown: %+v", ae)
		}
		got, ok, err := e.c.FindByOperationID(ctx(t), "op-lost")
		if err != nil || !ok || got.ApprovalID == "" {
			t.Fatalf("lookup: %+v %v %v", got, ok, err)
		}
		if e.postCount() != 1 {
			t.Fatalf("%d submits, want 1", e.postCount())
		}
	})
	t.Run("EnsureSubmitted: looks up, submits once, settles a lost answer by lookup", func(t *testing.T) {
		e := newEnv(t)
		e.faults(simap.Faults{LoseResponseNext: 1})
		a, err := approval.EnsureSubmitted(ctx(t), e.c, form("op-ensure"))
		if err != nil || a.ApprovalID == "" {
			t.Fatalf("ensure: %+v %v", a, err)
		}
		again, err := approval.EnsureSubmitted(ctx(t), e.c, form("op-ensure"))
		if err != nil || again.ApprovalID != a.ApprovalID {
			t.Fatalf("ensure again: %+v %v", again, err)
		}
		if e.postCount() != 1 || len(e.sim.List()) != 1 {
			t.Fatalf("%d submits, %d approvals; want 1 and 1", e.postCount(), len(e.sim.List()))
		}
	})
}

func TestBreakerAndDeadline(t *testing.T) {
	t.Run("breaker opens after N failures and fails fast without a call", func(t *testing.T) {
		e := newEnv(t)
		e.set(func(s *approval.Settings) { s.BreakerFailures = 2; s.BreakerOpenFor = time.Hour })
		e.faults(simap.Faults{FailNext: simap.FailNext{Status: 502, Count: 10}})
		for range 2 {
			_, err := e.c.Submit(ctx(t), form("op-b"))
			wantErr(t, err, "Submit", 502)
		}
		_, err := e.c.Submit(ctx(t), form("op-b"))
		if ae := wantErr(t, err, "Submit", 0); !ae.BreakerOpen || !approval.IsBreakerOpen(err) || ae.Unknown {
			t.Fatalf("want open breaker: %+v", ae)
		}
		if e.postCount() != 2 {
			t.Fatalf("%d submits reached the system, want 2", e.postCount())
		}
	})
	t.Run("4xx does not open it", func(t *testing.T) {
		e := newEnv(t)
		e.set(func(s *approval.Settings) { s.BreakerFailures = 1 })
		for range 3 {
			_, err := e.c.Get(ctx(t), "APR-nope")
			wantErr(t, err, "Get", 404)
		}
	})
	t.Run("a slow answer ends at the deadline as unknown", func(t *testing.T) {
		e := newEnv(t)
		e.set(func(s *approval.Settings) { s.Timeout = 100 * time.Millisecond })
		// The answer would come after a minute: a client that returns at
		// all within the test's time ended at its own deadline (also what
		// "deadline exceeded" says), whatever the machine's load.
		e.slow.Store(int64(time.Minute))
		start := time.Now()
		_, err := e.c.Submit(ctx(t), form("op-slow"))
		ae := wantErr(t, err, "Submit", 0)
		if time.Since(start) >= 30*time.Second || !ae.Unknown || ae.Message != "deadline exceeded" {
			t.Fatalf("took %v: %+v", time.Since(start), ae)
		}
	})
}
