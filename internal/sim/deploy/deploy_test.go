package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"changeflow/internal/sim/deliver"
	"changeflow/internal/sim/deploy"
)

type cb struct {
	RequestID string `json:"requestId"`
	Project   int64  `json:"project"`
	MRIID     int64  `json:"mrIid"`
	Status    string `json:"status"`
	Token     string
	At        time.Time
}

// feed is a MergeFeed the test drives.
type feed struct{ fn func(deploy.MergeEvent) }

func (f *feed) OnMerge(fn func(deploy.MergeEvent)) { f.fn = fn }

type world struct {
	t       *testing.T
	sim     *deploy.Server
	ctl     *httptest.Server
	d       *deliver.Deliverer
	feed    *feed
	got     chan cb
	failing atomic.Int64
}

func newWorld(t *testing.T, opts deploy.Options) *world {
	t.Helper()
	w := &world{t: t, got: make(chan cb, 100), feed: &feed{}}
	svc := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if w.failing.Add(-1) >= 0 {
			rw.WriteHeader(http.StatusBadGateway)
			return
		}
		var c cb
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &c)
		if r.URL.Path != "/callbacks/deploy" {
			t.Errorf("callback to %s", r.URL.Path)
		}
		c.Token, c.At = r.Header.Get("X-Callback-Token"), time.Now()
		w.got <- c
	}))
	t.Cleanup(svc.Close)
	d, err := deliver.New(deliver.Options{Targets: []string{svc.URL}, BackoffMin: 5 * time.Millisecond, BackoffMax: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	w.d = d
	opts.Deliverer, opts.CallbackToken = d, "tok"
	w.sim, err = deploy.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.sim.Close() })
	w.sim.Subscribe(w.feed)
	w.ctl = httptest.NewServer(w.sim)
	t.Cleanup(w.ctl.Close)
	return w
}

func (w *world) merge(iid int64, branch string) {
	w.feed.fn(deploy.MergeEvent{ProjectID: 1, MRIID: iid, MergeCommitSHA: "abc", TargetBranch: branch, MergedAt: time.Now()})
}

func (w *world) next() cb {
	w.t.Helper()
	select {
	case c := <-w.got:
		return c
	case <-time.After(5 * time.Second):
		w.t.Fatal("no callback within 5s")
	}
	return cb{}
}

