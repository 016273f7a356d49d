package gitlab_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"changeflow/internal/gitlab"
)

// The contract test: every port method through the adapter against the
// simulator over HTTP, in the order the workflow uses them.
func TestContract(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	g := e.gl

	var head string
	t.Run("branch: create, read, create again is 400, missing is 404", func(t *testing.T) {
		b, err := g.CreateBranch(c, project, "req/contract", "main")
		if err != nil || b.Name != "req/contract" || len(b.CommitID) != 40 {
			t.Fatalf("CreateBranch: %+v %v", b, err)
		}
		got, err := g.GetBranch(c, project, "req/contract")
		if err != nil || got != b {
			t.Fatalf("GetBranch: %+v %v", got, err)
		}
		_, err = g.CreateBranch(c, project, "req/contract", "main")
		if !gitlab.IsBadRequest(err) {
			t.Fatalf("second CreateBranch: %v", err)
		}
		_, err = g.GetBranch(c, project, "nope")
		wantErr(t, err, "GetBranch", 404)
		if !gitlab.IsNotFound(err) {
			t.Fatal("IsNotFound")
		}
	})

	t.Run("commit with several actions, then file reads", func(t *testing.T) {
		cm, err := g.CreateCommit(c, project, gitlab.CommitRequest{
			Branch: "req/contract", Message: "bind alice and bob\n\nOperation-Id: op-1",
			Actions: []gitlab.FileAction{
				{Action: gitlab.ActionCreate, Path: "bindings/a.yaml", Content: binding("alice")},
				{Action: gitlab.ActionCreate, Path: "bindings/b.yaml", Content: binding("bob")},
				{Action: gitlab.ActionUpdate, Path: "bindings/README.md", Content: "changed\n"},
			},
		})
		if err != nil || len(cm.ID) != 40 || cm.Title != "bind alice and bob" {
			t.Fatalf("CreateCommit: %+v %v", cm, err)
		}
		head = cm.ID
		cm2, err := g.CreateCommit(c, project, gitlab.CommitRequest{
			Branch: "req/contract", Message: "drop bob",
			Actions: []gitlab.FileAction{{Action: gitlab.ActionDelete, Path: "bindings/b.yaml"}},
		})
		if err != nil {
			t.Fatalf("delete commit: %v", err)
		}
		head = cm2.ID
		f, err := g.GetFile(c, project, "bindings/a.yaml", "req/contract")
		if err != nil || string(f.Content) != binding("alice") || f.LastCommitID != cm.ID || f.CommitID != cm2.ID {
			t.Fatalf("GetFile: %+v %v (commit %s, head %s)", f, err, cm.ID, cm2.ID)
		}
		_, err = g.GetFile(c, project, "bindings/b.yaml", "req/contract")
		wantErr(t, err, "GetFile", 404)
		_, err = g.CreateCommit(c, project, gitlab.CommitRequest{
			Branch: "req/contract", Message: "again",
			Actions: []gitlab.FileAction{{Action: gitlab.ActionCreate, Path: "bindings/a.yaml", Content: "x"}},
		})
		e := wantErr(t, err, "CreateCommit", 400)
		if !strings.Contains(e.Message, "already exists") {
			t.Fatalf("message: %q", e.Message)
		}
	})

	t.Run("force commit on the target's head, GetCommit reads the parents", func(t *testing.T) {
		main, err := g.GetBranch(c, project, "main")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := g.CreateCommit(c, project, gitlab.CommitRequest{Branch: "req/force", StartBranch: "main", Message: "first",
			Actions: []gitlab.FileAction{{Action: gitlab.ActionCreate, Path: "bindings/f.yaml", Content: binding("fay")}}}); err != nil {
			t.Fatal(err)
		}
		regen := gitlab.CommitRequest{Branch: "req/force", StartSHA: main.CommitID, Message: "regenerated\n\nOperation-Id: op-f",
			Actions: []gitlab.FileAction{{Action: gitlab.ActionCreate, Path: "bindings/f.yaml", Content: binding("fay")}}}
		_, err = g.CreateCommit(c, project, regen)
		wantErr(t, err, "CreateCommit", 400) // an existing branch is overwritten only with Force
		regen.Force = true
		cm, err := g.CreateCommit(c, project, regen)
		if err != nil || len(cm.ParentIDs) != 1 || cm.ParentIDs[0] != main.CommitID {
			t.Fatalf("forced CreateCommit: %+v %v", cm, err)
		}
		br, err := g.GetBranch(c, project, "req/force")
		if err != nil || br.CommitID != cm.ID {
			t.Fatalf("branch after force: %+v %v", br, err)
		}
		got, err := g.GetCommit(c, project, br.CommitID)
		if err != nil || got.ID != cm.ID || !slices.Equal(got.ParentIDs, []string{main.CommitID}) || !strings.Contains(got.Message, "Operation-Id: op-f") {
			t.Fatalf("GetCommit: %+v %v", got, err)
		}
		_, err = g.GetCommit(c, project, strings.Repeat("f", 40))
		wantErr(t, err, "GetCommit", 404)
	})

	var mr gitlab.MR
	t.Run("MR: find none, create, find, create again is 409", func(t *testing.T) {
		if _, ok, err := g.FindMRBySourceBranch(c, project, "req/contract", gitlab.StateAll); ok || err != nil {
			t.Fatalf("Find before create: %v %v", ok, err)
		}
		var err error
		mr, err = g.CreateMR(c, project, gitlab.CreateMRRequest{
			SourceBranch: "req/contract", TargetBranch: "main", Title: "Bind alice", Description: "Operation-Id: op-1",
		})
		if err != nil || mr.IID == 0 || mr.State != gitlab.MRStateOpened || mr.SHA != head || mr.WebURL == "" {
			t.Fatalf("CreateMR: %+v %v", mr, err)
		}
		found, ok, err := g.FindMRBySourceBranch(c, project, "req/contract", gitlab.StateOpened)
		if err != nil || !ok || found.IID != mr.IID || found.Description != "Operation-Id: op-1" {
			t.Fatalf("Find: %+v %v %v", found, ok, err)
		}
		_, err = g.CreateMR(c, project, gitlab.CreateMRRequest{SourceBranch: "req/contract", TargetBranch: "main", Title: "again"})
		if e := wantErr(t, err, "CreateMR", 409); !strings.Contains(e.Message, "Another open merge request") || !gitlab.IsConflict(err) {
			t.Fatalf("409 message: %q", e.Message)
		}
	})

	t.Run("pipeline runs and the MR waits for approvals", func(t *testing.T) {
		got := e.waitMR(mr.IID, "not_approved", func(m gitlab.MR) bool { return m.DetailedMergeStatus == "not_approved" })
		if got.HeadPipeline == nil || got.HeadPipeline.Status != "success" || got.HeadPipeline.SHA != head {
			t.Fatalf("head pipeline: %+v", got.HeadPipeline)
		}
		ps, err := g.ListMRPipelines(c, project, mr.IID)
		if err != nil || len(ps) == 0 || ps[0].ID != got.HeadPipeline.ID || ps[0].Status != "success" {
			t.Fatalf("ListMRPipelines: %+v %v", ps, err)
		}
	})

	t.Run("approvals by both bots", func(t *testing.T) {
		before, err := g.GetApprovals(c, gitlab.Approver1, project, mr.IID)
		if err != nil || before.UserHasApproved || !before.UserCanApprove || len(before.ApprovedBy) != 0 {
			t.Fatalf("before: %+v %v", before, err)
		}
		if err := g.Approve(c, gitlab.Approver1, project, mr.IID, head); err != nil {
			t.Fatalf("approve 1: %v", err)
		}
		if err := g.Approve(c, gitlab.Approver2, project, mr.IID, head); err != nil {
			t.Fatalf("approve 2: %v", err)
		}
		a1, err := g.GetApprovals(c, gitlab.Approver1, project, mr.IID)
		if err != nil || !a1.UserHasApproved || !a1.Approved || !slices.Equal(a1.ApprovedBy, []string{"approver-1", "approver-2"}) {
			t.Fatalf("after: %+v %v", a1, err)
		}
		bot, err := g.GetApprovals(c, gitlab.Committer, project, mr.IID)
		if err != nil || bot.UserHasApproved {
			t.Fatalf("committer's view: %+v %v", bot, err)
		}
		// A duplicate is 401, a stale sha 409 — the real statuses.
		wantErr(t, g.Approve(c, gitlab.Approver1, project, mr.IID, head), "Approve", 401)
		wantErr(t, g.Approve(c, gitlab.Approver1, project, mr.IID, strings.Repeat("0", 40)), "Approve", 409)
	})

	t.Run("merge: stale sha 409, then merged", func(t *testing.T) {
		e.waitMR(mr.IID, "mergeable", func(m gitlab.MR) bool { return m.DetailedMergeStatus == "mergeable" })
		_, err := g.Merge(c, project, mr.IID, strings.Repeat("0", 40))
		wantErr(t, err, "Merge", 409)
		got, err := g.Merge(c, project, mr.IID, head)
		if err != nil || got.State != gitlab.MRStateMerged || got.MergeCommitSHA == "" {
			t.Fatalf("Merge: %+v %v", got, err)
		}
		_, err = g.Merge(c, project, mr.IID, head)
		if !gitlab.IsMethodNotAllowed(err) {
			t.Fatalf("merge again: %v", err)
		}
		f, err := g.GetFile(c, project, "bindings/a.yaml", "main")
		if err != nil || string(f.Content) != binding("alice") {
			t.Fatalf("file on main: %v", err)
		}
		if _, ok, err := g.FindMRBySourceBranch(c, project, "req/contract", gitlab.StateOpened); ok || err != nil {
			t.Fatalf("opened after merge: %v %v", ok, err)
		}
		if m, ok, err := g.FindMRBySourceBranch(c, project, "req/contract", gitlab.StateAll); !ok || err != nil || m.State != gitlab.MRStateMerged {
			t.Fatalf("all after merge: %+v %v %v", m, ok, err)
		}
	})

	t.Run("rebase: async, then head moves onto main", func(t *testing.T) {
		other := e.openMR("req-rebase")
		// Move main under it.
		late := e.openMR("req-late")
		e.control("POST", "/projects/1/merge_requests/"+itoa(late.IID)+"/merge", nil)
		if err := g.Rebase(c, project, other.IID); err != nil {
			t.Fatalf("Rebase: %v", err)
		}
		done := e.waitMR(other.IID, "rebase done", func(m gitlab.MR) bool { return !m.RebaseInProgress && m.SHA != other.SHA })
		if done.MergeError != "" {
			t.Fatalf("rebase failed: %q", done.MergeError)
		}
	})

	t.Run("rebase conflict leaves merge_error", func(t *testing.T) {
		m := e.openMR("req-conflict")
		e.control("POST", "/projects/1/merge_requests/"+itoa(m.IID)+"/conflict", nil)
		e.waitMR(m.IID, "conflict", func(x gitlab.MR) bool { return x.HasConflicts && x.DetailedMergeStatus == "conflict" })
		if err := g.Rebase(c, project, m.IID); err != nil {
			t.Fatalf("Rebase: %v", err)
		}
		e.waitMR(m.IID, "rebase failed", func(x gitlab.MR) bool { return !x.RebaseInProgress && x.MergeError != "" })
	})

	t.Run("close, and close of a merged MR answers merged", func(t *testing.T) {
		m := e.openMR("req-close")
		got, err := g.CloseMR(c, project, m.IID)
		if err != nil || got.State != gitlab.MRStateClosed {
			t.Fatalf("CloseMR: %+v %v", got, err)
		}
		m2 := e.openMR("req-close-race")
		e.control("POST", "/close_merge_race", map[string]any{"count": 1})
		got, err = g.CloseMR(c, project, m2.IID)
		if err != nil || got.State != gitlab.MRStateMerged {
			t.Fatalf("CloseMR in the race: %+v %v", got, err)
		}
		_, err = g.GetMR(c, project, 999)
		wantErr(t, err, "GetMR", 404)
	})

	t.Run("a 401 for an unknown token is typed", func(t *testing.T) {
		e.set(func(s *gitlab.Settings) { s.Tokens.Approver2 = "bad" })
		defer e.set(func(s *gitlab.Settings) { s.Tokens.Approver2 = "local-approver-2-token" })
		_, err := g.GetApprovals(c, gitlab.Approver2, project, mr.IID)
		wantErr(t, err, "GetApprovals", 401)
		var ge *gitlab.Error
		if !errors.As(err, &ge) || ge.Unknown {
			t.Fatalf("a 401 is an answer, not an unknown outcome: %+v", ge)
		}
	})
}

func itoa(n int64) string { return fmtInt(n) }
