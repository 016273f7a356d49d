package gitlab_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"changeflow/internal/gitlab"
)

const (
	tokBot      = "local-committer-token"
	tokA1       = "local-approver-1-token"
	tokA2       = "local-approver-2-token"
	tokObserver = "local-observer-token"
)

func (e *env) setCheckItems(items ...gitlab.CheckItem) {
	e.t.Helper()
	if items == nil {
		items = []gitlab.CheckItem{}
	}
	e.control("PUT", "/projects/1/check_items", map[string]any{"check_items": items})
}

func TestApproverSwitchIsReadOnEveryCall(t *testing.T) {
	e := newEnv(t)
	e.setCheckItems(gitlab.CheckItem{Key: "security", Version: 1, Title: "Security review"})
	e.control("PUT", "/settings", map[string]any{"require_check_items": true})
	var enabled atomic.Bool
	direct := gitlab.NewCheckItemsApprover(e.gl, nil)
	sel := gitlab.SelectingApprover{CheckItemsEnabled: enabled.Load, Library: gitlab.LibraryApprover{GitLab: e.gl}, CheckItems: direct}
	mr := e.openMR("req-switch")

	// Off: the client library, which cannot send check items → 422.
	err := sel.Approve(ctx(t), gitlab.Approver1, project, mr.IID, mr.SHA)
	wantErr(t, err, "Approve", 422)
	if e.count("GET", "/projects/*/approval_check_items") != 0 {
		t.Fatal("the library approver read check items")
	}
	// Flipped on between two calls, no restart: the direct approver reads
	// the items and approves.
	enabled.Store(true)
	if err := sel.Approve(ctx(t), gitlab.Approver1, project, mr.IID, mr.SHA); err != nil {
		t.Fatalf("direct approve: %v", err)
	}
	if e.count("GET", "/projects/*/approval_check_items") != 1 {
		t.Fatal("want one check-items read")
	}
	// Flipped off again: the library (items not required any more).
	enabled.Store(false)
	e.control("PUT", "/settings", map[string]any{"require_check_items": false})
	if err := sel.Approve(ctx(t), gitlab.Approver2, project, mr.IID, mr.SHA); err != nil {
		t.Fatalf("library approve: %v", err)
	}
	if e.count("GET", "/projects/*/approval_check_items") != 1 {
		t.Fatal("the library approver read check items")
	}
	ap, _ := e.gl.GetApprovals(ctx(t), gitlab.Approver2, project, mr.IID)
	if !ap.Approved || len(ap.ApprovedBy) != 2 {
		t.Fatalf("approvals: %+v", ap)
	}
}

func TestCheckItemsSelfHeal(t *testing.T) {
	e := newEnv(t)
	v1 := []gitlab.CheckItem{{Key: "security", Version: 1}}
	v2 := []gitlab.CheckItem{{Key: "security", Version: 2}, {Key: "privacy", Version: 1}}
	e.setCheckItems(v1...)
	ap := gitlab.NewCheckItemsApprover(e.gl, nil)

	a := e.openMR("req-ci-a")
	if err := ap.Approve(ctx(t), gitlab.Approver1, project, a.IID, a.SHA); err != nil {
		t.Fatalf("first approve: %v", err)
	}
	if got, _ := ap.CachedCheckItems(project); len(got) != 1 || got[0].Version != 1 {
		t.Fatalf("cache: %+v", got)
	}

	t.Run("a 422 with the current list: exactly one retry, success, cache updated", func(t *testing.T) {
		e.setCheckItems(v2...)
		b := e.openMR("req-ci-b")
		e.resetCalls()
		if err := ap.Approve(ctx(t), gitlab.Approver1, project, b.IID, b.SHA); err != nil {
			t.Fatalf("approve after the change: %v", err)
		}
		if n := e.count("POST", "/projects/*/merge_requests/*/approve"); n != 2 {
			t.Fatalf("%d approve calls, want 2 (stale, then rebuilt)", n)
		}
		if n := e.count("GET", "/projects/*/approval_check_items"); n != 0 {
			t.Fatalf("the list came from the 422 body; %d extra reads", n)
		}
		if got, _ := ap.CachedCheckItems(project); len(got) != 2 {
			t.Fatalf("cache not updated: %+v", got)
		}
	})

	t.Run("a second 422 is returned with its status, no third call", func(t *testing.T) {
		e.setCheckItems(gitlab.CheckItem{Key: "security", Version: 3})
		c := e.openMR("req-ci-c")
		e.resetCalls()
		// The items change again between the stale call and the retry.
		var posts atomic.Int32
		e.setBefore(func(r *http.Request) {
			if r.Method == "POST" && strings.HasSuffix(r.URL.Path, "/approve") && posts.Add(1) == 2 {
				e.setCheckItems(gitlab.CheckItem{Key: "security", Version: 4})
			}
		})
		defer e.setBefore(nil)
		err := ap.Approve(ctx(t), gitlab.Approver1, project, c.IID, c.SHA)
		ge := wantErr(t, err, "Approve", 422)
		if len(ge.CurrentCheckItems) != 1 || ge.CurrentCheckItems[0].Version != 4 {
			t.Fatalf("current items in the error: %+v", ge.CurrentCheckItems)
		}
		if n := e.count("POST", "/projects/*/merge_requests/*/approve"); n != 2 {
			t.Fatalf("%d approve calls, want 2", n)
		}
	})
}

// Both approvers report the same *Error with the same real status, so the
// caller's loop and 401 handling do not depend on which one ran.
func TestApproversReportTheSameErrors(t *testing.T) {
	e := newEnv(t)
	impls := map[string]gitlab.Approver{
		"library": gitlab.LibraryApprover{GitLab: e.gl},
		"direct":  gitlab.NewCheckItemsApprover(e.gl, nil),
	}
	mr := e.openMR("req-errs")
	tests := []struct {
		name   string
		bot    gitlab.Bot
		sha    string
		setup  func()
		status int
	}{
		{name: "401: the committer may not approve its own MR", bot: gitlab.Committer, sha: mr.SHA, status: 401},
		{name: "403: no approve permission", bot: gitlab.Approver2, sha: mr.SHA, status: 403,
			setup: func() { e.set(func(s *gitlab.Settings) { s.Tokens.Approver2 = tokObserver }) }},
		{name: "409: sha is not the head", bot: gitlab.Approver1, sha: strings.Repeat("a", 40), status: 409},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.setup != nil {
				tt.setup()
			}
			for name, a := range impls {
				err := a.Approve(ctx(t), tt.bot, project, mr.IID, tt.sha)
				if !gitlab.IsTransient(err) && gitlab.StatusOf(err) == tt.status {
					wantErr(t, err, "Approve", tt.status)
					continue
				}
				t.Fatalf("%s: want *gitlab.Error %d, got %v", name, tt.status, err)
			}
		})
	}
}
