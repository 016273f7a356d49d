package gitlab

import (
	"net/url"
	"testing"
)

func protectedPath(name string) string {
	return "/projects/1/protected_branches/" + url.PathEscape(name)
}

func commitTo(branch string) map[string]any {
	return map[string]any{"branch": branch, "start_branch": "main", "commit_message": "sneak",
		"actions": []map[string]any{{"action": "create", "file_path": "bindings/sneak.yaml", "content": binding("mallory")}}}
}

// TestProtectedChangeflowBranches: the local world protects changeflow/*
// for changeflow-bot alone; a push through the commits API, a branch
// creation or a deletion by anyone else is GitLab's 403, the bot's go
// through, and removing the rule opens the namespace again.
func TestProtectedChangeflowBranches(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.ProtectChangeflow = true })

	list := e.must(200, "GET", tokBot, "/projects/1/protected_branches", nil).list()
	if len(list) != 1 || list[0]["name"] != "changeflow/*" || list[0]["allow_force_push"] != true {
		t.Fatalf("protected branches = %v", list)
	}
	push := list[0]["push_access_levels"].([]any)
	merge := list[0]["merge_access_levels"].([]any)
	if len(push) != 1 || push[0].(map[string]any)["user_id"] != float64(2) ||
		len(merge) != 1 || merge[0].(map[string]any)["user_id"] != float64(2) {
		t.Fatalf("push %v merge %v, want changeflow-bot (id 2) alone", push, merge)
	}
	e.must(403, "GET", tokObserver, "/projects/1/protected_branches", nil) // a reporter may not read the rules
	if got := e.must(200, "GET", tokBot, protectedPath("changeflow/*"), nil).str("name"); got != "changeflow/*" {
		t.Fatalf("single rule = %q", got)
	}

	t.Run("a person's push to a changeflow branch is refused", func(t *testing.T) {
		for _, tok := range []string{tokA1, tokMaint} {
			e.must(403, "POST", tok, "/projects/1/repository/commits", commitTo("changeflow/op-sneak"))
			e.must(403, "POST", tok, "/projects/1/repository/branches", map[string]any{"branch": "changeflow/batch-9", "ref": "main"})
		}
		e.must(404, "GET", tokBot, "/projects/1/repository/branches/"+url.PathEscape("changeflow/op-sneak"), nil)
		// Elsewhere a developer still pushes.
		e.must(201, "POST", tokA1, "/projects/1/repository/commits", commitTo("people/feature"))
	})
	t.Run("the committer pushes, overwrites and deletes its branches", func(t *testing.T) {
		e.must(201, "POST", tokBot, "/projects/1/repository/commits", commitTo("changeflow/op-1"))
		force := commitTo("changeflow/op-1")
		force["force"] = true
		e.must(201, "POST", tokBot, "/projects/1/repository/commits", force)
		e.must(403, "DELETE", tokA1, "/projects/1/repository/branches/"+url.PathEscape("changeflow/op-1"), nil)
		e.must(403, "POST", tokA1, "/projects/1/repository/commits", map[string]any{"branch": "changeflow/op-1", "commit_message": "onto",
			"actions": []map[string]any{{"action": "create", "file_path": "bindings/x.yaml", "content": binding("x")}}})
		e.must(204, "DELETE", tokBot, "/projects/1/repository/branches/"+url.PathEscape("changeflow/op-1"), nil)
	})
	t.Run("an MR into a changeflow branch is merged by nobody else", func(t *testing.T) {
		e.must(201, "POST", tokBot, "/projects/1/repository/branches", map[string]any{"branch": "changeflow/op-2", "ref": "main"})
		e.branchWithFiles("people/into", map[string]string{"bindings/into.yaml": binding("into")})
		r := e.must(201, "POST", tokA1, "/projects/1/merge_requests", map[string]any{
			"source_branch": "people/into", "target_branch": "changeflow/op-2", "title": "into changeflow"})
		iid := int64(r.obj()["iid"].(float64))
		e.must(401, "PUT", tokA2, e.mrPath(iid)+"/merge", nil)
	})
	t.Run("only a maintainer changes the rules; removing it opens the namespace", func(t *testing.T) {
		e.must(403, "DELETE", tokBot, protectedPath("changeflow/*"), nil)
		e.must(403, "POST", tokBot, "/projects/1/protected_branches", map[string]any{"name": "x/*"})
		e.must(204, "DELETE", tokMaint, protectedPath("changeflow/*"), nil)
		e.must(404, "GET", tokBot, protectedPath("changeflow/*"), nil)
		e.must(201, "POST", tokA1, "/projects/1/repository/commits", commitTo("changeflow/op-sneak"))
	})
	t.Run("a rule without force push refuses the committer's overwrite and rebase", func(t *testing.T) {
		r := e.must(201, "POST", tokMaint, "/projects/1/protected_branches", map[string]any{
			"name": "changeflow/*", "allowed_to_push": []map[string]any{{"user_id": 2}}, "merge_access_level": 0})
		if r.obj()["allow_force_push"] != false {
			t.Fatalf("created rule %s", r.Raw)
		}
		e.must(409, "POST", tokMaint, "/projects/1/protected_branches", map[string]any{"name": "changeflow/*"})
		e.must(201, "POST", tokBot, "/projects/1/repository/commits", commitTo("changeflow/op-3"))
		force := commitTo("changeflow/op-3")
		force["force"] = true
		e.must(403, "POST", tokBot, "/projects/1/repository/commits", force)
		r = e.must(201, "POST", tokBot, "/projects/1/merge_requests", map[string]any{
			"source_branch": "changeflow/op-3", "target_branch": "main", "title": "op-3"})
		e.must(403, "PUT", tokBot, e.mrPath(int64(r.obj()["iid"].(float64)))+"/rebase", nil)
	})
	t.Run("a reset protects again", func(t *testing.T) {
		e.must(200, "POST", "", "/_control/reset", nil)
		e.must(200, "GET", tokBot, protectedPath("changeflow/*"), nil)
	})
}

