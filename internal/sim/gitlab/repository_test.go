package gitlab

import (
	"encoding/base64"
	"net/url"
	"strings"
	"testing"
)

func TestAuth(t *testing.T) {
	e := newEnv(t)
	t.Run("unknown token is 401 with GitLab's body", func(t *testing.T) {
		r := e.call("GET", "nope", "/projects/1", nil)
		if r.Status != 401 || r.str("message") != "401 Unauthorized" {
			t.Fatalf("got %d %s", r.Status, r.Raw)
		}
	})
	t.Run("missing token is 401", func(t *testing.T) {
		e.must(401, "GET", "", "/projects/1", nil)
	})
	t.Run("bearer token works", func(t *testing.T) {
		req, _ := newRequest("GET", e.base+"/api/v4/user", nil)
		req.Header.Set("Authorization", "Bearer "+tokA1)
		res := do(t, req)
		if res.Status != 200 || res.str("username") != "approver-1" {
			t.Fatalf("got %d %s", res.Status, res.Raw)
		}
	})
	t.Run("project by url-encoded path", func(t *testing.T) {
		r := e.must(200, "GET", tokBot, "/projects/"+url.PathEscape("config/bindings"), nil)
		if r.obj()["id"].(float64) != 1 || r.str("default_branch") != "main" {
			t.Fatalf("project: %s", r.Raw)
		}
	})
	t.Run("unknown project is 404", func(t *testing.T) {
		e.must(404, "GET", tokBot, "/projects/99/merge_requests", nil)
	})
	t.Run("unknown route is 404, wrong method 405", func(t *testing.T) {
		e.must(404, "GET", tokBot, "/projects/1/nothing-here", nil)
		if r := e.must(405, "PATCH", tokBot, "/projects/1/merge_requests/1/merge", nil); r.obj()["error"] != "405 Not Allowed" {
			t.Fatalf("body: %s", r.Raw)
		}
	})
}

func TestBranches(t *testing.T) {
	e := newEnv(t)
	t.Run("create 201 with the commit", func(t *testing.T) {
		r := e.must(201, "POST", tokBot, "/projects/1/repository/branches", map[string]any{"branch": "feature/a", "ref": "main"})
		if r.str("name") != "feature/a" || r.obj()["commit"].(map[string]any)["id"] == "" {
			t.Fatalf("branch: %s", r.Raw)
		}
	})
	t.Run("existing branch is 400 Branch already exists", func(t *testing.T) {
		r := e.must(400, "POST", tokBot, "/projects/1/repository/branches", map[string]any{"branch": "feature/a", "ref": "main"})
		if r.str("message") != "Branch already exists" {
			t.Fatalf("body: %s", r.Raw)
		}
	})
	t.Run("bad ref is 400", func(t *testing.T) {
		e.must(400, "POST", tokBot, "/projects/1/repository/branches", map[string]any{"branch": "b2", "ref": "nope"})
	})
	t.Run("missing branch parameter is 400", func(t *testing.T) {
		e.must(400, "POST", tokBot, "/projects/1/repository/branches", map[string]any{"ref": "main"})
	})
	t.Run("no push access is 403", func(t *testing.T) {
		e.must(403, "POST", tokObserver, "/projects/1/repository/branches", map[string]any{"branch": "b3", "ref": "main"})
	})
	t.Run("get branch with slash", func(t *testing.T) {
		r := e.must(200, "GET", tokBot, "/projects/1/repository/branches/"+url.PathEscape("feature/a"), nil)
		if r.str("name") != "feature/a" {
			t.Fatalf("branch: %s", r.Raw)
		}
	})
	t.Run("get missing branch is 404", func(t *testing.T) {
		e.must(404, "GET", tokBot, "/projects/1/repository/branches/nope", nil)
	})
	t.Run("delete branch 204", func(t *testing.T) {
		e.must(204, "DELETE", tokBot, "/projects/1/repository/branches/"+url.PathEscape("feature/a"), nil)
		e.must(404, "GET", tokBot, "/projects/1/repository/branches/"+url.PathEscape("feature/a"), nil)
	})
}

