package gitlab

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"
)

// The contract test: the official client library, unmodified, drives the
// simulator through every endpoint the workflow uses and gets typed
// answers and typed errors carrying the real status.

func (e *env) client(t *testing.T, token string) *gl.Client {
	t.Helper()
	c, err := gl.NewClient(token, gl.WithBaseURL(e.base+"/api/v4"), gl.WithoutRetries())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func wantStatus(t *testing.T, err error, status int) {
	t.Helper()
	var er *gl.ErrorResponse
	if !errors.As(err, &er) || !er.HasStatusCode(status) {
		t.Fatalf("want ErrorResponse with %d, got %v", status, err)
	}
}

func TestContractOfficialClient(t *testing.T) {
	e := newEnv(t)
	bot, a1, a2 := e.client(t, tokBot), e.client(t, tokA1), e.client(t, tokA2)
	obs := e.client(t, tokObserver)
	const pid = "config/bindings"

	t.Run("unknown token", func(t *testing.T) {
		_, _, err := e.client(t, "bad").Projects.GetProject(pid, nil)
		wantStatus(t, err, 401)
	})

	t.Run("branch", func(t *testing.T) {
		b, resp, err := bot.Branches.CreateBranch(pid, &gl.CreateBranchOptions{Branch: gl.Ptr("req/1"), Ref: gl.Ptr("main")})
		if err != nil || resp.StatusCode != 201 || b.Name != "req/1" || b.Commit == nil || len(b.Commit.ID) != 40 {
			t.Fatalf("create branch: %v %+v", err, b)
		}
		_, _, err = bot.Branches.CreateBranch(pid, &gl.CreateBranchOptions{Branch: gl.Ptr("req/1"), Ref: gl.Ptr("main")})
		wantStatus(t, err, 400)
		if got, _, err := bot.Branches.GetBranch(pid, "req/1"); err != nil || got.Name != "req/1" {
			t.Fatalf("get branch: %v %+v", err, got)
		}
		_, _, err = bot.Branches.GetBranch(pid, "nope")
		if !errors.Is(err, gl.ErrNotFound) {
			t.Fatalf("missing branch: %v", err)
		}
	})

	var head string
	t.Run("commit with actions", func(t *testing.T) {
		c, _, err := bot.Commits.CreateCommit(pid, &gl.CreateCommitOptions{
			Branch: gl.Ptr("req/1"), CommitMessage: gl.Ptr("bind alice and bob"),
			Actions: []*gl.CommitActionOptions{
				{Action: gl.Ptr(gl.FileCreate), FilePath: gl.Ptr("bindings/a.yaml"), Content: gl.Ptr(binding("alice"))},
				{Action: gl.Ptr(gl.FileCreate), FilePath: gl.Ptr("bindings/b.yaml"), Content: gl.Ptr(binding("bob"))},
				{Action: gl.Ptr(gl.FileUpdate), FilePath: gl.Ptr("bindings/README.md"), Content: gl.Ptr("readme\n")},
			},
		})
		if err != nil || len(c.ID) != 40 || len(c.ParentIDs) != 1 || c.Title != "bind alice and bob" {
			t.Fatalf("commit: %v %+v", err, c)
		}
		head = c.ID
		_, _, err = bot.Commits.CreateCommit(pid, &gl.CreateCommitOptions{
			Branch: gl.Ptr("req/1"), CommitMessage: gl.Ptr("dup"),
			Actions: []*gl.CommitActionOptions{{Action: gl.Ptr(gl.FileCreate), FilePath: gl.Ptr("bindings/a.yaml"), Content: gl.Ptr("x")}},
		})
		wantStatus(t, err, 400)
		_, _, err = bot.Commits.CreateCommit(pid, &gl.CreateCommitOptions{
			Branch: gl.Ptr("req/1"), CommitMessage: gl.Ptr("gone"),
			Actions: []*gl.CommitActionOptions{{Action: gl.Ptr(gl.FileDelete), FilePath: gl.Ptr("bindings/zz.yaml")}},
		})
		wantStatus(t, err, 400)
	})

	t.Run("file read", func(t *testing.T) {
		raw, _, err := bot.RepositoryFiles.GetRawFile(pid, "bindings/a.yaml", &gl.GetRawFileOptions{Ref: gl.Ptr("req/1")})
		if err != nil || string(raw) != binding("alice") {
			t.Fatalf("raw: %v %q", err, raw)
		}
		f, _, err := bot.RepositoryFiles.GetFile(pid, "bindings/b.yaml", &gl.GetFileOptions{Ref: gl.Ptr("req/1")})
		if err != nil || f.Encoding != "base64" || f.FilePath != "bindings/b.yaml" || f.CommitID != head {
			t.Fatalf("file: %v %+v", err, f)
		}
		_, _, err = bot.RepositoryFiles.GetRawFile(pid, "bindings/a.yaml", &gl.GetRawFileOptions{Ref: gl.Ptr("main")})
		if !errors.Is(err, gl.ErrNotFound) {
			t.Fatalf("file on main: %v", err)
		}
	})

	var mr *gl.MergeRequest
	t.Run("create, get and list MR", func(t *testing.T) {
		var err error
		mr, _, err = bot.MergeRequests.CreateMergeRequest(pid, &gl.CreateMergeRequestOptions{
			SourceBranch: gl.Ptr("req/1"), TargetBranch: gl.Ptr("main"), Title: gl.Ptr("Bind alice and bob"), Description: gl.Ptr("batch 7"),
		})
		if err != nil || mr.IID != 1 || mr.State != "opened" || mr.SHA != head || mr.WebURL == "" || mr.ProjectID != 1 {
			t.Fatalf("create: %v %+v", err, mr)
		}
		_, _, err = bot.MergeRequests.CreateMergeRequest(pid, &gl.CreateMergeRequestOptions{
			SourceBranch: gl.Ptr("req/1"), TargetBranch: gl.Ptr("main"), Title: gl.Ptr("again"),
		})
		wantStatus(t, err, 409)
		if !strings.Contains(err.Error(), "!1") {
			t.Fatalf("409 message: %v", err)
		}
		got, _, err := bot.MergeRequests.GetMergeRequest(pid, 1, &gl.GetMergeRequestsOptions{IncludeRebaseInProgress: gl.Ptr(true)})
		if err != nil || got.SourceBranch != "req/1" || got.TargetBranch != "main" || got.Description != "batch 7" || got.HeadPipeline == nil {
			t.Fatalf("get: %v %+v", err, got)
		}
		list, resp, err := bot.MergeRequests.ListProjectMergeRequests(pid, &gl.ListProjectMergeRequestsOptions{
			SourceBranch: gl.Ptr("req/1"), State: gl.Ptr("opened"),
		})
		if err != nil || len(list) != 1 || list[0].IID != 1 || resp.TotalItems != 1 || resp.TotalPages != 1 {
			t.Fatalf("list: %v %d %+v", err, len(list), resp)
		}
		_, _, err = bot.MergeRequests.GetMergeRequest(pid, 99, nil)
		if !errors.Is(err, gl.ErrNotFound) {
			t.Fatalf("missing MR: %v", err)
		}
	})

	waitDetailed := func(t *testing.T, iid int64, want string) *gl.MergeRequest {
		t.Helper()
		var got *gl.MergeRequest
		eventually(t, want, func() bool {
			var err error
			got, _, err = bot.MergeRequests.GetMergeRequest(pid, iid, &gl.GetMergeRequestsOptions{IncludeRebaseInProgress: gl.Ptr(true)})
			return err == nil && got.DetailedMergeStatus == want
		})
		return got
	}

	t.Run("pipelines", func(t *testing.T) {
		waitDetailed(t, 1, "not_approved")
		ps, _, err := bot.MergeRequests.ListMergeRequestPipelines(pid, 1)
		if err != nil || len(ps) != 1 || ps[0].SHA != head || ps[0].Ref != "req/1" || ps[0].Status != "success" {
			t.Fatalf("pipelines: %v %+v", err, ps)
		}
		p, _, err := bot.Pipelines.GetPipeline(pid, ps[0].ID)
		if err != nil || p.Status != "success" || p.SHA != head {
			t.Fatalf("pipeline: %v %+v", err, p)
		}
	})

	t.Run("approvals", func(t *testing.T) {
		ap, resp, err := a1.MergeRequestApprovals.ApproveMergeRequest(pid, 1, &gl.ApproveMergeRequestOptions{SHA: gl.Ptr(head)})
		if err != nil || resp.StatusCode != 201 || len(ap.ApprovedBy) != 1 || ap.ApprovedBy[0].User.Username != "approver-1" {
			t.Fatalf("approve: %v %+v", err, ap)
		}
		_, _, err = a1.MergeRequestApprovals.ApproveMergeRequest(pid, 1, nil)
		wantStatus(t, err, 401)
		_, _, err = bot.MergeRequestApprovals.ApproveMergeRequest(pid, 1, nil)
		wantStatus(t, err, 401)
		_, _, err = obs.MergeRequestApprovals.ApproveMergeRequest(pid, 1, nil)
		wantStatus(t, err, 403)
		_, _, err = a2.MergeRequestApprovals.ApproveMergeRequest(pid, 1, &gl.ApproveMergeRequestOptions{SHA: gl.Ptr(strings.Repeat("0", 40))})
		wantStatus(t, err, 409)
		cfg, _, err := a1.MergeRequestApprovals.GetConfiguration(pid, 1)
		if err != nil || !cfg.UserHasApproved || cfg.UserCanApprove || cfg.ApprovalsRequired != 2 || cfg.ApprovalsLeft != 1 {
			t.Fatalf("config as a1: %v %+v", err, cfg)
		}
		if _, err := a2.MergeRequestApprovals.UnapproveMergeRequest(pid, 1); !errors.Is(err, gl.ErrNotFound) {
			t.Fatalf("unapprove without approval: %v", err)
		}
		if _, _, err := a2.MergeRequestApprovals.ApproveMergeRequest(pid, 1, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := a2.MergeRequestApprovals.UnapproveMergeRequest(pid, 1); err != nil {
			t.Fatalf("unapprove: %v", err)
		}
		if _, _, err := a2.MergeRequestApprovals.ApproveMergeRequest(pid, 1, nil); err != nil {
			t.Fatal(err)
		}
		cfg, _, err = bot.MergeRequestApprovals.GetConfiguration(pid, 1)
		if err != nil || !cfg.Approved || len(cfg.ApprovedBy) != 2 || cfg.UserHasApproved {
			t.Fatalf("config as bot: %v %+v", err, cfg)
		}
	})

	t.Run("merge errors", func(t *testing.T) {
		waitDetailed(t, 1, "mergeable")
		_, _, err := obs.MergeRequests.AcceptMergeRequest(pid, 1, &gl.AcceptMergeRequestOptions{SHA: gl.Ptr(head)})
		wantStatus(t, err, 401)
		_, _, err = a1.MergeRequests.AcceptMergeRequest(pid, 1, &gl.AcceptMergeRequestOptions{SHA: gl.Ptr(strings.Repeat("0", 40))})
		wantStatus(t, err, 409)
		e.must(200, "POST", "", "/_control/merge_failures", nil)
		_, _, err = a1.MergeRequests.AcceptMergeRequest(pid, 1, &gl.AcceptMergeRequestOptions{SHA: gl.Ptr(head)})
		wantStatus(t, err, 422)
		got, _, _ := bot.MergeRequests.GetMergeRequest(pid, 1, nil)
		if got.MergeError == "" {
			t.Fatalf("merge_error empty after 422")
		}
	})

	t.Run("rebase", func(t *testing.T) {
		// Move main with another MR, then rebase MR 1 onto it.
		e.readyMR("other", map[string]string{"bindings/o.yaml": binding("o")})
		if _, _, err := a1.MergeRequests.AcceptMergeRequest(pid, 2, nil); err != nil {
			t.Fatalf("merge other: %v", err)
		}
		resp, err := bot.MergeRequests.RebaseMergeRequest(pid, 1, nil)
		if err != nil || resp.StatusCode != http.StatusAccepted {
			t.Fatalf("rebase: %v %v", err, resp)
		}
		eventually(t, "rebase done", func() bool {
			got, _, err := bot.MergeRequests.GetMergeRequest(pid, 1, &gl.GetMergeRequestsOptions{IncludeRebaseInProgress: gl.Ptr(true)})
			return err == nil && !got.RebaseInProgress && got.SHA != head
		})
		_, err = obs.MergeRequests.RebaseMergeRequest(pid, 1, nil)
		wantStatus(t, err, 403)
	})

	t.Run("merge", func(t *testing.T) {
		got := waitDetailed(t, 1, "mergeable")
		m, _, err := a1.MergeRequests.AcceptMergeRequest(pid, 1, &gl.AcceptMergeRequestOptions{SHA: gl.Ptr(got.SHA), ShouldRemoveSourceBranch: gl.Ptr(true)})
		if err != nil || m.State != "merged" || m.MergeCommitSHA == "" || m.MergedAt == nil || m.MergeUser == nil || m.MergeUser.Username != "approver-1" {
			t.Fatalf("merge: %v %+v", err, m)
		}
		_, _, err = a1.MergeRequests.AcceptMergeRequest(pid, 1, &gl.AcceptMergeRequestOptions{SHA: gl.Ptr(got.SHA)})
		wantStatus(t, err, 405)
		raw, _, err := bot.RepositoryFiles.GetRawFile(pid, "bindings/a.yaml", &gl.GetRawFileOptions{Ref: gl.Ptr("main")})
		if err != nil || string(raw) != binding("alice") {
			t.Fatalf("a.yaml on main: %v %q", err, raw)
		}
	})

	t.Run("update and close", func(t *testing.T) {
		e.openMR("closing", map[string]string{"bindings/c.yaml": binding("c")})
		m, _, err := bot.MergeRequests.UpdateMergeRequest(pid, 3, &gl.UpdateMergeRequestOptions{Title: gl.Ptr("Renamed")})
		if err != nil || m.Title != "Renamed" {
			t.Fatalf("update: %v %+v", err, m)
		}
		m, _, err = bot.MergeRequests.UpdateMergeRequest(pid, 3, &gl.UpdateMergeRequestOptions{StateEvent: gl.Ptr("close")})
		if err != nil || m.State != "closed" || m.ClosedAt == nil {
			t.Fatalf("close: %v %+v", err, m)
		}
		list, _, err := bot.MergeRequests.ListProjectMergeRequests(pid, &gl.ListProjectMergeRequestsOptions{State: gl.Ptr("merged")})
		if err != nil || len(list) != 2 {
			t.Fatalf("merged list: %v %d", err, len(list))
		}
	})

	t.Run("force commit regenerates a branch on the target's head", func(t *testing.T) {
		e.branchWithFiles("regen", map[string]string{"bindings/r.yaml": binding("rita")})
		upd := func(content string) []*gl.CommitActionOptions {
			return []*gl.CommitActionOptions{{Action: gl.Ptr(gl.FileUpdate), FilePath: gl.Ptr("bindings/README.md"), Content: gl.Ptr(content)}}
		}
		if _, _, err := bot.Commits.CreateCommit(pid, &gl.CreateCommitOptions{Branch: gl.Ptr("main"),
			CommitMessage: gl.Ptr("main moves"), Actions: upd("moved\n")}); err != nil {
			t.Fatal(err)
		}
		mainBr, _, err := bot.Branches.GetBranch(pid, "main")
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = bot.Commits.CreateCommit(pid, &gl.CreateCommitOptions{Branch: gl.Ptr("regen"), StartBranch: gl.Ptr("main"),
			CommitMessage: gl.Ptr("no force"), Actions: upd("x\n")})
		wantStatus(t, err, 400)
		_, _, err = bot.Commits.CreateCommit(pid, &gl.CreateCommitOptions{Branch: gl.Ptr("regen"), StartBranch: gl.Ptr("main"),
			StartSHA: gl.Ptr(mainBr.Commit.ID), Force: gl.Ptr(true), CommitMessage: gl.Ptr("both"), Actions: upd("x\n")})
		wantStatus(t, err, 400)
		c, resp, err := bot.Commits.CreateCommit(pid, &gl.CreateCommitOptions{Branch: gl.Ptr("regen"), StartSHA: gl.Ptr(mainBr.Commit.ID),
			Force: gl.Ptr(true), CommitMessage: gl.Ptr("regenerated"), Actions: upd("regenerated\n")})
		if err != nil || resp.StatusCode != 201 || len(c.ParentIDs) != 1 || c.ParentIDs[0] != mainBr.Commit.ID {
			t.Fatalf("force commit: %v %+v", err, c)
		}
		got, _, err := bot.Commits.GetCommit(pid, "regen", nil)
		if err != nil || got.ID != c.ID || len(got.ParentIDs) != 1 || got.ParentIDs[0] != mainBr.Commit.ID {
			t.Fatalf("branch head after force: %v %+v", err, got)
		}
		if _, _, err := bot.RepositoryFiles.GetRawFile(pid, "bindings/r.yaml", &gl.GetRawFileOptions{Ref: gl.Ptr("regen")}); !errors.Is(err, gl.ErrNotFound) {
			t.Fatalf("the overwritten commit's file must be gone: %v", err)
		}
	})

	t.Run("lost response surfaces as a transport error", func(t *testing.T) {
		e.must(201, "POST", "", "/_control/faults", map[string]any{"method": "POST", "path": "/projects/*/repository/branches", "kind": "drop"})
		_, _, err := bot.Branches.CreateBranch(pid, &gl.CreateBranchOptions{Branch: gl.Ptr("lost"), Ref: gl.Ptr("main")})
		var er *gl.ErrorResponse
		if err == nil || errors.As(err, &er) {
			t.Fatalf("want a transport error, got %v", err)
		}
		if _, _, err := bot.Branches.GetBranch(pid, "lost"); err != nil {
			t.Fatalf("the branch must exist: %v", err)
		}
	})

	t.Run("client-go's default retries repeat a POST on 502", func(t *testing.T) {
		retrying, err := gl.NewClient(tokBot, gl.WithBaseURL(e.base+"/api/v4"), gl.WithCustomRetryWaitMinMax(time.Millisecond, 5*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		e.must(201, "POST", "", "/_control/faults", map[string]any{"method": "POST", "path": "/projects/*/repository/branches", "kind": "drop", "mode": "502"})
		_, _, err = retrying.Branches.CreateBranch(pid, &gl.CreateBranchOptions{Branch: gl.Ptr("twice"), Ref: gl.Ptr("main")})
		wantStatus(t, err, 400) // the retry finds the branch the first call made
	})
}
