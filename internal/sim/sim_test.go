package sim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"changeflow/internal/sim"
	"changeflow/internal/sim/approval"
	"changeflow/internal/sim/gitlab"
)

// service stands in for changeflow: it records every callback by path.
type service struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []call
}

type call struct {
	Path   string
	Header http.Header
	Body   map[string]any
}

func newService(t *testing.T) *service {
	t.Helper()
	s := &service{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(b, &body)
		s.mu.Lock()
		s.seen = append(s.seen, call{Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
		s.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// await polls until a callback on path satisfies ok, or fails at 10 s.
func (s *service) await(t *testing.T, path string, ok func(call) bool) call {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		for _, c := range s.seen {
			if c.Path == path && ok(c) {
				s.mu.Unlock()
				return c
			}
		}
		s.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no matching callback on %s within 10s", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func start(t *testing.T, targets ...string) *sim.Sim {
	t.Helper()
	delay := 20 * time.Millisecond
	s, err := sim.New(sim.Config{
		Listen: "127.0.0.1:0", CallbackURLs: targets,
		CallbackToken: "cb-secret", DeployCallbackToken: "deploy-secret", WebhookToken: "hook-secret", DataDir: t.TempDir(),
		ApprovalPolicy: &approval.Policy{Mode: approval.Auto, DelayMs: 20},
		DeployDelay:    &delay,
		GitLab: func(o *gitlab.Options) {
			o.MergeabilityDelay, o.PipelineStartDelay, o.PipelineDuration = -1, -1, -1
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

func do(t *testing.T, method, url, token, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("PRIVATE-TOKEN", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func TestEverySimulatorIsMounted(t *testing.T) {
	svc := newService(t)
	s := start(t, svc.srv.URL)
	base := s.URL()
	if !strings.HasPrefix(base, "http://127.0.0.1:") || strings.HasSuffix(base, ":0") {
		t.Fatalf("URL %q", base)
	}
	t.Run("index and health", func(t *testing.T) {
		if status, b := do(t, "GET", base+"/", "", ""); status != 200 || !bytes.Contains(b, []byte(base+"/oidc")) {
			t.Fatalf("%d %s", status, b)
		}
		if status, _ := do(t, "GET", base+"/healthz", "", ""); status != 200 {
			t.Fatal(status)
		}
	})
	t.Run("gitlab", func(t *testing.T) {
		if status, b := do(t, "GET", base+"/gitlab/api/v4/projects/1", "local-maintainer-token", ""); status != 200 || !bytes.Contains(b, []byte("config/bindings")) {
			t.Fatalf("%d %s", status, b)
		}
		if status, b := do(t, "GET", base+"/gitlab/_control/deliveries", "", ""); status != 200 || !bytes.Contains(b, []byte(svc.srv.URL)) {
			t.Fatalf("%d %s", status, b)
		}
	})
	t.Run("permission", func(t *testing.T) {
		status, b := do(t, "POST", base+"/permission/v1/check", "", `{"subject":"olivia","ruleCodes":["ops.write","admin"]}`)
		if status != 200 || !bytes.Contains(b, []byte(`"granted":["ops.write"]`)) {
			t.Fatalf("%d %s", status, b)
		}
	})
	t.Run("oidc issuer names the mount", func(t *testing.T) {
		status, b := do(t, "GET", base+"/oidc/.well-known/openid-configuration", "", "")
		if status != 200 || !bytes.Contains(b, []byte(`"issuer":"`+base+`/oidc"`)) {
			t.Fatalf("%d %s", status, b)
		}
	})
	t.Run("approval calls back", func(t *testing.T) {
		status, b := do(t, "POST", base+"/approval/v1/approvals", "", `{"operationId":"op-1","requester":"alice","title":"t","ext":{"mrId":"3"}}`)
		if status != 201 {
			t.Fatalf("%d %s", status, b)
		}
		c := svc.await(t, "/callbacks/approval", func(c call) bool { return c.Body["operationId"] == "op-1" })
		if c.Header.Get("X-Callback-Token") != "cb-secret" || c.Body["result"] != "APPROVED" {
			t.Fatalf("%+v", c)
		}
	})
	t.Run("deploy calls back", func(t *testing.T) {
		if status, b := do(t, "POST", base+"/deploy/_control/deployments", "", `{"project":1,"mrIid":77}`); status != 202 {
			t.Fatalf("%d %s", status, b)
		}
		c := svc.await(t, "/callbacks/deploy", func(c call) bool { return c.Body["mrIid"] == float64(77) })
		// The deployment pipeline has its own secret (callbacks.tokens.deploy).
		if c.Header.Get("X-Callback-Token") != "deploy-secret" || c.Body["status"] != "SUCCESS" {
			t.Fatalf("%+v", c)
		}
	})
}

// TestMergeInGitLabIsDeployed drives a real merge through the GitLab
// simulator and expects the deployment pipeline's callback for it.
func TestMergeInGitLabIsDeployed(t *testing.T) {
	svc := newService(t)
	s := start(t, svc.srv.URL)
	api := s.URL() + "/gitlab/api/v4/projects/1"
	const tok = "local-committer-token"
	if status, b := do(t, "POST", api+"/repository/branches?branch=req-1&ref=main", tok, ""); status != 201 {
		t.Fatalf("branch: %d %s", status, b)
	}
	commit := `{"branch":"req-1","commit_message":"add alice","actions":[{"action":"create","file_path":"bindings/sim-test.yaml","content":"- subject: alice\n"}]}`
	if status, b := do(t, "POST", api+"/repository/commits", tok, commit); status != 201 {
		t.Fatalf("commit: %d %s", status, b)
	}
	status, b := do(t, "POST", api+"/merge_requests", tok, `{"source_branch":"req-1","target_branch":"main","title":"req-1"}`)
	if status != 201 {
		t.Fatalf("mr: %d %s", status, b)
	}
	var mr struct{ IID int64 }
	_ = json.Unmarshal(b, &mr)
	// Merged "from outside" through GitLab's control API: the deployment
	// pipeline must not care who merged.
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, b = do(t, "POST", s.URL()+"/gitlab/_control/projects/1/merge_requests/"+jsonNum(mr.IID)+"/merge", "", "")
		if status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("outside merge: %d %s", status, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	c := svc.await(t, "/callbacks/deploy", func(c call) bool { return c.Body["mrIid"] == float64(mr.IID) })
	if c.Body["project"] != float64(1) || c.Body["requestId"] == "" {
		t.Fatalf("%+v", c)
	}
	hook := svc.await(t, "/callbacks/gitlab", func(c call) bool { return true })
	if hook.Header.Get("X-Gitlab-Token") != "hook-secret" {
		t.Fatalf("webhook %+v", hook.Header)
	}
}

func TestCallbacksFailOverToTheNextInstance(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	svc := newService(t)
	s := start(t, deadURL, svc.srv.URL)
	for i := range 3 {
		op := "op-" + jsonNum(int64(i))
		do(t, "POST", s.URL()+"/approval/v1/approvals", "", `{"operationId":"`+op+`","requester":"alice","title":"t"}`)
		svc.await(t, "/callbacks/approval", func(c call) bool { return c.Body["operationId"] == op })
	}
}

func TestStartStopsWithItsContext(t *testing.T) {
	s, err := sim.New(sim.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	addr := s.Addr()
	cancel()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			break
		}
		resp.Body.Close()
		if time.Now().After(deadline) {
			t.Fatal("still serving after its context ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err == nil {
		t.Fatal("restarted after Close")
	}
}

func TestLocalDefaults(t *testing.T) {
	s, err := sim.New(sim.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.URL() != "http://127.0.0.1:8090" || s.OIDC.Issuer() != "http://127.0.0.1:8090/oidc" {
		t.Fatalf("%s %s", s.URL(), s.OIDC.Issuer())
	}
	if p := s.Approval.Policy(); p.Mode != approval.Auto || p.DelayMs != 2000 {
		t.Fatalf("approval policy %+v", p)
	}
	if f := s.Deploy.Faults(); f.DelayMs != 2000 {
		t.Fatalf("deploy delay %+v", f)
	}
	if got := s.Webhooks.Targets(); len(got) != 1 || got[0] != "http://127.0.0.1:8080" {
		t.Fatalf("targets %v", got)
	}
}

func jsonNum(n int64) string { b, _ := json.Marshal(n); return string(b) }
