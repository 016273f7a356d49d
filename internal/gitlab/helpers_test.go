package gitlab_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"changeflow/internal/gitlab"
	simgl "changeflow/internal/sim/gitlab"
)

const project = "config/bindings"

// env is the GitLab simulator behind a real HTTP server, mounted under
// /gitlab/ as the composition root mounts it, with the adapter pointed at
// it. Every API request that reaches the server is recorded, so tests can
// count calls ("exactly one POST reached GitLab").
type env struct {
	t        testing.TB
	srv      *httptest.Server
	base     string // http://127.0.0.1:port/gitlab/
	settings atomic.Pointer[gitlab.Settings]
	gl       *gitlab.Client

	mu    sync.Mutex
	calls []call
	// before, when set, runs before the simulator handles each API call.
	before func(r *http.Request)
}

// call is one API request that reached the simulator.
type call struct {
	method, path, token string // path after /api/v4, escaped
}

func newEnv(t testing.TB, mutate ...func(*simgl.Options)) *env {
	t.Helper()
	opts := simgl.Options{
		MergeabilityDelay:  20 * time.Millisecond,
		PipelineStartDelay: 5 * time.Millisecond,
		PipelineDuration:   20 * time.Millisecond,
		RebaseDuration:     20 * time.Millisecond,
	}
	for _, f := range mutate {
		f(&opts)
	}
	sim, err := simgl.New(opts)
	if err != nil {
		t.Fatalf("simulator: %v", err)
	}
	e := &env{t: t}
	mux := http.NewServeMux()
	inner := http.StripPrefix("/gitlab", sim)
	mux.Handle("/gitlab/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p, ok := strings.CutPrefix(r.URL.EscapedPath(), "/gitlab/api/v4"); ok {
			e.mu.Lock()
			e.calls = append(e.calls, call{r.Method, p, r.Header.Get("PRIVATE-TOKEN")})
			before := e.before
			e.mu.Unlock()
			if before != nil {
				before(r)
			}
		}
		inner.ServeHTTP(w, r)
	}))
	e.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		e.srv.Close()
		if err := sim.Close(); err != nil {
			t.Errorf("simulator Close: %v", err)
		}
	})
	e.base = e.srv.URL + "/gitlab/"
	e.settings.Store(&gitlab.Settings{
		BaseURL: e.base,
		Tokens: gitlab.Bots{
			Committer: "local-committer-token",
			Approver1: "local-approver-1-token",
			Approver2: "local-approver-2-token",
		},
		Timeout:         5 * time.Second,
		BreakerFailures: 100,
		BreakerOpenFor:  time.Minute,
	})
	e.gl = gitlab.New(gitlab.Options{Settings: func() gitlab.Settings { return *e.settings.Load() }})
	return e
}

// set changes the adapter's settings (as a configuration reload would).
func (e *env) set(f func(*gitlab.Settings)) {
	s := *e.settings.Load()
	f(&s)
	e.settings.Store(&s)
}

// count is how many recorded calls match method and a path.Match pattern.
func (e *env) count(method, pattern string) int { return e.countAs("", method, pattern) }

// countAs counts only calls made with token ("" = any).
func (e *env) countAs(token, method, pattern string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, c := range e.calls {
		if ok, _ := path.Match(pattern, c.path); ok && (method == "" || c.method == method) && (token == "" || c.token == token) {
			n++
		}
	}
	return n
}

// setBefore installs a hook run before each API call reaches the simulator.
func (e *env) setBefore(f func(r *http.Request)) {
	e.mu.Lock()
	e.before = f
	e.mu.Unlock()
}

func (e *env) resetCalls() {
	e.mu.Lock()
	e.calls = nil
	e.mu.Unlock()
}

// control calls the simulator's control API (path after /_control).
func (e *env) control(method, p string, body any) map[string]any {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, e.base+"_control"+p, rd)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("control %s %s: %v", method, p, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode >= 300 {
		e.t.Fatalf("control %s %s: %d %s", method, p, res.StatusCode, raw)
	}
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return m
}

// fault arms one REST fault.
func (e *env) fault(f map[string]any) { e.t.Helper(); e.control("POST", "/faults", f) }

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func binding(subject string) string {
	return "- subject: " + subject + "\n  expiresAt: \"2030-01-01T00:00:00Z\"\n  operationId: op-" + subject + "\n"
}

// openMR creates branch with a binding file and an MR for it.
func (e *env) openMR(branch string) gitlab.MR {
	e.t.Helper()
	c := ctx(e.t)
	if _, err := e.gl.CreateCommit(c, project, gitlab.CommitRequest{
		Branch: branch, StartBranch: "main", Message: "add " + branch,
		Actions: []gitlab.FileAction{{Action: gitlab.ActionCreate, Path: "bindings/" + branch + ".yaml", Content: binding(branch)}},
	}); err != nil {
		e.t.Fatalf("commit: %v", err)
	}
	mr, err := e.gl.CreateMR(c, project, gitlab.CreateMRRequest{SourceBranch: branch, TargetBranch: "main", Title: "Add " + branch})
	if err != nil {
		e.t.Fatalf("create MR: %v", err)
	}
	return mr
}

// waitMR polls GetMR until cond holds.
func (e *env) waitMR(iid int64, what string, cond func(gitlab.MR) bool) gitlab.MR {
	e.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		mr, err := e.gl.GetMR(ctx(e.t), project, iid)
		if err == nil && cond(mr) {
			return mr
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s: %+v %v", what, mr, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// wantErr asserts err is a *gitlab.Error for op with status.
func wantErr(t testing.TB, err error, op string, status int) *gitlab.Error {
	t.Helper()
	var e *gitlab.Error
	if !errors.As(err, &e) {
		t.Fatalf("want *gitlab.Error %s %d, got %T %v", op, status, err, err)
	}
	if e.Status != status || (op != "" && e.Op != op) {
		t.Fatalf("want %s %d, got %s %d (%v)", op, status, e.Op, e.Status, err)
	}
	return e
}

func fmtInt(n int64) string { return strconv.FormatInt(n, 10) }

func errDeadline() error { return context.DeadlineExceeded }
