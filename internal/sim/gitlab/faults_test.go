package gitlab

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestFaultDropResponse(t *testing.T) {
	e := newEnv(t)
	t.Run("close: the branch is created, the client sees a transport error", func(t *testing.T) {
		e.must(201, "POST", "", "/_control/faults", map[string]any{"method": "POST", "path": "/projects/1/repository/branches", "kind": "drop"})
		body, _ := json.Marshal(map[string]any{"branch": "lost", "ref": "main"})
		req, _ := http.NewRequest("POST", e.base+"/api/v4/projects/1/repository/branches", bytes.NewReader(body))
		req.Header.Set("PRIVATE-TOKEN", tokBot)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			res.Body.Close()
			t.Fatalf("want a transport error, got %d", res.StatusCode)
		}
		e.must(200, "GET", tokBot, "/projects/1/repository/branches/lost", nil)
		// The fault was one-shot: a retry now sees the change already applied.
		e.must(400, "POST", tokBot, "/projects/1/repository/branches", map[string]any{"branch": "lost", "ref": "main"})
	})
	t.Run("502: the MR is created, the client sees 502", func(t *testing.T) {
		e.branchWithFiles("lost-mr", map[string]string{"bindings/l.yaml": binding("l")})
		e.must(201, "POST", "", "/_control/faults", map[string]any{"method": "POST", "path": "/projects/*/merge_requests", "kind": "drop", "mode": "502"})
		e.must(502, "POST", tokBot, "/projects/1/merge_requests", map[string]any{"source_branch": "lost-mr", "target_branch": "main", "title": "t"})
		r := e.must(409, "POST", tokBot, "/projects/1/merge_requests", map[string]any{"source_branch": "lost-mr", "target_branch": "main", "title": "t"})
		if !strings.Contains(string(r.Raw), "!1") {
			t.Fatalf("body: %s", r.Raw)
		}
	})
	t.Run("lost merge response: the MR is merged", func(t *testing.T) {
		iid := e.readyMR("lost-merge", map[string]string{"bindings/m.yaml": binding("m")})
		e.must(201, "POST", "", "/_control/faults", map[string]any{"method": "PUT", "path": "/projects/1/merge_requests/*/merge", "kind": "drop"})
		req, _ := http.NewRequest("PUT", e.base+"/api/v4"+e.mrPath(iid)+"/merge", nil)
		req.Header.Set("PRIVATE-TOKEN", tokA1)
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
			t.Fatalf("want a transport error, got %d", res.StatusCode)
		}
		if st := e.mr(iid)["state"]; st != "merged" {
			t.Fatalf("state %v", st)
		}
	})
}

