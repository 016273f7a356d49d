package gitlab

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestNewAndClose(t *testing.T) {
	t.Run("DataDir holds the repositories and survives Close", func(t *testing.T) {
		dir := t.TempDir()
		s, err := New(Options{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, "world-0", "config", "bindings.git", "HEAD")); err != nil {
			t.Fatalf("bare repo: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if _, err := os.Stat(filepath.Join(dir, "world-0")); err != nil {
			t.Fatalf("data dir removed: %v", err)
		}
	})
	t.Run("a temp dir is removed on Close", func(t *testing.T) {
		s, err := New(Options{})
		if err != nil {
			t.Fatal(err)
		}
		dir := s.dataDir
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("temp dir still there: %v", err)
		}
	})
	t.Run("Close with pipelines in flight stops their timers", func(t *testing.T) {
		e := newEnv(t, func(o *Options) { o.PipelineDuration = time.Hour })
		e.openMR("inflight", map[string]string{"bindings/i.yaml": binding("i")})
		// Cleanup closes the server; -race and the scheduler's WaitGroup
		// catch a timer that outlives it.
	})
}

func TestSettingsSwitches(t *testing.T) {
	t.Run("keep approvals on push", func(t *testing.T) {
		e := newEnv(t, func(o *Options) { o.KeepApprovalsOnPush = true })
		iid := e.openMR("k", map[string]string{"bindings/k.yaml": binding("k")})
		e.must(201, "POST", tokA1, e.mrPath(iid)+"/approve", nil)
		e.must(201, "POST", tokBot, "/projects/1/repository/commits", map[string]any{
			"branch": "k", "commit_message": "more", "actions": []any{map[string]any{"action": "create", "file_path": "bindings/k2.yaml", "content": binding("k2")}},
		})
		if a := e.must(200, "GET", tokA1, e.mrPath(iid)+"/approvals", nil).obj(); len(a["approved_by"].([]any)) != 1 {
			t.Fatalf("approvals: %v", a)
		}
	})
	t.Run("approvals required is a setting", func(t *testing.T) {
		e := newEnv(t)
		e.must(200, "PUT", "", "/_control/settings", map[string]any{"approvals_required": 1})
		iid := e.openMR("one", map[string]string{"bindings/o.yaml": binding("o")})
		e.must(201, "POST", tokA1, e.mrPath(iid)+"/approve", nil)
		e.waitStatus(iid, "mergeable")
	})
	t.Run("rebase with skip_ci creates no pipeline", func(t *testing.T) {
		e := newEnv(t)
		iid := e.openMR("s1", map[string]string{"bindings/s1.yaml": binding("s1")})
		other := e.openMR("s2", map[string]string{"bindings/s2.yaml": binding("s2")})
		e.must(200, "POST", "", "/_control/projects/1/merge_requests/"+itoa(other)+"/merge", nil)
		e.must(202, "PUT", tokBot, e.mrPath(iid)+"/rebase", map[string]any{"skip_ci": true})
		eventually(t, "rebased", func() bool { return e.mr(iid)["rebase_in_progress"] == false })
		if l := e.must(200, "GET", tokBot, e.mrPath(iid)+"/pipelines", nil).list(); len(l) != 1 {
			t.Fatalf("pipelines after skip_ci rebase: %d", len(l))
		}
		if m := e.mr(iid); m["head_pipeline"] != nil {
			t.Fatalf("head pipeline must be gone for the new sha: %v", m["head_pipeline"])
		}
	})
}

func TestFaultDelayBeforeAndDelete(t *testing.T) {
	e := newEnv(t)
	t.Run("delay before applying", func(t *testing.T) {
		e.must(201, "POST", "", "/_control/faults", map[string]any{"path": "/projects/1/repository/branches", "kind": "delay", "delay": "600ms", "phase": "before"})
		done := make(chan resp, 1)
		go func() {
			done <- e.call("POST", tokBot, "/projects/1/repository/branches", map[string]any{"branch": "later", "ref": "main"})
		}()
		// While the call is held, nothing has been applied.
		eventually(t, "fault hit", func() bool {
			l := e.must(200, "GET", "", "/_control/faults", nil).list()
			return len(l) == 0
		})
		e.must(404, "GET", tokBot, "/projects/1/repository/branches/later", nil)
		if r := <-done; r.Status != 201 {
			t.Fatalf("held call: %d %s", r.Status, r.Raw)
		}
	})
	t.Run("delete one fault", func(t *testing.T) {
		f := e.must(201, "POST", "", "/_control/faults", map[string]any{"path": "/projects/1", "kind": "status", "status": 503, "count": -1}).obj()
		e.must(503, "GET", tokBot, "/projects/1", nil)
		e.must(503, "GET", tokBot, "/projects/1", nil)
		e.must(204, "DELETE", "", "/_control/faults/"+itoa(int64(f["id"].(float64))), nil)
		e.must(200, "GET", tokBot, "/projects/1", nil)
		e.must(404, "DELETE", "", "/_control/faults/999", nil)
	})
}
