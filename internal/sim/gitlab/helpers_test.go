package gitlab

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	tokMaint    = "local-maintainer-token"
	tokBot      = "local-committer-token"
	tokA1       = "local-approver-1-token"
	tokA2       = "local-approver-2-token"
	tokObserver = "local-observer-token"
)

// env is one simulator behind a real HTTP server, mounted under /gitlab/
// as the composition root mounts it.
type env struct {
	t     testing.TB
	sim   *Server
	srv   *httptest.Server
	base  string // http://127.0.0.1:port/gitlab
	hooks *recordingDeliverer
}

type recordedHook struct {
	Path   string
	Header http.Header
	Body   map[string]any
}

// recordingDeliverer is a Deliverer that keeps every delivery.
type recordingDeliverer struct {
	mu  sync.Mutex
	got []recordedHook
}

func (d *recordingDeliverer) Deliver(_ context.Context, path string, h http.Header, body []byte) {
	var m map[string]any
	_ = json.Unmarshal(body, &m)
	d.mu.Lock()
	d.got = append(d.got, recordedHook{Path: path, Header: h.Clone(), Body: m})
	d.mu.Unlock()
}

func (d *recordingDeliverer) all() []recordedHook {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]recordedHook(nil), d.got...)
}

// fastOptions keeps every asynchronous step short so the suite stays fast.
func fastOptions() Options {
	return Options{
		WebhookToken:       "hook-secret",
		MergeabilityDelay:  40 * time.Millisecond,
		PipelineStartDelay: 10 * time.Millisecond,
		PipelineDuration:   30 * time.Millisecond,
		RebaseDuration:     20 * time.Millisecond,
	}
}

func newEnv(t testing.TB, mutate ...func(*Options)) *env {
	t.Helper()
	opts := fastOptions()
	for _, f := range mutate {
		f(&opts)
	}
	hooks := &recordingDeliverer{}
	if opts.Deliver == nil {
		opts.Deliver = hooks
	}
	sim, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/gitlab/", http.StripPrefix("/gitlab", sim))
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.Close()
		if err := sim.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &env{t: t, sim: sim, srv: srv, base: srv.URL + "/gitlab", hooks: hooks}
}

// resp is a decoded response.
type resp struct {
	Status int
	Header http.Header
	Raw    []byte
}

func (r resp) obj() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(r.Raw, &m)
	return m
}

func (r resp) list() []map[string]any {
	var l []map[string]any
	_ = json.Unmarshal(r.Raw, &l)
	return l
}

func (r resp) str(k string) string {
	v, _ := r.obj()[k].(string)
	return v
}

// call sends a JSON request to the API (path after /api/v4) or to any other
// path starting with /_control.
func (e *env) call(method, token, path string, body any) resp {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	url := e.base + "/api/v4" + path
	if strings.HasPrefix(path, "/_control") {
		url = e.base + path
	}
	req, _ := http.NewRequest(method, url, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("PRIVATE-TOKEN", token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return resp{Status: res.StatusCode, Header: res.Header, Raw: raw}
}

func (e *env) must(want int, method, token, path string, body any) resp {
	e.t.Helper()
	r := e.call(method, token, path, body)
	if r.Status != want {
		e.t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.Status, want, r.Raw)
	}
	return r
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// binding is a valid bindings YAML file.
func binding(subject string) string {
	return "- subject: " + subject + "\n  expiresAt: \"2030-01-01T00:00:00Z\"\n  operationId: op-" + subject + "\n"
}

// branchWithFiles creates branch from main with one commit creating files.
func (e *env) branchWithFiles(branch string, files map[string]string) string {
	e.t.Helper()
	var actions []map[string]any
	for p, c := range files {
		actions = append(actions, map[string]any{"action": "create", "file_path": p, "content": c})
	}
	r := e.must(201, "POST", tokBot, "/projects/1/repository/commits", map[string]any{
		"branch": branch, "start_branch": "main", "commit_message": "add " + branch, "actions": actions,
	})
	return r.str("id")
}

// openMR creates a branch with files and an MR for it; returns the iid.
func (e *env) openMR(branch string, files map[string]string) int64 {
	e.t.Helper()
	e.branchWithFiles(branch, files)
	r := e.must(201, "POST", tokBot, "/projects/1/merge_requests", map[string]any{
		"source_branch": branch, "target_branch": "main", "title": "Add " + branch,
	})
	return int64(r.obj()["iid"].(float64))
}

func (e *env) mrPath(iid int64) string { return "/projects/1/merge_requests/" + itoa(iid) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func (e *env) mr(iid int64) map[string]any {
	e.t.Helper()
	return e.must(200, "GET", tokBot, e.mrPath(iid)+"?include_rebase_in_progress=true", nil).obj()
}

// waitStatus waits for the MR's detailed_merge_status.
func (e *env) waitStatus(iid int64, want string) {
	e.t.Helper()
	eventually(e.t, "detailed_merge_status "+want, func() bool { return e.mr(iid)["detailed_merge_status"] == want })
}

// readyMR opens an MR and brings it to mergeable with two approvals.
func (e *env) readyMR(branch string, files map[string]string) int64 {
	e.t.Helper()
	iid := e.openMR(branch, files)
	e.waitStatus(iid, "not_approved")
	e.must(201, "POST", tokA1, e.mrPath(iid)+"/approve", nil)
	e.must(201, "POST", tokA2, e.mrPath(iid)+"/approve", nil)
	e.waitStatus(iid, "mergeable")
	return iid
}

func newRequest(method, url string, body io.Reader) (*http.Request, error) {
	return http.NewRequest(method, url, body)
}

func do(t testing.TB, req *http.Request) resp {
	t.Helper()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return resp{Status: res.StatusCode, Header: res.Header, Raw: raw}
}