func TestFaultStatusAndDelay(t *testing.T) {
	e := newEnv(t)
	t.Run("status N times, change not applied", func(t *testing.T) {
		e.must(201, "POST", "", "/_control/faults", map[string]any{"path": "/projects/1/repository/branches", "method": "POST", "kind": "status", "status": 500, "count": 2})
		for range 2 {
			r := e.must(500, "POST", tokBot, "/projects/1/repository/branches", map[string]any{"branch": "s1", "ref": "main"})
			if r.str("message") != "500 Internal Server Error" {
				t.Fatalf("body: %s", r.Raw)
			}
		}
		e.must(404, "GET", tokBot, "/projects/1/repository/branches/s1", nil)
		e.must(201, "POST", tokBot, "/projects/1/repository/branches", map[string]any{"branch": "s1", "ref": "main"})
	})
	t.Run("429 carries Retry-After and an epoch RateLimit-Reset", func(t *testing.T) {
		e.must(201, "POST", "", "/_control/faults", map[string]any{"path": "/projects/1", "kind": "status", "status": 429})
		r := e.must(429, "GET", tokBot, "/projects/1", nil)
		if r.Header.Get("Retry-After") == "" || len(r.Header.Get("RateLimit-Reset")) < 10 {
			t.Fatalf("headers: %v", r.Header)
		}
	})
	t.Run("method and path must match", func(t *testing.T) {
		e.must(201, "POST", "", "/_control/faults", map[string]any{"method": "PUT", "path": "/projects/1/merge_requests/*", "kind": "status", "status": 503})
		e.must(200, "GET", tokBot, "/projects/1", nil)
		if l := e.must(200, "GET", "", "/_control/faults", nil).list(); len(l) != 1 {
			t.Fatalf("faults: %v", l)
		}
		e.must(204, "DELETE", "", "/_control/faults", nil)
	})
	t.Run("delay after applying", func(t *testing.T) {
		e.must(201, "POST", "", "/_control/faults", map[string]any{"path": "/projects/1/repository/branches", "kind": "delay", "delay": "300ms"})
		start := time.Now()
		e.must(201, "POST", tokBot, "/projects/1/repository/branches", map[string]any{"branch": "slow", "ref": "main"})
		if d := time.Since(start); d < 300*time.Millisecond {
			t.Fatalf("answered after %v", d)
		}
	})
	t.Run("a timed-out slow call was still applied", func(t *testing.T) {
		e.must(201, "POST", "", "/_control/faults", map[string]any{"path": "/projects/1/repository/branches", "kind": "delay", "delay": "2s"})
		c := &http.Client{Timeout: 200 * time.Millisecond}
		body, _ := json.Marshal(map[string]any{"branch": "slow2", "ref": "main"})
		req, _ := http.NewRequest("POST", e.base+"/api/v4/projects/1/repository/branches", bytes.NewReader(body))
		req.Header.Set("PRIVATE-TOKEN", tokBot)
		req.Header.Set("Content-Type", "application/json")
		if res, err := c.Do(req); err == nil {
			res.Body.Close()
			t.Fatalf("want a timeout")
		}
		eventually(t, "branch slow2", func() bool { return e.call("GET", tokBot, "/projects/1/repository/branches/slow2", nil).Status == 200 })
	})
	t.Run("a call held before it applies goes on when released", func(t *testing.T) {
		e.must(201, "POST", "", "/_control/faults", map[string]any{"method": "POST", "path": "/projects/1/repository/branches", "kind": "delay", "delay": "1m", "phase": "before"})
		done := make(chan resp, 1)
		go func() {
			done <- e.call("POST", tokBot, "/projects/1/repository/branches", map[string]any{"branch": "held", "ref": "main"})
		}()
		eventually(t, "the call held", func() bool {
			return e.must(200, "GET", "", "/_control/faults/held", nil).obj()["held"] == float64(1)
		})
		e.must(404, "GET", tokBot, "/projects/1/repository/branches/held", nil)
		if n := e.must(200, "POST", "", "/_control/faults/release", nil).obj()["released"]; n != float64(1) {
			t.Fatalf("released %v, want 1", n)
		}
		select {
		case r := <-done:
			if r.Status != 201 {
				t.Fatalf("the released call answered %d: %s", r.Status, r.Raw)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the released call never answered")
		}
		e.must(200, "GET", tokBot, "/projects/1/repository/branches/held", nil)
		if n := e.must(200, "GET", "", "/_control/faults/held", nil).obj()["held"]; n != float64(0) {
			t.Fatalf("still held: %v", n)
		}
	})
	t.Run("invalid fault is 400", func(t *testing.T) {
		e.must(400, "POST", "", "/_control/faults", map[string]any{"kind": "explode"})
		e.must(400, "POST", "", "/_control/faults", map[string]any{"kind": "status", "status": 42})
	})
}

func TestWebhooks(t *testing.T) {
	e := newEnv(t)
	iid := e.readyMR("wh", map[string]string{"bindings/w.yaml": binding("w")})
	e.must(200, "PUT", tokA1, e.mrPath(iid)+"/merge", nil)
	var mrHooks []recordedHook
	eventually(t, "merge hook", func() bool {
		mrHooks = nil
		for _, h := range e.hooks.all() {
			if h.Header.Get("X-Gitlab-Event") == "Merge Request Hook" {
				mrHooks = append(mrHooks, h)
			}
		}
		return len(mrHooks) > 0 && mrHooks[len(mrHooks)-1].Body["object_attributes"].(map[string]any)["action"] == "merge"
	})
	t.Run("headers and payload", func(t *testing.T) {
		var actions []string
		for _, h := range mrHooks {
			if h.Path != "/callbacks/gitlab" || h.Header.Get("X-Gitlab-Token") != "hook-secret" ||
				h.Header.Get("X-Gitlab-Event-UUID") == "" || h.Header.Get("X-Gitlab-Webhook-UUID") == "" || h.Header.Get("Idempotency-Key") == "" {
				t.Fatalf("hook: %s %v", h.Path, h.Header)
			}
			a := h.Body["object_attributes"].(map[string]any)
			if h.Body["object_kind"] != "merge_request" || a["iid"].(float64) != float64(iid) || h.Body["project"].(map[string]any)["id"].(float64) != 1 {
				t.Fatalf("payload: %v", h.Body)
			}
			actions = append(actions, a["action"].(string))
		}
		want := "open approval approved merge"
		if strings.Join(actions, " ") != want {
			t.Fatalf("actions %v, want %s", actions, want)
		}
		if st := mrHooks[len(mrHooks)-1].Body["object_attributes"].(map[string]any)["state"]; st != "merged" {
			t.Fatalf("merge hook state %v", st)
		}
	})
	t.Run("redelivery keeps the Idempotency-Key and event UUID", func(t *testing.T) {
		events := e.must(200, "GET", "", "/_control/webhooks", nil).list()
		last := events[len(events)-1]
		n := len(e.hooks.all())
		e.must(202, "POST", "", "/_control/webhooks/redeliver", map[string]any{"seq": last["seq"]})
		eventually(t, "redelivery", func() bool { return len(e.hooks.all()) == n+1 })
		all := e.hooks.all()
		again := all[len(all)-1]
		var orig recordedHook
		for _, h := range all[:n] {
			if h.Header.Get("Idempotency-Key") == last["idempotency_key"] {
				orig = h
			}
		}
		if orig.Header == nil || again.Header.Get("Idempotency-Key") != orig.Header.Get("Idempotency-Key") ||
			again.Header.Get("X-Gitlab-Event-UUID") != orig.Header.Get("X-Gitlab-Event-UUID") ||
			again.Header.Get("X-Gitlab-Webhook-UUID") == orig.Header.Get("X-Gitlab-Webhook-UUID") {
			t.Fatalf("orig %v\nagain %v", orig.Header, again.Header)
		}
		e.must(404, "POST", "", "/_control/webhooks/redeliver", map[string]any{"seq": 9999})
	})
}

func TestControlStateAndReset(t *testing.T) {
	e := newEnv(t)
	iid := e.openMR("st", map[string]string{"bindings/s.yaml": binding("s")})
	st := e.must(200, "GET", "", "/_control/state", nil).obj()
	projects := st["projects"].([]any)
	p := projects[0].(map[string]any)
	if p["path"] != "config/bindings" || len(p["merge_requests"].([]any)) != 1 || p["branches"].(map[string]any)["st"] == nil {
		t.Fatalf("state: %v", st)
	}
	e.must(200, "PUT", "", "/_control/settings", map[string]any{"approvals_required": 1, "mergeability_delay": "10ms"})
	if s := e.must(200, "GET", "", "/_control/settings", nil).obj(); s["approvals_required"].(float64) != 1 || s["mergeability_delay"] != "10ms" {
		t.Fatalf("settings: %v", s)
	}
	e.must(200, "POST", "", "/_control/reset", nil)
	e.must(404, "GET", tokBot, e.mrPath(iid), nil)
	e.must(404, "GET", tokBot, "/projects/1/repository/branches/st", nil)
	e.must(200, "GET", tokBot, "/projects/1/repository/files/bindings%2FREADME.md/raw", nil)
	if s := e.must(200, "GET", "", "/_control/settings", nil).obj(); s["approvals_required"].(float64) != 2 {
		t.Fatalf("reset must restore settings: %v", s)
	}
	if iid2 := e.openMR("st2", map[string]string{"bindings/s.yaml": binding("s")}); iid2 != 1 {
		t.Fatalf("iids restart after reset, got %d", iid2)
	}
}
