package deliver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"changeflow/internal/sim/deliver"
)

// got is one request a receiver saw.
type got struct {
	target string
	path   string
	header http.Header
	body   string
	at     time.Time
}

// receiver is an httptest server that records every request and answers
// with status(n) for the n-th request (1-based); 200 when status is nil.
type receiver struct {
	srv  *httptest.Server
	seen chan got
	n    atomic.Int64
}

func newReceiver(t *testing.T, name string, status func(n int64) int) *receiver {
	t.Helper()
	rc := &receiver{seen: make(chan got, 100)}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		n := rc.n.Add(1)
		code := http.StatusOK
		if status != nil {
			code = status(n)
		}
		if code >= 200 && code < 300 {
			rc.seen <- got{target: name, path: r.URL.Path, header: r.Header.Clone(), body: string(b), at: time.Now()}
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// next returns the next successful request or fails after a bounded wait.
func next(t *testing.T, chs ...chan got) got {
	t.Helper()
	deadline := time.After(5 * time.Second)
	cases := make([]chan got, len(chs))
	copy(cases, chs)
	for {
		for _, c := range cases {
			select {
			case g := <-c:
				return g
			default:
			}
		}
		select {
		case <-deadline:
			t.Fatal("no delivery arrived within 5s")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// none asserts that nothing more arrives once the deliverer is idle.
func none(t *testing.T, d *deliver.Deliverer, ch chan got) {
	t.Helper()
	mustWait(t, d)
	select {
	case g := <-ch:
		t.Fatalf("unexpected delivery %q", g.body)
	default:
	}
}

func mustNew(t *testing.T, opts deliver.Options) *deliver.Deliverer {
	t.Helper()
	if opts.BackoffMin == 0 {
		opts.BackoffMin = 5 * time.Millisecond
		opts.BackoffMax = 20 * time.Millisecond
	}
	d, err := deliver.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func mustWait(t *testing.T, d *deliver.Deliverer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.Wait(ctx); err != nil {
		t.Fatalf("deliveries still in flight: %v", err)
	}
}

func body(i int) []byte { return []byte(`{"n":` + string(rune('0'+i)) + `}`) }

func TestDeliverPostsPathHeadersAndBody(t *testing.T) {
	rc := newReceiver(t, "a", nil)
	d := mustNew(t, deliver.Options{Targets: []string{rc.srv.URL + "/"}})
	h := http.Header{"X-Callback-Token": {"secret"}}
	d.Deliver(context.Background(), "/callbacks/approval", h, []byte(`{"x":1}`))
	g := next(t, rc.seen)
	if g.path != "/callbacks/approval" || g.header.Get("X-Callback-Token") != "secret" || g.body != `{"x":1}` {
		t.Fatalf("got %+v", g)
	}
	if ct := g.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type = %q", ct)
	}
	mustWait(t, d)
	log := d.Log()
	if len(log) != 1 || log[0].State != deliver.StateDelivered || len(log[0].Attempts) != 1 || log[0].Attempts[0].Status != 200 {
		t.Fatalf("log = %+v", log)
	}
}

func TestTargetsTakenInTurn(t *testing.T) {
	a := newReceiver(t, "a", nil)
	b := newReceiver(t, "b", nil)
	d := mustNew(t, deliver.Options{Targets: []string{a.srv.URL, b.srv.URL}})
	for i := range 4 {
		if err := d.Submit(context.Background(), "/p", nil, body(i)).Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if a.n.Load() != 2 || b.n.Load() != 2 {
		t.Fatalf("a got %d, b got %d; want 2 each", a.n.Load(), b.n.Load())
	}
}

func TestFailover(t *testing.T) {
	t.Run("connection refused goes to the next target at once", func(t *testing.T) {
		dead := httptest.NewServer(http.NotFoundHandler())
		deadURL := dead.URL
		dead.Close()
		b := newReceiver(t, "b", nil)
		d := mustNew(t, deliver.Options{Targets: []string{deadURL, b.srv.URL}, BackoffMin: time.Minute, BackoffMax: time.Minute})
		for i := range 3 {
			d.Deliver(context.Background(), "/p", nil, body(i))
		}
		for range 3 {
			next(t, b.seen)
		}
		mustWait(t, d)
		refused := 0
		for _, e := range d.Log() {
			for _, a := range e.Attempts {
				if a.Target == deadURL && a.Status == 0 && a.Error != "" {
					refused++
				}
			}
		}
		if refused == 0 {
			t.Fatal("no attempt against the dead target was logged")
		}
	})
	t.Run("5xx goes to the next target", func(t *testing.T) {
		a := newReceiver(t, "a", func(int64) int { return http.StatusServiceUnavailable })
		b := newReceiver(t, "b", nil)
		d := mustNew(t, deliver.Options{Targets: []string{a.srv.URL, b.srv.URL}, BackoffMin: time.Minute, BackoffMax: time.Minute})
		for i := range 2 {
			d.Deliver(context.Background(), "/p", nil, body(i))
		}
		next(t, b.seen)
		next(t, b.seen)
		mustWait(t, d)
	})
}

func TestRetriesWithBackoffUntil2xx(t *testing.T) {
	rc := newReceiver(t, "a", func(n int64) int {
		if n < 4 {
			return http.StatusInternalServerError
		}
		return http.StatusAccepted
	})
	d := mustNew(t, deliver.Options{Targets: []string{rc.srv.URL}, BackoffMin: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond})
	start := time.Now()
	if err := d.Submit(context.Background(), "/p", nil, body(1)).Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Backoffs 10 + 20 + 20 (capped): at least 50ms.
	if el := time.Since(start); el < 50*time.Millisecond {
		t.Fatalf("delivered after %v; backoff not applied", el)
	}
	e := d.Log()[0]
	if len(e.Attempts) != 4 || e.Attempts[3].Status != http.StatusAccepted {
		t.Fatalf("attempts = %+v", e.Attempts)
	}
}

func TestDropNext(t *testing.T) {
	rc := newReceiver(t, "a", nil)
	d := mustNew(t, deliver.Options{Targets: []string{rc.srv.URL}})
	d.SetFaults(deliver.FaultsPatch{DropNext: ptr(1)})
	if err := d.Submit(context.Background(), "/p", nil, body(1)).Wait(context.Background()); !errors.Is(err, deliver.ErrDropped) {
		t.Fatalf("err = %v, want ErrDropped", err)
	}
	d.Deliver(context.Background(), "/p", nil, body(2))
	if g := next(t, rc.seen); g.body != string(body(2)) {
		t.Fatalf("got %s", g.body)
	}
	none(t, d, rc.seen)
	if log := d.Log(); log[0].State != deliver.StateDropped || len(log[0].Attempts) != 0 {
		t.Fatalf("log[0] = %+v", log[0])
	}
}

func TestDuplicateNext(t *testing.T) {
	rc := newReceiver(t, "a", nil)
	d := mustNew(t, deliver.Options{Targets: []string{rc.srv.URL}})
	d.SetFaults(deliver.FaultsPatch{DuplicateNext: ptr(1)})
	d.Deliver(context.Background(), "/p", http.Header{"Idempotency-Key": {"k1"}}, body(1))
	g1, g2 := next(t, rc.seen), next(t, rc.seen)
	if g1.body != g2.body || g1.header.Get("Idempotency-Key") != "k1" || g2.header.Get("Idempotency-Key") != "k1" {
		t.Fatalf("copies differ: %+v / %+v", g1, g2)
	}
	d.Deliver(context.Background(), "/p", nil, body(2))
	next(t, rc.seen)
	none(t, d, rc.seen)
	log := d.Log()
	if len(log) != 3 || !log[1].Duplicate || log[1].Seq != log[0].Seq {
		t.Fatalf("log = %+v", log)
	}
}

func TestDelay(t *testing.T) {
	t.Run("fixed", func(t *testing.T) {
		rc := newReceiver(t, "a", nil)
		d := mustNew(t, deliver.Options{Targets: []string{rc.srv.URL}})
		d.SetFaults(deliver.FaultsPatch{DelayMs: ptr(150)})
		start := time.Now()
		d.Deliver(context.Background(), "/p", nil, body(1))
		if g := next(t, rc.seen); g.at.Sub(start) < 150*time.Millisecond {
			t.Fatalf("arrived after %v", g.at.Sub(start))
		}
	})
	t.Run("per delivery reorders", func(t *testing.T) {
		rc := newReceiver(t, "a", nil)
		d := mustNew(t, deliver.Options{Targets: []string{rc.srv.URL}})
		d.SetFaults(deliver.FaultsPatch{DelayNextMs: []int{300, 0}})
		d.Deliver(context.Background(), "/p", nil, body(1))
		d.Deliver(context.Background(), "/p", nil, body(2))
		if g := next(t, rc.seen); g.body != string(body(2)) {
			t.Fatalf("first arrival %s, want the undelayed one", g.body)
		}
		if g := next(t, rc.seen); g.body != string(body(1)) {
			t.Fatalf("second arrival %s", g.body)
		}
	})
}

func TestPauseAndResume(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reverse bool
		want    []int
	}{
		{"in order", false, []int{1, 2, 3}},
		{"reordered newest first", true, []int{3, 2, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := newReceiver(t, "a", nil)
			d := mustNew(t, deliver.Options{Targets: []string{rc.srv.URL}})
			d.Pause()
			for i := 1; i <= 3; i++ {
				d.Deliver(context.Background(), "/p", nil, body(i))
			}
			if d.Held() != 3 || rc.n.Load() != 0 {
				t.Fatalf("held %d, receiver saw %d", d.Held(), rc.n.Load())
			}
			if n := d.Resume(tc.reverse); n != 3 {
				t.Fatalf("released %d", n)
			}
			for _, want := range tc.want {
				if g := next(t, rc.seen); g.body != string(body(want)) {
					t.Fatalf("got %s, want %s", g.body, body(want))
				}
			}
		})
	}
	t.Run("reorder fault applies on resume", func(t *testing.T) {
		rc := newReceiver(t, "a", nil)
		d := mustNew(t, deliver.Options{Targets: []string{rc.srv.URL}})
		d.SetFaults(deliver.FaultsPatch{Paused: ptr(true), Reorder: ptr(true)})
		d.Deliver(context.Background(), "/p", nil, body(1))
		d.Deliver(context.Background(), "/p", nil, body(2))
		d.SetFaults(deliver.FaultsPatch{Paused: ptr(false)})
		if g := next(t, rc.seen); g.body != string(body(2)) {
			t.Fatalf("got %s first", g.body)
		}
	})
}

func TestCloseAbandonsAndIsIdempotent(t *testing.T) {
	rc := newReceiver(t, "a", func(int64) int { return http.StatusBadGateway })
	d := mustNew(t, deliver.Options{Targets: []string{rc.srv.URL}})
	failing := d.Submit(context.Background(), "/p", nil, body(1))
	d.Pause()
	held := d.Submit(context.Background(), "/p", nil, body(2))
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	_ = d.Close()
	for _, r := range []*deliver.Receipt{failing, held} {
		if err := r.Wait(context.Background()); !errors.Is(err, deliver.ErrClosed) {
			t.Fatalf("err = %v, want ErrClosed", err)
		}
	}
	if err := d.Submit(context.Background(), "/p", nil, body(3)).Wait(context.Background()); !errors.Is(err, deliver.ErrClosed) {
		t.Fatalf("submit after close: %v", err)
	}
}

func TestBoundedInFlight(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
	}))
	defer srv.Close()
	defer close(release)
	d := mustNew(t, deliver.Options{Targets: []string{srv.URL}, MaxInFlight: 1})
	d.Deliver(context.Background(), "/p", nil, body(1))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	r := d.Submit(ctx, "/p", nil, body(2))
	if err := r.Wait(context.Background()); !errors.Is(err, deliver.ErrClosed) {
		t.Fatalf("second delivery over the bound: %v", err)
	}
}

func TestRejectsBadTargets(t *testing.T) {
	for _, targets := range [][]string{nil, {"localhost:8080"}, {"ftp://x"}} {
		if _, err := deliver.New(deliver.Options{Targets: targets}); err == nil {
			t.Errorf("targets %v accepted", targets)
		}
	}
}

func TestControlAPI(t *testing.T) {
	rc := newReceiver(t, "a", nil)
	d := mustNew(t, deliver.Options{Targets: []string{rc.srv.URL}})
	mux := http.NewServeMux()
	d.RegisterControl(mux, "/_control/deliveries")
	ctl := httptest.NewServer(mux)
	defer ctl.Close()

	post := func(path, body string) *http.Response {
		t.Helper()
		resp, err := http.Post(ctl.URL+path, "application/json", bytes.NewBufferString(body))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	if resp := post("/_control/deliveries/faults", `{"duplicateNext":1}`); resp.StatusCode != 200 {
		t.Fatalf("faults: %d", resp.StatusCode)
	}
	if d.Faults().DuplicateNext != 1 {
		t.Fatal("fault not set")
	}
	post("/_control/deliveries/pause", "")
	d.Deliver(context.Background(), "/p", nil, body(1))
	post("/_control/deliveries/resume", `{"reverse":true}`)
	next(t, rc.seen)
	next(t, rc.seen)
	if resp := post("/_control/deliveries/wait?timeoutMs=5000", ""); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("wait: %d", resp.StatusCode)
	}
	resp, err := http.Get(ctl.URL + "/_control/deliveries")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Deliveries []deliver.Entry `json:"deliveries"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if len(out.Deliveries) != 2 || out.Deliveries[0].State != deliver.StateDelivered {
		t.Fatalf("deliveries = %+v", out.Deliveries)
	}
	if resp := post("/_control/deliveries/faults", `{"dropNext":"x"}`); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("bad patch: %d", resp.StatusCode)
	}
}

func ptr[T any](v T) *T { return &v }

func TestDeliverWithAnEndedContextStillDelivers(t *testing.T) {
	rc := newReceiver(t, "a", nil)
	d := mustNew(t, deliver.Options{Targets: []string{rc.srv.URL}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a request context that ended as its handler returned
	for i := range 20 {
		d.Deliver(ctx, "/p", nil, body(i%10))
	}
	for range 20 {
		next(t, rc.seen)
	}
}
