package gitlab_test

import (
	"errors"
	"testing"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"

	"changeflow/internal/gitlab"
)

func commitBranch(t *testing.T, e *env, branch string) {
	t.Helper()
	if _, err := e.gl.CreateCommit(ctx(t), project, gitlab.CommitRequest{
		Branch: branch, StartBranch: "main", Message: "add " + branch,
		Actions: []gitlab.FileAction{{Action: gitlab.ActionCreate, Path: "bindings/" + branch + ".yaml", Content: binding(branch)}},
	}); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

func mrsFor(t *testing.T, e *env, branch string) int {
	t.Helper()
	n := 0
	for _, p := range e.control("GET", "/state", nil)["projects"].([]any) {
		for _, m := range p.(map[string]any)["merge_requests"].([]any) {
			if m.(map[string]any)["source_branch"] == branch {
				n++
			}
		}
	}
	return n
}

// The hazard itself, shown with client-go's defaults: a 502 after the
// create was applied makes the library send the POST again, which
// answers 409 — while the MR exists. This is why the adapter turns the
// library's retries off.
func TestRetryHazardOfClientGoDefaults(t *testing.T) {
	e := newEnv(t)
	commitBranch(t, e, "req-hazard")
	e.fault(map[string]any{"method": "POST", "path": "/projects/*/merge_requests", "kind": "drop", "mode": "502"})
	lib, err := gl.NewClient("local-committer-token", gl.WithBaseURL(e.base+"api/v4"))
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = lib.MergeRequests.CreateMergeRequest(project, &gl.CreateMergeRequestOptions{
		SourceBranch: gl.Ptr("req-hazard"), TargetBranch: gl.Ptr("main"), Title: gl.Ptr("x"),
	})
	if got := e.count("POST", "/projects/*/merge_requests"); got != 2 {
		t.Fatalf("client-go defaults sent %d POSTs, want 2 (err %v)", got, err)
	}
	var er *gl.ErrorResponse
	if !errors.As(err, &er) || er.Response.StatusCode != 409 {
		t.Fatalf("the retried create should answer 409, got %v", err)
	}
}

func TestNoHiddenRetry(t *testing.T) {
	t.Run("502 without applying: one POST, no MR, typed 502", func(t *testing.T) {
		e := newEnv(t)
		commitBranch(t, e, "req-502")
		e.fault(map[string]any{"method": "POST", "path": "/projects/*/merge_requests", "kind": "status", "status": 502})
		_, err := e.gl.CreateMR(ctx(t), project, gitlab.CreateMRRequest{SourceBranch: "req-502", TargetBranch: "main", Title: "x"})
		wantErr(t, err, "CreateMR", 502)
		if !gitlab.IsTransient(err) || gitlab.OutcomeUnknown(err) {
			t.Fatalf("a 502 is an answer: transient, not unknown: %v", err)
		}
		if got := e.count("POST", "/projects/*/merge_requests"); got != 1 {
			t.Fatalf("%d POSTs reached GitLab, want 1", got)
		}
		if n := mrsFor(t, e, "req-502"); n != 0 {
			t.Fatalf("%d MRs, want 0", n)
		}
	})

	t.Run("502 after applying: one POST, exactly one MR, typed 502, found by branch", func(t *testing.T) {
		e := newEnv(t)
		commitBranch(t, e, "req-502b")
		e.fault(map[string]any{"method": "POST", "path": "/projects/*/merge_requests", "kind": "drop", "mode": "502"})
		_, err := e.gl.CreateMR(ctx(t), project, gitlab.CreateMRRequest{SourceBranch: "req-502b", TargetBranch: "main", Title: "x"})
		wantErr(t, err, "CreateMR", 502)
		if got := e.count("POST", "/projects/*/merge_requests"); got != 1 {
			t.Fatalf("%d POSTs reached GitLab, want 1", got)
		}
		if n := mrsFor(t, e, "req-502b"); n != 1 {
			t.Fatalf("%d MRs, want 1", n)
		}
		if _, ok, err := e.gl.FindMRBySourceBranch(ctx(t), project, "req-502b", gitlab.StateOpened); !ok || err != nil {
			t.Fatalf("find: %v %v", ok, err)
		}
	})

	t.Run("lost response: unknown outcome, then the lookup finds the MR", func(t *testing.T) {
		e := newEnv(t)
		commitBranch(t, e, "req-lost")
		e.fault(map[string]any{"method": "POST", "path": "/projects/*/merge_requests", "kind": "drop"})
		_, err := e.gl.CreateMR(ctx(t), project, gitlab.CreateMRRequest{SourceBranch: "req-lost", TargetBranch: "main", Title: "x"})
		ge := wantErr(t, err, "CreateMR", 0)
		if !ge.Unknown || !gitlab.OutcomeUnknown(err) {
			t.Fatalf("lost response must be an unknown outcome: %+v", ge)
		}
		if got := e.count("POST", "/projects/*/merge_requests"); got != 1 {
			t.Fatalf("%d POSTs, want 1", got)
		}
		mr, ok, err := e.gl.FindMRBySourceBranch(ctx(t), project, "req-lost", gitlab.StateOpened)
		if !ok || err != nil || mr.IID == 0 {
			t.Fatalf("find after lost response: %+v %v %v", mr, ok, err)
		}
		if n := mrsFor(t, e, "req-lost"); n != 1 {
			t.Fatalf("%d MRs, want 1", n)
		}
	})

	t.Run("lost commit response: one commit, the branch read shows it", func(t *testing.T) {
		e := newEnv(t)
		e.fault(map[string]any{"method": "POST", "path": "/projects/*/repository/commits", "kind": "drop"})
		_, err := e.gl.CreateCommit(ctx(t), project, gitlab.CommitRequest{
			Branch: "req-lostc", StartBranch: "main", Message: "m",
			Actions: []gitlab.FileAction{{Action: gitlab.ActionCreate, Path: "bindings/x.yaml", Content: binding("x")}},
		})
		if !gitlab.OutcomeUnknown(err) {
			t.Fatalf("want unknown outcome, got %v", err)
		}
		if e.count("POST", "/projects/*/repository/commits") != 1 {
			t.Fatal("the commit was sent more than once")
		}
		if b, err := e.gl.GetBranch(ctx(t), project, "req-lostc"); err != nil || b.CommitID == "" {
			t.Fatalf("branch after lost commit: %+v %v", b, err)
		}
	})
}

func TestBreaker(t *testing.T) {
	t.Run("opens after N failures and then fails fast without a call", func(t *testing.T) {
		e := newEnv(t)
		e.set(func(s *gitlab.Settings) { s.BreakerFailures = 3; s.BreakerOpenFor = time.Hour })
		e.fault(map[string]any{"method": "GET", "path": "/projects/*/repository/branches/*", "kind": "status", "status": 503, "count": -1})
		for i := range 3 {
			_, err := e.gl.GetBranch(ctx(t), project, "main")
			wantErr(t, err, "GetBranch", 503)
			_ = i
		}
		start := time.Now()
		_, err := e.gl.CreateMR(ctx(t), project, gitlab.CreateMRRequest{SourceBranch: "x", TargetBranch: "main", Title: "x"})
		ge := wantErr(t, err, "CreateMR", 0)
		if !ge.BreakerOpen || !gitlab.IsBreakerOpen(err) || ge.Unknown || ge.Message != "circuit open" {
			t.Fatalf("want open breaker, got %+v", ge)
		}
		if time.Since(start) > 100*time.Millisecond {
			t.Fatalf("open breaker took %v", time.Since(start))
		}
		if n := e.count("", "/projects/*/merge_requests"); n != 0 {
			t.Fatalf("%d calls reached GitLab through an open breaker", n)
		}
		// The direct-HTTP path shares the breaker.
		err = e.gl.ApproveWithCheckItems(ctx(t), gitlab.Approver1, project, 1, "", nil)
		if !gitlab.IsBreakerOpen(err) {
			t.Fatalf("direct approve through open breaker: %v", err)
		}
	})

	t.Run("4xx answers do not open it", func(t *testing.T) {
		e := newEnv(t)
		e.set(func(s *gitlab.Settings) { s.BreakerFailures = 2 })
		for range 5 {
			_, err := e.gl.GetBranch(ctx(t), project, "nope")
			wantErr(t, err, "GetBranch", 404)
		}
		if _, err := e.gl.GetBranch(ctx(t), project, "main"); err != nil {
			t.Fatalf("after 404s: %v", err)
		}
	})
}

func TestDeadline(t *testing.T) {
	e := newEnv(t)
	// The MR is opened under the default deadline: only the calls under
	// test get the short one (setup calls under 150 ms each failed on a
	// loaded machine).
	mr := e.openMR("req-slow")
	e.set(func(s *gitlab.Settings) { s.Timeout = 150 * time.Millisecond })
	e.fault(map[string]any{"method": "GET", "path": "/projects/*/merge_requests/*", "kind": "delay", "delay": "2s", "phase": "before"})
	start := time.Now()
	_, err := e.gl.GetMR(ctx(t), project, mr.IID)
	took := time.Since(start)
	ge := wantErr(t, err, "GetMR", 0)
	if took > time.Second {
		t.Fatalf("slow answer took %v with a 150ms deadline", took)
	}
	if !errors.Is(err, errDeadline()) || ge.Message != "deadline exceeded" {
		t.Fatalf("want deadline exceeded, got %+v", ge)
	}

	// A write whose answer is slower than the deadline may have happened.
	e.fault(map[string]any{"method": "PUT", "path": "/projects/*/merge_requests/*", "kind": "delay", "delay": "1s"})
	_, err = e.gl.CloseMR(ctx(t), project, mr.IID)
	if !gitlab.OutcomeUnknown(err) {
		t.Fatalf("timed-out write must be an unknown outcome: %v", err)
	}
	e.set(func(s *gitlab.Settings) { s.Timeout = 5 * time.Second })
	got := e.waitMR(mr.IID, "closed", func(m gitlab.MR) bool { return m.State == gitlab.MRStateClosed })
	_ = got
}