func TestUnprotectedByDefault(t *testing.T) {
	e := newEnv(t)
	if l := e.must(200, "GET", tokBot, "/projects/1/protected_branches", nil).list(); len(l) != 0 {
		t.Fatalf("protected branches = %v", l)
	}
	e.must(201, "POST", tokA1, "/projects/1/repository/commits", commitTo("changeflow/op-1"))
}

func TestProjectMembers(t *testing.T) {
	e := newEnv(t)
	for id, want := range map[string]float64{"1": 40, "2": 30, "3": 30, "5": 20} {
		m := e.must(200, "GET", tokBot, "/projects/1/members/all/"+id, nil).obj()
		if m["access_level"] != want || m["id"] == nil || m["username"] == "" {
			t.Fatalf("member %s = %v, want access_level %v", id, m, want)
		}
	}
	e.must(404, "GET", tokBot, "/projects/1/members/all/999", nil)
}

// TestProjectHooks: the seeded hook is what the simulator delivers from;
// GitLab never shows its token, only a maintainer may list or change the
// hooks, and without a hook nothing is delivered.
func TestProjectHooks(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.HookURLs = []string{"http://cf.example/callbacks/gitlab"} })
	e.must(403, "GET", tokBot, "/projects/1/hooks", nil)
	hooks := e.must(200, "GET", tokMaint, "/projects/1/hooks", nil).list()
	if len(hooks) != 1 || hooks[0]["url"] != "http://cf.example/callbacks/gitlab" ||
		hooks[0]["merge_requests_events"] != true || hooks[0]["pipeline_events"] != true {
		t.Fatalf("hooks = %v", hooks)
	}
	if _, ok := hooks[0]["token"]; ok {
		t.Fatal("the hook's token is returned")
	}
	e.openMR("req/one", map[string]string{"bindings/one.yaml": binding("one")})
	eventually(t, "a delivery", func() bool { return len(e.hooks.all()) > 0 })
	if got := e.hooks.all()[0].Header.Get("X-Gitlab-Token"); got != "hook-secret" {
		t.Fatalf("token %q", got)
	}

	id := itoa(int64(hooks[0]["id"].(float64)))
	e.must(403, "DELETE", tokBot, "/projects/1/hooks/"+id, nil)
	e.must(204, "DELETE", tokMaint, "/projects/1/hooks/"+id, nil)
	e.must(404, "DELETE", tokMaint, "/projects/1/hooks/"+id, nil)
	before := len(e.hooks.all())
	e.openMR("req/two", map[string]string{"bindings/two.yaml": binding("two")})
	events := e.must(200, "GET", "", "/_control/webhooks", nil)
	if len(e.hooks.all()) != before {
		t.Fatalf("delivered without a hook: %d → %d (%s)", before, len(e.hooks.all()), events.Raw)
	}

	e.must(201, "POST", tokMaint, "/projects/1/hooks", map[string]any{"url": "http://cf.example/callbacks/gitlab",
		"token": "another-secret", "merge_requests_events": true})
	e.openMR("req/three", map[string]string{"bindings/three.yaml": binding("three")})
	eventually(t, "a delivery with the new hook's token", func() bool {
		all := e.hooks.all()
		return len(all) > before && all[len(all)-1].Header.Get("X-Gitlab-Token") == "another-secret"
	})
}