func TestCommitsAndFiles(t *testing.T) {
	e := newEnv(t)
	started := false
	commit := func(want int, actions ...map[string]any) resp {
		t.Helper()
		body := map[string]any{"branch": "work", "commit_message": "change", "actions": actions}
		if !started {
			body["start_branch"] = "main"
			started = true
		}
		return e.must(want, "POST", tokBot, "/projects/1/repository/commits", body)
	}
	file := func(ref, p string) resp {
		return e.call("GET", tokBot, "/projects/1/repository/files/"+url.PathEscape(p)+"/raw?ref="+ref, nil)
	}
	t.Run("several actions in one commit", func(t *testing.T) {
		r := commit(201,
			map[string]any{"action": "create", "file_path": "bindings/a.yaml", "content": binding("alice")},
			map[string]any{"action": "create", "file_path": "bindings/b.yaml", "content": base64.StdEncoding.EncodeToString([]byte(binding("bob"))), "encoding": "base64"},
			map[string]any{"action": "update", "file_path": "bindings/README.md", "content": "new readme\n"},
		)
		parents := r.obj()["parent_ids"].([]any)
		if len(parents) != 1 || r.str("title") != "change" || r.str("author_email") != "changeflow-bot@changeflow.local" {
			t.Fatalf("commit: %s", r.Raw)
		}
		if got := file("work", "bindings/b.yaml"); got.Status != 200 || string(got.Raw) != binding("bob") {
			t.Fatalf("b.yaml: %d %q", got.Status, got.Raw)
		}
		if got := file("main", "bindings/a.yaml"); got.Status != 404 {
			t.Fatalf("main must not have a.yaml: %d", got.Status)
		}
	})
	t.Run("create on existing file is 400", func(t *testing.T) {
		r := commit(400, map[string]any{"action": "create", "file_path": "bindings/a.yaml", "content": "x"})
		if r.str("message") != "A file with this name already exists" {
			t.Fatalf("body: %s", r.Raw)
		}
	})
	t.Run("update of a missing file is 400", func(t *testing.T) {
		r := commit(400, map[string]any{"action": "update", "file_path": "bindings/zz.yaml", "content": "x"})
		if r.str("message") != "A file with this name doesn't exist" {
			t.Fatalf("body: %s", r.Raw)
		}
	})
	t.Run("delete of a missing file is 400", func(t *testing.T) {
		commit(400, map[string]any{"action": "delete", "file_path": "bindings/zz.yaml"})
	})
	t.Run("failed commit changes nothing", func(t *testing.T) {
		commit(400,
			map[string]any{"action": "delete", "file_path": "bindings/a.yaml"},
			map[string]any{"action": "update", "file_path": "bindings/zz.yaml", "content": "x"})
		if got := file("work", "bindings/a.yaml"); got.Status != 200 {
			t.Fatalf("a.yaml must survive: %d", got.Status)
		}
	})
	t.Run("delete and move", func(t *testing.T) {
		commit(201,
			map[string]any{"action": "delete", "file_path": "bindings/a.yaml"},
			map[string]any{"action": "move", "previous_path": "bindings/b.yaml", "file_path": "bindings/c.yaml"})
		if got := file("work", "bindings/a.yaml"); got.Status != 404 {
			t.Fatalf("a.yaml deleted: %d", got.Status)
		}
		if got := file("work", "bindings/c.yaml"); got.Status != 200 || string(got.Raw) != binding("bob") {
			t.Fatalf("c.yaml: %d %q", got.Status, got.Raw)
		}
	})
	t.Run("stale last_commit_id is 400", func(t *testing.T) {
		r := commit(400, map[string]any{"action": "update", "file_path": "bindings/c.yaml", "content": "x", "last_commit_id": strings.Repeat("1", 40)})
		if !strings.Contains(r.str("message"), "has changed") {
			t.Fatalf("body: %s", r.Raw)
		}
	})
	t.Run("no start branch for a new branch is 400", func(t *testing.T) {
		e.must(400, "POST", tokBot, "/projects/1/repository/commits", map[string]any{
			"branch": "fresh", "commit_message": "x", "actions": []any{map[string]any{"action": "create", "file_path": "f", "content": "x"}},
		})
	})
	t.Run("start_branch onto an existing other branch is 400", func(t *testing.T) {
		e.must(201, "POST", tokBot, "/projects/1/repository/branches", map[string]any{"branch": "other", "ref": "main"})
		e.must(400, "POST", tokBot, "/projects/1/repository/commits", map[string]any{
			"branch": "work", "start_branch": "other", "commit_message": "x", "actions": []any{map[string]any{"action": "create", "file_path": "f", "content": "x"}},
		})
	})
	t.Run("observer cannot commit", func(t *testing.T) {
		e.must(403, "POST", tokObserver, "/projects/1/repository/commits", map[string]any{
			"branch": "work", "commit_message": "x", "actions": []any{map[string]any{"action": "create", "file_path": "f", "content": "x"}},
		})
	})
	t.Run("get file JSON is base64 with ids", func(t *testing.T) {
		r := e.must(200, "GET", tokBot, "/projects/1/repository/files/"+url.PathEscape("bindings/c.yaml")+"?ref=work", nil)
		b, _ := base64.StdEncoding.DecodeString(r.str("content"))
		if string(b) != binding("bob") || r.str("encoding") != "base64" || len(r.str("blob_id")) != 40 || len(r.str("last_commit_id")) != 40 {
			t.Fatalf("file: %s", r.Raw)
		}
	})
	t.Run("missing file is 404", func(t *testing.T) {
		e.must(404, "GET", tokBot, "/projects/1/repository/files/"+url.PathEscape("bindings/none.yaml")+"?ref=main", nil)
	})
	t.Run("get commit", func(t *testing.T) {
		e.must(200, "GET", tokBot, "/projects/1/repository/commits/work", nil)
		e.must(404, "GET", tokBot, "/projects/1/repository/commits/"+strings.Repeat("f", 40), nil)
	})
}

