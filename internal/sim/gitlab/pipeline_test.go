package gitlab

import (
	"testing"
	"time"
)

func (e *env) headPipeline(iid int64) map[string]any {
	e.t.Helper()
	hp, _ := e.mr(iid)["head_pipeline"].(map[string]any)
	return hp
}

func (e *env) waitPipeline(iid int64, want string) map[string]any {
	e.t.Helper()
	var hp map[string]any
	eventually(e.t, "head pipeline "+want, func() bool {
		hp = e.headPipeline(iid)
		return hp != nil && hp["status"] == want
	})
	return hp
}

func TestPipelineRule(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		name, content, want string
	}{
		{"valid bindings pass", binding("alice"), "success"},
		{"entry without expiresAt fails", "- subject: alice\n", "failed"},
		{"empty subject fails", "- subject: \"\"\n  expiresAt: x\n", "failed"},
		{"a mapping is not a list", "subject: alice\nexpiresAt: x\n", "failed"},
		{"broken YAML fails", "- subject: [\n", "failed"},
		{"an empty file is not a list", "\n", "failed"},
		{"an empty list passes", "[]\n", "success"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			iid := e.openMR("rule-"+itoa(int64(i)), map[string]string{"bindings/f" + itoa(int64(i)) + ".yaml": c.content})
			e.waitPipeline(iid, c.want)
		})
	}
	t.Run("files outside bindings/ are not checked", func(t *testing.T) {
		iid := e.openMR("rule-other", map[string]string{"docs/x.yaml": "not: [a list"})
		e.waitPipeline(iid, "success")
	})
}

func TestPipelineLifecycle(t *testing.T) {
	e := newEnv(t)
	iid := e.openMR("life", map[string]string{"bindings/l.yaml": binding("l")})
	hp := e.waitPipeline(iid, "success")
	t.Run("created, running, success reach the webhook in order", func(t *testing.T) {
		var seen []string
		eventually(t, "three pipeline hooks", func() bool {
			seen = nil
			for _, h := range e.hooks.all() {
				if h.Header.Get("X-Gitlab-Event") == "Pipeline Hook" {
					seen = append(seen, h.Body["object_attributes"].(map[string]any)["status"].(string))
				}
			}
			return len(seen) == 3
		})
		if seen[0] != "created" || seen[1] != "running" || seen[2] != "success" {
			t.Fatalf("pipeline statuses: %v", seen)
		}
	})
	t.Run("a new head sha gets a new pipeline", func(t *testing.T) {
		e.must(201, "POST", tokBot, "/projects/1/repository/commits", map[string]any{
			"branch": "life", "commit_message": "more", "actions": []any{map[string]any{"action": "create", "file_path": "bindings/l2.yaml", "content": binding("l2")}},
		})
		l := e.must(200, "GET", tokBot, e.mrPath(iid)+"/pipelines", nil).list()
		head := e.mr(iid)["sha"]
		if len(l) != 2 || l[0]["sha"] != head || l[1]["id"] != hp["id"] || l[0]["ref"] != "life" || l[0]["status"] == nil {
			t.Fatalf("pipelines: %v (head %v)", l, head)
		}
		e.waitPipeline(iid, "success")
	})
	t.Run("get pipeline", func(t *testing.T) {
		p := e.must(200, "GET", tokBot, "/projects/1/pipelines/"+itoa(int64(hp["id"].(float64))), nil).obj()
		if p["status"] != "success" || p["sha"] != hp["sha"] || p["finished_at"] == nil || p["started_at"] == nil {
			t.Fatalf("pipeline: %v", p)
		}
		e.must(404, "GET", tokBot, "/projects/1/pipelines/999", nil)
	})
}

func TestForcedPipelines(t *testing.T) {
	// Long enough that a per-MR override always lands on a running pipeline.
	e := newEnv(t, func(o *Options) { o.PipelineDuration = 600 * time.Millisecond })
	t.Run("fail a valid MR", func(t *testing.T) {
		iid := e.openMR("f1", map[string]string{"bindings/f1.yaml": binding("f1")})
		e.must(200, "POST", "", "/_control/pipelines", map[string]any{"mr_iid": iid, "outcome": "fail"})
		e.waitPipeline(iid, "failed")
	})
	t.Run("never finish", func(t *testing.T) {
		iid := e.openMR("f2", map[string]string{"bindings/f2.yaml": binding("f2")})
		e.must(200, "POST", "", "/_control/pipelines", map[string]any{"mr_iid": iid, "outcome": "never"})
		e.waitPipeline(iid, "running")
		// Another pipeline created later finishes while this one keeps running.
		other := e.openMR("f2b", map[string]string{"bindings/f2b.yaml": binding("f2b")})
		e.waitPipeline(other, "success")
		if st := e.headPipeline(iid)["status"]; st != "running" {
			t.Fatalf("never-finishing pipeline is %v", st)
		}
		if e.mr(iid)["detailed_merge_status"] != "ci_still_running" {
			t.Fatalf("status %v", e.mr(iid)["detailed_merge_status"])
		}
		e.must(200, "POST", "", "/_control/pipelines", map[string]any{"mr_iid": iid, "outcome": "pass"})
		e.waitPipeline(iid, "success")
	})
	t.Run("finish after a delay", func(t *testing.T) {
		iid := e.openMR("f3", map[string]string{"bindings/f3.yaml": binding("f3")})
		e.must(200, "POST", "", "/_control/pipelines", map[string]any{"mr_iid": iid, "outcome": "pass", "delay": "300ms"})
		hp := e.waitPipeline(iid, "success")
		started, _ := time.Parse(time.RFC3339Nano, hp["started_at"].(string))
		finished, _ := time.Parse(time.RFC3339Nano, hp["finished_at"].(string))
		if finished.Sub(started) < 250*time.Millisecond {
			t.Fatalf("ran %v, want about 300ms", finished.Sub(started))
		}
	})
	t.Run("next N pipelines anywhere", func(t *testing.T) {
		e.must(200, "POST", "", "/_control/pipelines", map[string]any{"outcome": "fail", "count": 2})
		a := e.openMR("n1", map[string]string{"bindings/n1.yaml": binding("n1")})
		b := e.openMR("n2", map[string]string{"bindings/n2.yaml": binding("n2")})
		c := e.openMR("n3", map[string]string{"bindings/n3.yaml": binding("n3")})
		e.waitPipeline(a, "failed")
		e.waitPipeline(b, "failed")
		e.waitPipeline(c, "success")
	})
	t.Run("bad outcome is 400", func(t *testing.T) {
		e.must(400, "POST", "", "/_control/pipelines", map[string]any{"outcome": "maybe"})
	})
}
