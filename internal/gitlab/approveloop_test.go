package gitlab_test

import (
	"context"
	"testing"
	"time"

	"changeflow/internal/gitlab"
)

const approvePath = "/projects/*/merge_requests/*/approve"
const approvalsPath = "/projects/*/merge_requests/*/approvals"

// fast is a loop with a short backoff, so retried cases stay quick.
func fast(maxRetries int) gitlab.LoopSettings {
	return gitlab.LoopSettings{MaxRetries: maxRetries, Backoff: time.Millisecond}
}

func approveAsBot(t *testing.T, e *env, s gitlab.LoopSettings, bot gitlab.Bot, mr gitlab.MR) error {
	t.Helper()
	return gitlab.ApproveAsBot(ctx(t), e.gl, gitlab.LibraryApprover{GitLab: e.gl}, s, bot, project, mr.IID, mr.SHA, nil)
}

func TestApproveAsBot(t *testing.T) {
	t.Run("already approved: read, no approve call", func(t *testing.T) {
		e := newEnv(t)
		mr := e.openMR("req-already")
		if err := e.gl.Approve(ctx(t), gitlab.Approver1, project, mr.IID, mr.SHA); err != nil {
			t.Fatal(err)
		}
		e.resetCalls()
		if err := approveAsBot(t, e, fast(3), gitlab.Approver1, mr); err != nil {
			t.Fatalf("loop: %v", err)
		}
		if n := e.count("POST", approvePath); n != 0 {
			t.Fatalf("%d approve calls for an approved MR", n)
		}
		if n := e.countAs(tokA1, "GET", approvalsPath); n != 1 {
			t.Fatalf("the read must use the bot's own token; %d reads as approver-1", n)
		}
	})

	t.Run("duplicate 401 is settled as success by the final read", func(t *testing.T) {
		e := newEnv(t)
		mr := e.openMR("req-dup")
		if err := e.gl.Approve(ctx(t), gitlab.Approver1, project, mr.IID, mr.SHA); err != nil {
			t.Fatal(err)
		}
		// The read before the only attempt fails (fail open), the approve
		// answers 401 (a duplicate), the final read settles it.
		e.fault(map[string]any{"method": "GET", "path": approvalsPath, "kind": "status", "status": 500})
		e.resetCalls()
		if err := approveAsBot(t, e, fast(0), gitlab.Approver1, mr); err != nil {
			t.Fatalf("duplicate must be success: %v", err)
		}
		if n := e.count("POST", approvePath); n != 1 {
			t.Fatalf("%d approve calls, want 1", n)
		}
		if n := e.count("GET", approvalsPath); n != 2 {
			t.Fatalf("%d reads, want 2 (failed one, final one)", n)
		}
	})

	t.Run("duplicate 401 mid-loop is settled by the next attempt's read", func(t *testing.T) {
		e := newEnv(t)
		mr := e.openMR("req-dup2")
		if err := e.gl.Approve(ctx(t), gitlab.Approver1, project, mr.IID, mr.SHA); err != nil {
			t.Fatal(err)
		}
		e.fault(map[string]any{"method": "GET", "path": approvalsPath, "kind": "status", "status": 503})
		e.resetCalls()
		if err := approveAsBot(t, e, fast(3), gitlab.Approver1, mr); err != nil {
			t.Fatalf("loop: %v", err)
		}
		if n := e.count("POST", approvePath); n != 1 {
			t.Fatalf("%d approve calls, want 1", n)
		}
	})

	t.Run("forbidden 401 (committer approving its own MR): fails after the retries and a final read", func(t *testing.T) {
		e := newEnv(t)
		mr := e.openMR("req-forbidden")
		e.resetCalls()
		err := approveAsBot(t, e, fast(2), gitlab.Committer, mr)
		wantErr(t, err, "Approve", 401)
		if n := e.count("POST", approvePath); n != 3 {
			t.Fatalf("%d approve calls, want 3 (1 + 2 retries)", n)
		}
		if n := e.countAs(tokBot, "GET", approvalsPath); n != 4 {
			t.Fatalf("%d reads, want 4 (before each attempt, and the final one)", n)
		}
	})

	t.Run("compat all-401 switch, no approval: fails with 401 after the retries", func(t *testing.T) {
		e := newEnv(t)
		e.control("PUT", "/settings", map[string]any{"compat_all_401_approvals": true})
		e.set(func(s *gitlab.Settings) { s.Tokens.Approver2 = tokObserver })
		mr := e.openMR("req-compat")
		e.resetCalls()
		err := approveAsBot(t, e, fast(1), gitlab.Approver2, mr)
		wantErr(t, err, "Approve", 401)
		if n := e.count("POST", approvePath); n != 2 {
			t.Fatalf("%d approve calls, want 2", n)
		}
	})

	t.Run("403 is a permission failure: no retry", func(t *testing.T) {
		e := newEnv(t)
		e.set(func(s *gitlab.Settings) { s.Tokens.Approver2 = tokObserver })
		mr := e.openMR("req-403")
		e.resetCalls()
		err := approveAsBot(t, e, fast(3), gitlab.Approver2, mr)
		wantErr(t, err, "Approve", 403)
		if n := e.count("POST", approvePath); n != 1 {
			t.Fatalf("%d approve calls, want 1", n)
		}
	})

	t.Run("lost approve response: the next attempt sees the approval and does not approve again", func(t *testing.T) {
		e := newEnv(t)
		mr := e.openMR("req-lost-approve")
		e.fault(map[string]any{"method": "POST", "path": approvePath, "kind": "drop"})
		e.resetCalls()
		if err := approveAsBot(t, e, fast(3), gitlab.Approver1, mr); err != nil {
			t.Fatalf("loop: %v", err)
		}
		if n := e.count("POST", approvePath); n != 1 {
			t.Fatalf("%d approve calls, want 1", n)
		}
		if n := e.count("GET", approvalsPath); n != 2 {
			t.Fatalf("%d reads, want 2", n)
		}
	})

	t.Run("reads failing: fail open, then approve", func(t *testing.T) {
		e := newEnv(t)
		mr := e.openMR("req-read-fails")
		e.fault(map[string]any{"method": "GET", "path": approvalsPath, "kind": "status", "status": 500, "count": -1})
		e.resetCalls()
		if err := approveAsBot(t, e, fast(3), gitlab.Approver1, mr); err != nil {
			t.Fatalf("loop: %v", err)
		}
		if n := e.count("POST", approvePath); n != 1 {
			t.Fatalf("%d approve calls, want 1", n)
		}
		e.control("DELETE", "/faults", nil)
		ap, _ := e.gl.GetApprovals(ctx(t), gitlab.Approver1, project, mr.IID)
		if !ap.UserHasApproved {
			t.Fatal("not approved")
		}
	})

	t.Run("two bots are independent: a retry of the second never re-approves the first", func(t *testing.T) {
		e := newEnv(t)
		mr := e.openMR("req-two-bots")
		e.resetCalls()
		if err := approveAsBot(t, e, fast(3), gitlab.Approver1, mr); err != nil {
			t.Fatalf("bot 1: %v", err)
		}
		e.fault(map[string]any{"method": "POST", "path": approvePath, "kind": "status", "status": 500, "count": 2})
		if err := approveAsBot(t, e, fast(3), gitlab.Approver2, mr); err != nil {
			t.Fatalf("bot 2: %v", err)
		}
		if n := e.countAs(tokA1, "POST", approvePath); n != 1 {
			t.Fatalf("approver-1 approved %d times, want 1", n)
		}
		if n := e.countAs(tokA2, "POST", approvePath); n != 3 {
			t.Fatalf("approver-2 called approve %d times, want 3 (two 500s, then success)", n)
		}
		ap, _ := e.gl.GetApprovals(ctx(t), gitlab.Approver1, project, mr.IID)
		if !ap.Approved || len(ap.ApprovedBy) != 2 {
			t.Fatalf("approvals: %+v", ap)
		}
	})

	t.Run("negative maxRetries is clamped to 0: one attempt", func(t *testing.T) {
		e := newEnv(t)
		mr := e.openMR("req-negative")
		e.resetCalls()
		err := approveAsBot(t, e, fast(-5), gitlab.Committer, mr)
		wantErr(t, err, "Approve", 401)
		if n := e.count("POST", approvePath); n != 1 {
			t.Fatalf("%d approve calls, want 1", n)
		}
		if n := e.count("GET", approvalsPath); n != 2 {
			t.Fatalf("%d reads, want 2", n)
		}
	})

	t.Run("a backoff that would outlive the deadline is not waited", func(t *testing.T) {
		e := newEnv(t)
		mr := e.openMR("req-deadline")
		// The deadline is far beyond what the calls take and far below the
		// backoff: a loop that slept would return only once the deadline
		// passed, so "not waited" is checked as state (the context still
		// live on return), not as a duration a loaded machine may exceed.
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := gitlab.ApproveAsBot(c, e.gl, gitlab.LibraryApprover{GitLab: e.gl},
			gitlab.LoopSettings{MaxRetries: 5, Backoff: time.Hour}, gitlab.Committer, project, mr.IID, mr.SHA, nil)
		wantErr(t, err, "Approve", 401)
		if c.Err() != nil {
			t.Fatalf("the loop waited out the deadline (%v) instead of giving up at once", c.Err())
		}
	})
}