// TestCommitStartAndForce: the start point of a commit as GitLab's
// commits API has it — start_branch/start_sha mutually exclusive, a
// missing start branch, an existing branch overwritten only with force
// (the new commit's parent is the start point, not the old head), the
// branch's open MR following the new head with its approvals reset.
func TestCommitStartAndForce(t *testing.T) {
	e := newEnv(t)
	action := func(content string) []any {
		return []any{map[string]any{"action": "update", "file_path": "bindings/README.md", "content": content}}
	}
	commit := func(want int, body map[string]any) resp {
		t.Helper()
		body["commit_message"] = "change"
		if _, ok := body["actions"]; !ok {
			body["actions"] = action("x\n")
		}
		return e.must(want, "POST", tokBot, "/projects/1/repository/commits", body)
	}
	head := func(branch string) string {
		return e.must(200, "GET", tokBot, "/projects/1/repository/branches/"+url.PathEscape(branch), nil).obj()["commit"].(map[string]any)["id"].(string)
	}
	parents := func(r resp) []any { return r.obj()["parent_ids"].([]any) }

	iid := e.readyMR("feature", map[string]string{"bindings/f.yaml": binding("fay")})
	mainHead := head("main")
	featureHead := head("feature")

	t.Run("start_branch and start_sha together are 400", func(t *testing.T) {
		r := commit(400, map[string]any{"branch": "feature", "start_branch": "main", "start_sha": mainHead, "force": true})
		if !strings.Contains(r.str("error"), "mutually exclusive") {
			t.Fatalf("body: %s", r.Raw)
		}
	})
	t.Run("a start branch that does not exist is 400", func(t *testing.T) {
		r := commit(400, map[string]any{"branch": "fresh", "start_branch": "nope"})
		if r.str("message") != "You can only create or edit files when you are on a branch" {
			t.Fatalf("body: %s", r.Raw)
		}
	})
	t.Run("an unknown start_sha is 400", func(t *testing.T) {
		commit(400, map[string]any{"branch": "fresh", "start_sha": strings.Repeat("e", 40)})
	})
	t.Run("start_sha onto an existing branch without force is 400", func(t *testing.T) {
		r := commit(400, map[string]any{"branch": "feature", "start_sha": mainHead})
		if !strings.Contains(r.str("message"), "already exists") {
			t.Fatalf("body: %s", r.Raw)
		}
		if head("feature") != featureHead {
			t.Fatal("a refused commit moved the branch")
		}
	})
	t.Run("force with start_branch overwrites the branch with one commit on the start", func(t *testing.T) {
		// main moves first, so "on main's current head" is observable.
		commit(201, map[string]any{"branch": "main", "actions": action("main moved\n")})
		mainHead = head("main")
		r := commit(201, map[string]any{"branch": "feature", "start_branch": "main", "force": true,
			"actions": []any{map[string]any{"action": "create", "file_path": "bindings/g.yaml", "content": binding("gus")}}})
		if ps := parents(r); len(ps) != 1 || ps[0] != mainHead {
			t.Fatalf("parents %v, want [%s]", ps, mainHead)
		}
		if head("feature") != r.str("id") {
			t.Fatal("branch not moved to the forced commit")
		}
		// The old commit's file is gone: the branch was replaced, not extended.
		if got := e.call("GET", tokBot, "/projects/1/repository/files/"+url.PathEscape("bindings/f.yaml")+"/raw?ref=feature", nil); got.Status != 404 {
			t.Fatalf("f.yaml after force: %d", got.Status)
		}
		mr := e.mr(iid)
		if mr["sha"] != r.str("id") {
			t.Fatalf("MR head %v, want %s", mr["sha"], r.str("id"))
		}
		// Approvals are reset on push (the project's default).
		e.waitStatus(iid, "not_approved")
	})
	t.Run("force with start_sha pins the parent", func(t *testing.T) {
		r := commit(201, map[string]any{"branch": "feature", "start_sha": mainHead, "force": true})
		if ps := parents(r); len(ps) != 1 || ps[0] != mainHead {
			t.Fatalf("parents %v, want [%s]", ps, mainHead)
		}
	})
	t.Run("start_branch equal to branch extends it, force or not", func(t *testing.T) {
		before := head("feature")
		r := commit(201, map[string]any{"branch": "feature", "start_branch": "feature", "actions": action("y\n")})
		if ps := parents(r); len(ps) != 1 || ps[0] != before {
			t.Fatalf("parents %v, want [%s]", ps, before)
		}
	})
	t.Run("start_sha creates a new branch", func(t *testing.T) {
		r := commit(201, map[string]any{"branch": "from-sha", "start_sha": mainHead})
		if ps := parents(r); len(ps) != 1 || ps[0] != mainHead {
			t.Fatalf("parents %v, want [%s]", ps, mainHead)
		}
	})
}
