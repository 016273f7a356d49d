package gitlab_test

import (
	"context"
	"testing"
	"time"

	"changeflow/internal/gitlab"
)

// Merge answers the workflow branches on, each with its real status.
func TestMergeStatuses(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	ready := func(branch string) gitlab.MR {
		mr := e.openMR(branch)
		e.waitMR(mr.IID, "not_approved", func(m gitlab.MR) bool { return m.DetailedMergeStatus == "not_approved" })
		for _, b := range []gitlab.Bot{gitlab.Approver1, gitlab.Approver2} {
			if err := e.gl.Approve(c, b, project, mr.IID, mr.SHA); err != nil {
				t.Fatal(err)
			}
		}
		return e.waitMR(mr.IID, "mergeable", func(m gitlab.MR) bool { return m.DetailedMergeStatus == "mergeable" })
	}

	t.Run("405 while approvals are missing", func(t *testing.T) {
		mr := e.openMR("req-405")
		_, err := e.gl.Merge(c, project, mr.IID, mr.SHA)
		wantErr(t, err, "Merge", 405)
	})
	t.Run("422 when the merge itself fails, merge_error set", func(t *testing.T) {
		mr := ready("req-422")
		e.control("POST", "/merge_failures", map[string]any{"count": 1, "message": "pre-receive hook declined"})
		_, err := e.gl.Merge(c, project, mr.IID, mr.SHA)
		wantErr(t, err, "Merge", 422)
		if !gitlab.IsMergeFailed(err) {
			t.Fatal("IsMergeFailed")
		}
		got, _ := e.gl.GetMR(c, project, mr.IID)
		if got.MergeError != "pre-receive hook declined" {
			t.Fatalf("merge_error %q", got.MergeError)
		}
	})
	t.Run("406 with the legacy switch", func(t *testing.T) {
		e.control("PUT", "/settings", map[string]any{"legacy_merge_406": true})
		defer e.control("PUT", "/settings", map[string]any{"legacy_merge_406": false})
		mr := ready("req-406")
		e.control("POST", "/merge_failures", map[string]any{"count": 1})
		_, err := e.gl.Merge(c, project, mr.IID, mr.SHA)
		wantErr(t, err, "Merge", 406)
		if !gitlab.IsMergeFailed(err) {
			t.Fatal("IsMergeFailed")
		}
	})
	t.Run("a lost merge answer: unknown, and the read shows merged", func(t *testing.T) {
		mr := ready("req-lost-merge")
		e.fault(map[string]any{"method": "PUT", "path": "/projects/*/merge_requests/*/merge", "kind": "drop"})
		_, err := e.gl.Merge(c, project, mr.IID, mr.SHA)
		if !gitlab.OutcomeUnknown(err) {
			t.Fatalf("want unknown outcome: %v", err)
		}
		if got, _ := e.gl.GetMR(c, project, mr.IID); got.State != gitlab.MRStateMerged {
			t.Fatalf("state %q", got.State)
		}
	})
	t.Run("429 is returned once, not waited out by the library", func(t *testing.T) {
		// The adapter waits out a 429 only while Retry-After (1 s here)
		// fits before the deadline (pacing_test.go); with less time left
		// the 429 comes back after one call — the library adds none.
		e.resetCalls()
		e.fault(map[string]any{"method": "GET", "path": "/projects/*/merge_requests/*", "kind": "status", "status": 429})
		short, cancel := context.WithTimeout(c, 500*time.Millisecond)
		defer cancel()
		_, err := e.gl.GetMR(short, project, 1)
		wantErr(t, err, "GetMR", 429)
		if !gitlab.IsTransient(err) || e.count("GET", "/projects/*/merge_requests/*") != 1 {
			t.Fatalf("429: %v, %d calls", err, e.count("GET", "/projects/*/merge_requests/*"))
		}
	})
}
