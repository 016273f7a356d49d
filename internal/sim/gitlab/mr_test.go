package gitlab

import (
	"strings"
	"sync"
	"testing"
	"time"
)

func TestCreateMR(t *testing.T) {
	e := newEnv(t)
	e.branchWithFiles("req-1", map[string]string{"bindings/a.yaml": binding("alice")})
	t.Run("201 with GitLab's fields", func(t *testing.T) {
		r := e.must(201, "POST", tokBot, "/projects/1/merge_requests", map[string]any{
			"source_branch": "req-1", "target_branch": "main", "title": "Add alice", "description": "op-1",
		})
		m := r.obj()
		if m["iid"].(float64) != 1 || m["state"] != "opened" || m["project_id"].(float64) != 1 ||
			m["source_branch"] != "req-1" || m["target_branch"] != "main" || m["description"] != "op-1" ||
			len(m["sha"].(string)) != 40 || !strings.HasSuffix(m["web_url"].(string), "/config/bindings/-/merge_requests/1") {
			t.Fatalf("mr: %s", r.Raw)
		}
		if _, ok := m["rebase_in_progress"]; ok {
			t.Fatalf("rebase_in_progress only with include_rebase_in_progress")
		}
		if m["author"].(map[string]any)["username"] != "changeflow-bot" {
			t.Fatalf("author: %v", m["author"])
		}
	})
	t.Run("second open MR for the branch is 409 with the existing iid", func(t *testing.T) {
		r := e.must(409, "POST", tokBot, "/projects/1/merge_requests", map[string]any{
			"source_branch": "req-1", "target_branch": "main", "title": "again",
		})
		msgs, _ := r.obj()["message"].([]any)
		if len(msgs) != 1 || msgs[0] != "Another open merge request already exists for this source branch: !1" {
			t.Fatalf("body: %s", r.Raw)
		}
	})
	t.Run("missing title is 400", func(t *testing.T) {
		e.must(400, "POST", tokBot, "/projects/1/merge_requests", map[string]any{"source_branch": "req-1", "target_branch": "main"})
	})
	t.Run("missing source branch is 400", func(t *testing.T) {
		e.must(400, "POST", tokBot, "/projects/1/merge_requests", map[string]any{"source_branch": "nope", "target_branch": "main", "title": "x"})
	})
	t.Run("observer cannot open MRs", func(t *testing.T) {
		e.must(403, "POST", tokObserver, "/projects/1/merge_requests", map[string]any{"source_branch": "req-1", "target_branch": "main", "title": "x"})
	})
	t.Run("missing MR is 404", func(t *testing.T) {
		e.must(404, "GET", tokBot, "/projects/1/merge_requests/99", nil)
	})
}

func TestMergeabilityIsAsynchronous(t *testing.T) {
	// The check's phases are read off the simulator's clock, which the
	// test moves: on real time a loaded machine's first read could land
	// past the 400 ms and never see "unchecked" (seen in a parallel run).
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	e := newEnv(t, func(o *Options) { o.MergeabilityDelay = 400e6; o.PipelineDuration = 20e6; o.Now = clock })
	iid := e.openMR("req", map[string]string{"bindings/a.yaml": binding("alice")})
	status := func() string { return e.mr(iid)["detailed_merge_status"].(string) }
	if st := status(); st != "unchecked" {
		t.Fatalf("right after the MR opened: %s, want unchecked", st)
	}
	advance(250 * time.Millisecond)
	if st := status(); st != "checking" {
		t.Fatalf("past half the check's time: %s, want checking", st)
	}
	advance(200 * time.Millisecond)
	eventually(t, "not_approved", func() bool {
		advance(20 * time.Millisecond) // the pipeline's time, if it reads the clock
		return status() == "not_approved"
	})
}

func TestListMRs(t *testing.T) {
	e := newEnv(t)
	for _, b := range []string{"l1", "l2", "l3"} {
		e.openMR(b, map[string]string{"bindings/" + b + ".yaml": binding(b)})
	}
	e.must(200, "PUT", tokBot, e.mrPath(2), map[string]any{"state_event": "close"})
	t.Run("filter by source branch and state", func(t *testing.T) {
		l := e.must(200, "GET", tokBot, "/projects/1/merge_requests?source_branch=l1&state=opened", nil).list()
		if len(l) != 1 || l[0]["iid"].(float64) != 1 {
			t.Fatalf("list: %v", l)
		}
		l = e.must(200, "GET", tokBot, "/projects/1/merge_requests?state=closed", nil).list()
		if len(l) != 1 || l[0]["iid"].(float64) != 2 {
			t.Fatalf("closed: %v", l)
		}
	})
	t.Run("pagination headers", func(t *testing.T) {
		r := e.must(200, "GET", tokBot, "/projects/1/merge_requests?per_page=2&page=1", nil)
		h := r.Header
		if len(r.list()) != 2 || h.Get("X-Total") != "3" || h.Get("X-Total-Pages") != "2" || h.Get("X-Page") != "1" ||
			h.Get("X-Per-Page") != "2" || h.Get("X-Next-Page") != "2" || !strings.Contains(h.Get("Link"), `rel="next"`) ||
			!strings.Contains(h.Get("Link"), "/gitlab/api/v4/projects/1/merge_requests?") {
			t.Fatalf("headers: %v", h)
		}
		r = e.must(200, "GET", tokBot, "/projects/1/merge_requests?per_page=2&page=2", nil)
		if len(r.list()) != 1 || r.Header.Get("X-Next-Page") != "" || r.list()[0]["iid"].(float64) != 1 {
			t.Fatalf("page 2: %s %v", r.Raw, r.Header)
		}
	})
}

func TestUpdateAndCloseMR(t *testing.T) {
	e := newEnv(t)
	iid := e.openMR("u1", map[string]string{"bindings/u.yaml": binding("u")})
	t.Run("no parameter is 400", func(t *testing.T) {
		e.must(400, "PUT", tokBot, e.mrPath(iid), map[string]any{})
	})
	t.Run("update title and description", func(t *testing.T) {
		m := e.must(200, "PUT", tokBot, e.mrPath(iid), map[string]any{"title": "New", "description": "d"}).obj()
		if m["title"] != "New" || m["description"] != "d" {
			t.Fatalf("mr: %v", m)
		}
	})
	t.Run("close", func(t *testing.T) {
		m := e.must(200, "PUT", tokBot, e.mrPath(iid), map[string]any{"state_event": "close"}).obj()
		if m["state"] != "closed" || m["detailed_merge_status"] != "not_open" || m["closed_by"] == nil {
			t.Fatalf("mr: %v", m)
		}
	})
	t.Run("a new MR for the branch is allowed once closed", func(t *testing.T) {
		e.must(201, "POST", tokBot, "/projects/1/merge_requests", map[string]any{"source_branch": "u1", "target_branch": "main", "title": "again"})
	})
	t.Run("reopen conflicts with the new open MR", func(t *testing.T) {
		e.must(409, "PUT", tokBot, e.mrPath(iid), map[string]any{"state_event": "reopen"})
	})
	t.Run("draft title", func(t *testing.T) {
		m := e.must(200, "PUT", tokBot, e.mrPath(2), map[string]any{"title": "Draft: wip"}).obj()
		if m["draft"] != true || m["detailed_merge_status"] != "draft_status" {
			t.Fatalf("mr: %v", m)
		}
	})
}