// settled waits until no deployment is queued or deploying and the
// deliverer is idle, then asserts no callback is left unread.
func (w *world) settled() {
	w.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		busy := false
		for _, d := range w.sim.List() {
			if d.Status == deploy.Queued || d.Status == deploy.Deploying {
				busy = true
			}
		}
		if !busy {
			break
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("deployments not settled: %+v", w.sim.List())
		}
		time.Sleep(5 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.d.Wait(ctx); err != nil {
		w.t.Fatal(err)
	}
	select {
	case c := <-w.got:
		w.t.Fatalf("unexpected callback %+v", c)
	default:
	}
}

func (w *world) post(path, body string) (int, []byte) {
	w.t.Helper()
	resp, err := http.Post(w.ctl.URL+path, "application/json", bytes.NewBufferString(body))
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func TestCallsBackInMergeOrder(t *testing.T) {
	w := newWorld(t, deploy.Options{})
	w.failing.Store(3) // the first callback needs retries; the rest must wait for it
	for iid := int64(1); iid <= 5; iid++ {
		w.merge(iid, "main")
	}
	seen := map[string]bool{}
	for iid := int64(1); iid <= 5; iid++ {
		c := w.next()
		if c.MRIID != iid || c.Project != 1 || c.Status != "SUCCESS" || c.Token != "tok" || c.RequestID == "" || seen[c.RequestID] {
			t.Fatalf("callback %d: %+v", iid, c)
		}
		seen[c.RequestID] = true
	}
	w.settled()
	for _, d := range w.sim.List() {
		if d.Status != deploy.CalledBack || d.Callbacks != 1 {
			t.Fatalf("%+v", d)
		}
	}
}

func TestOnlyWatchedBranches(t *testing.T) {
	w := newWorld(t, deploy.Options{})
	w.merge(1, "feature/x")
	w.merge(2, "main")
	if c := w.next(); c.MRIID != 2 {
		t.Fatalf("%+v", c)
	}
	w.settled()
	if n := len(w.sim.List()); n != 1 {
		t.Fatalf("%d deployments", n)
	}
	t.Run("star watches every branch", func(t *testing.T) {
		w := newWorld(t, deploy.Options{Branches: []string{"*"}})
		w.merge(1, "feature/x")
		w.next()
	})
}

func TestDelayAfterMerge(t *testing.T) {
	w := newWorld(t, deploy.Options{Delay: 150 * time.Millisecond})
	start := time.Now()
	w.merge(1, "main")
	if c := w.next(); c.At.Sub(start) < 150*time.Millisecond {
		t.Fatalf("called back after %v", c.At.Sub(start))
	}
	t.Run("delay changed by control API", func(t *testing.T) {
		w.post("/_control/faults", `{"delayMs":0}`)
		w.merge(2, "main")
		w.next()
		if f := w.sim.Faults(); f.DelayMs != 0 {
			t.Fatalf("%+v", f)
		}
	})
}

func TestDropAndDuplicate(t *testing.T) {
	w := newWorld(t, deploy.Options{})
	if status, _ := w.post("/_control/faults", `{"dropNext":1,"duplicateNext":1}`); status != 200 {
		t.Fatal(status)
	}
	w.merge(1, "main") // dropped
	w.merge(2, "main") // duplicated
	w.merge(3, "main")
	c1, c2 := w.next(), w.next()
	if c1.MRIID != 2 || c2.MRIID != 2 || c1.RequestID != c2.RequestID {
		t.Fatalf("%+v / %+v", c1, c2)
	}
	if c := w.next(); c.MRIID != 3 {
		t.Fatalf("%+v", c)
	}
	w.settled()
	list := w.sim.List()
	if list[0].Status != deploy.Dropped || list[0].Callbacks != 0 || list[1].Callbacks != 2 {
		t.Fatalf("%+v", list)
	}
}

func TestPauseQueuesThenResumesInOrder(t *testing.T) {
	w := newWorld(t, deploy.Options{})
	w.post("/_control/pause", "")
	for iid := int64(1); iid <= 3; iid++ {
		w.merge(iid, "main")
	}
	_, b := w.post("/_control/faults", `{}`)
	if !bytes.Contains(b, []byte(`"paused":true`)) {
		t.Fatalf("%s", b)
	}
	for _, d := range w.sim.List() {
		if d.Status != deploy.Queued {
			t.Fatalf("deployed while paused: %+v", d)
		}
	}
	w.post("/_control/resume", "")
	for iid := int64(1); iid <= 3; iid++ {
		if c := w.next(); c.MRIID != iid {
			t.Fatalf("got %d, want %d", c.MRIID, iid)
		}
	}
	w.settled()
}

func TestControlTriggerListAndRedeliver(t *testing.T) {
	w := newWorld(t, deploy.Options{})
	status, b := w.post("/_control/deployments", `{"project":1,"mrIid":9}`)
	if status != http.StatusAccepted {
		t.Fatalf("%d %s", status, b)
	}
	first := w.next()
	if first.MRIID != 9 {
		t.Fatalf("%+v", first)
	}
	w.settled()
	var d deploy.Deployment
	_ = json.Unmarshal(b, &d)
	if status, _ := w.post("/_control/deployments/"+jsonInt(d.ID)+"/redeliver", ""); status != http.StatusAccepted {
		t.Fatal(status)
	}
	if again := w.next(); again.RequestID != first.RequestID {
		t.Fatalf("%+v vs %+v", again, first)
	}
	if status, _ := w.post("/_control/deployments/999/redeliver", ""); status != 404 {
		t.Fatal(status)
	}
	for _, body := range []string{`{"project":1}`, `{`} {
		if status, _ := w.post("/_control/deployments", body); status != 400 {
			t.Fatalf("%s: %d", body, status)
		}
	}
	resp, err := http.Get(w.ctl.URL + "/_control/deployments")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct{ Items []deploy.Deployment }
	_ = json.NewDecoder(resp.Body).Decode(&list)
	if len(list.Items) != 1 || !list.Items[0].Manual || list.Items[0].Callbacks != 2 {
		t.Fatalf("%+v", list)
	}
	req, _ := http.NewRequest("DELETE", w.ctl.URL+"/_control/faults", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("reset: %v", err)
	}
}

func TestCloseIsIdempotentAndLeavesTheQueue(t *testing.T) {
	w := newWorld(t, deploy.Options{Delay: time.Hour})
	w.merge(1, "main")
	if err := w.sim.Close(); err != nil {
		t.Fatal(err)
	}
	_ = w.sim.Close()
	if l := w.sim.List(); len(l) != 1 || l[0].Status != deploy.Queued {
		t.Fatalf("%+v", l)
	}
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }
