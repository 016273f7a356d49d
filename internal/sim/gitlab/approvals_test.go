package gitlab

import (
	"strings"
	"testing"
)

func TestApprove(t *testing.T) {
	e := newEnv(t)
	iid := e.openMR("a1", map[string]string{"bindings/a.yaml": binding("alice")})
	p := e.mrPath(iid)
	sha := e.mr(iid)["sha"].(string)
	t.Run("first approval 201 with the approvals entity", func(t *testing.T) {
		r := e.must(201, "POST", tokA1, p+"/approve", map[string]any{"sha": sha})
		m := r.obj()
		by := m["approved_by"].([]any)
		if len(by) != 1 || by[0].(map[string]any)["user"].(map[string]any)["username"] != "approver-1" ||
			m["user_has_approved"] != true || m["approvals_left"].(float64) != 1 || m["approvals_required"].(float64) != 2 || m["approved"] != false {
			t.Fatalf("approvals: %s", r.Raw)
		}
	})
	t.Run("same user twice is 401", func(t *testing.T) {
		e.must(401, "POST", tokA1, p+"/approve", nil)
	})
	t.Run("author is eligible but forbidden: 401", func(t *testing.T) {
		e.must(401, "POST", tokBot, p+"/approve", nil)
	})
	t.Run("no approve permission is 403", func(t *testing.T) {
		e.must(403, "POST", tokObserver, p+"/approve", nil)
	})
	t.Run("sha not the head is 409", func(t *testing.T) {
		r := e.must(409, "POST", tokA2, p+"/approve", map[string]any{"sha": strings.Repeat("a", 40)})
		if !strings.HasPrefix(r.str("message"), "SHA does not match HEAD of source branch") {
			t.Fatalf("body: %s", r.Raw)
		}
	})
	t.Run("approvals state for each caller", func(t *testing.T) {
		a1 := e.must(200, "GET", tokA1, p+"/approvals", nil).obj()
		a2 := e.must(200, "GET", tokA2, p+"/approvals", nil).obj()
		bot := e.must(200, "GET", tokBot, p+"/approvals", nil).obj()
		if a1["user_has_approved"] != true || a1["user_can_approve"] != false ||
			a2["user_has_approved"] != false || a2["user_can_approve"] != true ||
			bot["user_can_approve"] != false {
			t.Fatalf("a1 %v\na2 %v\nbot %v", a1, a2, bot)
		}
	})
	t.Run("second approver completes the approval", func(t *testing.T) {
		m := e.must(201, "POST", tokA2, p+"/approve", map[string]any{"sha": sha}).obj()
		if m["approved"] != true || m["approvals_left"].(float64) != 0 {
			t.Fatalf("approvals: %v", m)
		}
	})
	t.Run("unapprove 201, twice 404", func(t *testing.T) {
		m := e.must(201, "POST", tokA2, p+"/unapprove", nil).obj()
		if m["user_has_approved"] != false || len(m["approved_by"].([]any)) != 1 {
			t.Fatalf("approvals: %v", m)
		}
		e.must(404, "POST", tokA2, p+"/unapprove", nil)
	})
	t.Run("a committer that is not the author cannot approve", func(t *testing.T) {
		e.must(201, "POST", tokA2, "/projects/1/repository/commits", map[string]any{
			"branch": "a1", "commit_message": "a2 edits", "actions": []any{map[string]any{"action": "create", "file_path": "bindings/x.yaml", "content": binding("x")}},
		})
		e.must(401, "POST", tokA2, p+"/approve", nil)
	})
	t.Run("new commits reset approvals", func(t *testing.T) {
		m := e.must(200, "GET", tokA1, p+"/approvals", nil).obj()
		if len(m["approved_by"].([]any)) != 0 {
			t.Fatalf("approvals survived a push: %v", m)
		}
	})
	t.Run("maintainer may approve anything", func(t *testing.T) {
		e.must(201, "POST", tokMaint, p+"/approve", nil)
	})
	t.Run("a closed MR cannot be approved: 401", func(t *testing.T) {
		e.must(200, "PUT", tokBot, p, map[string]any{"state_event": "close"})
		e.must(401, "POST", tokA1, p+"/approve", nil)
		if a := e.must(200, "GET", tokA1, p+"/approvals", nil).obj(); a["user_can_approve"] != false {
			t.Fatalf("user_can_approve on a closed MR: %v", a)
		}
	})
}

func TestApproveCompatAll401(t *testing.T) {
	e := newEnv(t)
	iid := e.openMR("c1", map[string]string{"bindings/a.yaml": binding("alice")})
	p := e.mrPath(iid)
	e.must(200, "PUT", "", "/_control/settings", map[string]any{"compat_all_401_approvals": true})
	e.must(401, "POST", tokObserver, p+"/approve", nil)
	e.must(401, "POST", tokA1, p+"/approve", map[string]any{"sha": strings.Repeat("a", 40)})
	e.must(201, "POST", tokA1, p+"/approve", nil)
	e.must(401, "POST", tokA1, p+"/approve", nil)
	e.must(200, "PUT", "", "/_control/settings", map[string]any{"compat_all_401_approvals": false})
	e.must(403, "POST", tokObserver, p+"/approve", nil)
}

func TestCheckItems(t *testing.T) {
	e := newEnv(t)
	iid := e.openMR("k1", map[string]string{"bindings/a.yaml": binding("alice")})
	p := e.mrPath(iid)
	t.Run("no items configured: the field is ignored", func(t *testing.T) {
		if l := e.must(200, "GET", tokA1, "/projects/1/approval_check_items", nil).Raw; strings.TrimSpace(string(l)) != "[]" {
			t.Fatalf("items: %s", l)
		}
		e.must(201, "POST", tokA1, p+"/approve", map[string]any{"check_items": []any{map[string]any{"key": "whatever", "version": 9}}})
		e.must(201, "POST", tokA1, p+"/unapprove", nil)
	})
	items := []map[string]any{{"key": "security", "version": 1, "title": "Security review"}, {"key": "owner", "version": 2}}
	e.must(200, "PUT", "", "/_control/projects/1/check_items", map[string]any{"check_items": items})
	t.Run("readable by API", func(t *testing.T) {
		l := e.must(200, "GET", tokA1, "/projects/1/approval_check_items", nil).list()
		if len(l) != 2 || l[0]["key"] != "security" || l[1]["version"].(float64) != 2 {
			t.Fatalf("items: %v", l)
		}
	})
	t.Run("missing item is 422 with the current list", func(t *testing.T) {
		r := e.must(422, "POST", tokA1, p+"/approve", map[string]any{"check_items": []any{map[string]any{"key": "security", "version": 1}}})
		if l, _ := r.obj()["check_items"].([]any); len(l) != 2 || !strings.Contains(r.str("message"), "owner missing") {
			t.Fatalf("body: %s", r.Raw)
		}
	})
	t.Run("stale version is 422", func(t *testing.T) {
		r := e.must(422, "POST", tokA1, p+"/approve", map[string]any{"check_items": []any{
			map[string]any{"key": "security", "version": 1}, map[string]any{"key": "owner", "version": 1}}})
		if !strings.Contains(r.str("message"), "owner stale") {
			t.Fatalf("body: %s", r.Raw)
		}
	})
	t.Run("current list approves", func(t *testing.T) {
		e.must(201, "POST", tokA1, p+"/approve", map[string]any{"check_items": items})
	})
	t.Run("without the field the client-library approver still works", func(t *testing.T) {
		e.must(201, "POST", tokA2, p+"/approve", nil)
		e.must(201, "POST", tokA2, p+"/unapprove", nil)
	})
	t.Run("require switch makes a missing field a 422", func(t *testing.T) {
		e.must(200, "PUT", "", "/_control/settings", map[string]any{"require_check_items": true})
		e.must(422, "POST", tokA2, p+"/approve", nil)
	})
}
