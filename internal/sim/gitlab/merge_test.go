package gitlab

import (
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestMergeStatuses(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	var merged []MergeEvent
	e.sim.OnMerge(func(ev MergeEvent) {
		mu.Lock()
		merged = append(merged, ev)
		mu.Unlock()
	})
	iid := e.openMR("m1", map[string]string{"bindings/a.yaml": binding("alice"), "bindings/b.yaml": binding("bob")})
	p := e.mrPath(iid)
	sha := e.mr(iid)["sha"].(string)

	t.Run("right after creation it is not mergeable: 405", func(t *testing.T) {
		e.must(405, "PUT", tokA1, p+"/merge", map[string]any{"sha": sha})
	})
	e.waitStatus(iid, "not_approved")
	t.Run("approvals missing: 405", func(t *testing.T) {
		e.must(201, "POST", tokA1, p+"/approve", nil)
		r := e.must(405, "PUT", tokA1, p+"/merge", map[string]any{"sha": sha})
		if r.str("message") != "405 Method Not Allowed" {
			t.Fatalf("body: %s", r.Raw)
		}
	})
	e.must(201, "POST", tokA2, p+"/approve", nil)
	e.waitStatus(iid, "mergeable")
	t.Run("cannot merge: 401", func(t *testing.T) {
		e.must(401, "PUT", tokObserver, p+"/merge", map[string]any{"sha": sha})
	})
	t.Run("sha mismatch: 409", func(t *testing.T) {
		r := e.must(409, "PUT", tokA1, p+"/merge", map[string]any{"sha": strings.Repeat("b", 40)})
		if r.str("message") != "SHA does not match HEAD of source branch: "+sha {
			t.Fatalf("body: %s", r.Raw)
		}
	})
	t.Run("merge 200 with a real merge commit carrying every file", func(t *testing.T) {
		m := e.must(200, "PUT", tokA1, p+"/merge", map[string]any{"sha": sha, "should_remove_source_branch": true}).obj()
		if m["state"] != "merged" || len(m["merge_commit_sha"].(string)) != 40 || m["merged_by"].(map[string]any)["username"] != "approver-1" {
			t.Fatalf("mr: %v", m)
		}
		c := e.must(200, "GET", tokBot, "/projects/1/repository/commits/main", nil).obj()
		if c["id"] != m["merge_commit_sha"] || len(c["parent_ids"].([]any)) != 2 {
			t.Fatalf("main head: %v", c)
		}
		for _, f := range []string{"bindings/a.yaml", "bindings/b.yaml"} {
			e.must(200, "GET", tokBot, "/projects/1/repository/files/"+url.PathEscape(f)+"/raw?ref=main", nil)
		}
		e.must(404, "GET", tokBot, "/projects/1/repository/branches/m1", nil)
	})
	t.Run("already merged: 405", func(t *testing.T) {
		e.must(405, "PUT", tokA1, p+"/merge", map[string]any{"sha": sha})
	})
	t.Run("OnMerge sees the merge", func(t *testing.T) {
		eventually(t, "merge event", func() bool { mu.Lock(); defer mu.Unlock(); return len(merged) == 1 })
		mu.Lock()
		defer mu.Unlock()
		if merged[0].MRIID != iid || merged[0].ProjectID != 1 || merged[0].TargetBranch != "main" || merged[0].MergeCommitSHA == "" {
			t.Fatalf("event: %+v", merged[0])
		}
	})
}

func TestMergeRefusals(t *testing.T) {
	e := newEnv(t)
	t.Run("pipeline failed: 405 ci_must_pass", func(t *testing.T) {
		iid := e.openMR("bad", map[string]string{"bindings/bad.yaml": "- subject: x\n"})
		e.must(201, "POST", tokA1, e.mrPath(iid)+"/approve", nil)
		e.must(201, "POST", tokA2, e.mrPath(iid)+"/approve", nil)
		e.waitStatus(iid, "ci_must_pass")
		e.must(405, "PUT", tokA1, e.mrPath(iid)+"/merge", nil)
	})
	t.Run("draft: 405", func(t *testing.T) {
		iid := e.readyMR("draft", map[string]string{"bindings/d.yaml": binding("d")})
		e.must(200, "PUT", tokBot, e.mrPath(iid), map[string]any{"title": "Draft: later"})
		e.must(405, "PUT", tokA1, e.mrPath(iid)+"/merge", nil)
	})
	t.Run("closed: 405", func(t *testing.T) {
		iid := e.readyMR("closed", map[string]string{"bindings/c.yaml": binding("c")})
		e.must(200, "PUT", tokBot, e.mrPath(iid), map[string]any{"state_event": "close"})
		e.must(405, "PUT", tokA1, e.mrPath(iid)+"/merge", nil)
	})
	t.Run("conflict: 405 and has_conflicts", func(t *testing.T) {
		iid := e.readyMR("conf", map[string]string{"bindings/k.yaml": binding("k")})
		r := e.must(200, "POST", "", "/_control/projects/1/merge_requests/"+itoa(iid)+"/conflict", nil)
		if r.obj()["conflicts"] != true {
			t.Fatalf("control conflict: %s", r.Raw)
		}
		e.waitStatus(iid, "conflict")
		if e.mr(iid)["has_conflicts"] != true {
			t.Fatalf("has_conflicts must be true")
		}
		e.must(405, "PUT", tokA1, e.mrPath(iid)+"/merge", nil)
	})
	t.Run("merge failure: 422 with merge_error", func(t *testing.T) {
		iid := e.readyMR("fail", map[string]string{"bindings/f.yaml": binding("f")})
		e.must(200, "POST", "", "/_control/merge_failures", map[string]any{"count": 1, "message": "pre-receive hook declined"})
		r := e.must(422, "PUT", tokA1, e.mrPath(iid)+"/merge", nil)
		if r.str("message") != "Branch cannot be merged" || e.mr(iid)["merge_error"] != "pre-receive hook declined" {
			t.Fatalf("body: %s / %v", r.Raw, e.mr(iid)["merge_error"])
		}
		e.must(200, "PUT", "", "/_control/settings", map[string]any{"legacy_merge_406": true})
		e.must(200, "POST", "", "/_control/merge_failures", nil)
		e.must(406, "PUT", tokA1, e.mrPath(iid)+"/merge", nil)
		e.must(200, "PUT", tokA1, e.mrPath(iid)+"/merge", nil)
	})
}

func TestOutsideMergeAndCloseRace(t *testing.T) {
	e := newEnv(t)
	t.Run("merge from outside", func(t *testing.T) {
		iid := e.openMR("o1", map[string]string{"bindings/o1.yaml": binding("o1")})
		m := e.must(200, "POST", "", "/_control/projects/1/merge_requests/"+itoa(iid)+"/merge", nil).obj()
		if m["state"] != "merged" || m["merged_by"].(map[string]any)["username"] != "maintainer" {
			t.Fatalf("mr: %v", m)
		}
	})
	t.Run("close merges first when the race is armed", func(t *testing.T) {
		iid := e.openMR("o2", map[string]string{"bindings/o2.yaml": binding("o2")})
		e.must(200, "POST", "", "/_control/close_merge_race", map[string]any{"count": 1})
		m := e.must(200, "PUT", tokBot, e.mrPath(iid), map[string]any{"state_event": "close"}).obj()
		if m["state"] != "merged" || m["merge_commit_sha"] == nil {
			t.Fatalf("close must find it merged: %v", m)
		}
		iid2 := e.openMR("o3", map[string]string{"bindings/o3.yaml": binding("o3")})
		if m := e.must(200, "PUT", tokBot, e.mrPath(iid2), map[string]any{"state_event": "close"}).obj(); m["state"] != "closed" {
			t.Fatalf("race is one-shot: %v", m)
		}
	})
}

func TestRebase(t *testing.T) {
	e := newEnv(t)
	t.Run("clean rebase moves the head and keeps approvals", func(t *testing.T) {
		iid := e.readyMR("r1", map[string]string{"bindings/r1.yaml": binding("r1")})
		e.readyMR("r2", map[string]string{"bindings/r2.yaml": binding("r2")})
		e.must(200, "PUT", tokA1, e.mrPath(2)+"/merge", nil)
		old := e.mr(iid)["sha"].(string)
		r := e.must(202, "PUT", tokBot, e.mrPath(iid)+"/rebase", nil)
		if r.obj()["rebase_in_progress"] != true {
			t.Fatalf("body: %s", r.Raw)
		}
		eventually(t, "rebase done", func() bool { return e.mr(iid)["rebase_in_progress"] == false })
		m := e.mr(iid)
		if m["sha"] == old || m["merge_error"] != nil {
			t.Fatalf("after rebase: sha %v error %v", m["sha"], m["merge_error"])
		}
		main := e.must(200, "GET", tokBot, "/projects/1/repository/commits/main", nil).str("id")
		head := e.must(200, "GET", tokBot, "/projects/1/repository/commits/"+m["sha"].(string), nil).obj()
		if head["parent_ids"].([]any)[0] != main {
			t.Fatalf("rebased head's parent %v, main %s", head["parent_ids"], main)
		}
		if a := e.must(200, "GET", tokA1, e.mrPath(iid)+"/approvals", nil).obj(); len(a["approved_by"].([]any)) != 2 {
			t.Fatalf("rebase must keep approvals: %v", a)
		}
		e.waitStatus(iid, "mergeable")
		e.must(200, "PUT", tokA1, e.mrPath(iid)+"/merge", map[string]any{"sha": m["sha"]})
	})
	t.Run("a rebase in progress shows on the MR and refuses a second one: 409", func(t *testing.T) {
		// Its own simulator whose rebases take an hour: the in-progress
		// state is then there to be seen however slow the machine (with
		// the 20 ms of fastOptions a loaded machine finished the rebase
		// before the second PUT, and the 409 was a 202).
		slow := newEnv(t, func(o *Options) { o.RebaseDuration = time.Hour })
		iid := slow.readyMR("r0", map[string]string{"bindings/r0.yaml": binding("r0")})
		slow.readyMR("r00", map[string]string{"bindings/r00.yaml": binding("r00")})
		slow.must(200, "PUT", tokA1, slow.mrPath(2)+"/merge", nil)
		slow.must(202, "PUT", tokBot, slow.mrPath(iid)+"/rebase", nil)
		if m := slow.mr(iid); m["rebase_in_progress"] != true {
			t.Fatalf("in progress: %v", m["rebase_in_progress"])
		}
		slow.must(409, "PUT", tokBot, slow.mrPath(iid)+"/rebase", nil)
	})
	t.Run("conflicting rebase fails with merge_error", func(t *testing.T) {
		iid := e.openMR("r3", map[string]string{"bindings/r3.yaml": binding("r3")})
		old := e.mr(iid)["sha"]
		e.must(200, "POST", "", "/_control/projects/1/merge_requests/"+itoa(iid)+"/conflict", nil)
		e.must(202, "PUT", tokBot, e.mrPath(iid)+"/rebase", nil)
		eventually(t, "rebase done", func() bool { return e.mr(iid)["rebase_in_progress"] == false })
		m := e.mr(iid)
		if m["merge_error"] != "Rebase failed. Please rebase locally" || m["sha"] != old {
			t.Fatalf("after failed rebase: %v %v", m["merge_error"], m["sha"])
		}
	})
	t.Run("observer cannot rebase: 403", func(t *testing.T) {
		e.must(403, "PUT", tokObserver, e.mrPath(1)+"/rebase", nil)
	})
}
