package gitlab_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"testing"

	"changeflow/internal/gitlab"
)

// TestContractHeadCheckReads: the reads of the head check through the
// adapter against the simulator — GET /user (cached per token),
// merge_base, compare (commits with their authors, the paths), an MR's
// author — with GitLab's error model for unknown refs.
func TestContractHeadCheckReads(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	g := e.gl

	u, err := g.CurrentUser(c, gitlab.Committer)
	if err != nil || u.Username != "changeflow-bot" || u.Email != "changeflow-bot@changeflow.local" || u.ID == 0 {
		t.Fatalf("CurrentUser: %+v %v", u, err)
	}
	if _, err := g.CurrentUser(c, gitlab.Committer); err != nil {
		t.Fatal(err)
	}
	if n := e.count("GET", "/user"); n != 1 {
		t.Fatalf("GET /user reached GitLab %d times; the account is cached", n)
	}
	if a, err := g.CurrentUser(c, gitlab.Approver1); err != nil || a.Username != "approver-1" {
		t.Fatalf("CurrentUser(approver1): %+v %v", a, err)
	}

	main, err := g.GetBranch(c, project, "main")
	if err != nil {
		t.Fatal(err)
	}
	cm, err := g.CreateCommit(c, project, gitlab.CommitRequest{Branch: "changeflow/op-cmp", StartBranch: "main", Message: "bind alice",
		Actions: []gitlab.FileAction{{Action: gitlab.ActionCreate, Path: "bindings/a.yaml", Content: binding("alice")}}})
	if err != nil {
		t.Fatal(err)
	}
	// The developer pushes on top, as a person with push rights would.
	status, body := e.as("local-developer-token", "POST", "/projects/1/repository/commits", map[string]any{
		"branch": "changeflow/op-cmp", "commit_message": "sneak",
		"actions": []map[string]any{{"action": "create", "file_path": "bindings/sneak.yaml", "content": "x\n"}},
	})
	if status != http.StatusCreated {
		t.Fatalf("developer commit: %d %s", status, body)
	}
	head, err := g.GetBranch(c, project, "changeflow/op-cmp")
	if err != nil {
		t.Fatal(err)
	}

	base, err := g.MergeBase(c, project, "main", head.CommitID)
	if err != nil || base.ID != main.CommitID {
		t.Fatalf("MergeBase: %+v %v (main %s)", base, err, main.CommitID)
	}
	cmp, err := g.Compare(c, project, base.ID, head.CommitID)
	if err != nil || cmp.Timeout {
		t.Fatalf("Compare: %+v %v", cmp, err)
	}
	if len(cmp.Commits) != 2 || cmp.Commits[0].ID != cm.ID || cmp.Commits[0].AuthorEmail != u.Email ||
		cmp.Commits[1].AuthorEmail != "developer@changeflow.local" || cmp.Commits[1].AuthorName != "Dev Eloper" {
		t.Fatalf("Compare commits (oldest first, with authors): %+v", cmp.Commits)
	}
	paths := slices.Clone(cmp.Paths)
	slices.Sort(paths)
	if !slices.Equal(paths, []string{"bindings/a.yaml", "bindings/sneak.yaml"}) {
		t.Fatalf("Compare paths: %v", cmp.Paths)
	}
	got, err := g.GetCommit(c, project, cm.ID)
	if err != nil || got.AuthorEmail != u.Email {
		t.Fatalf("GetCommit author: %+v %v", got, err)
	}

	_, err = g.MergeBase(c, project, "main", "no-such-branch")
	wantErr(t, err, "MergeBase", 400)
	_, err = g.Compare(c, project, "main", "no-such-branch")
	wantErr(t, err, "Compare", 404)

	mr, err := g.CreateMR(c, project, gitlab.CreateMRRequest{SourceBranch: "changeflow/op-cmp", TargetBranch: "main", Title: "t"})
	if err != nil || mr.AuthorUsername != "changeflow-bot" {
		t.Fatalf("CreateMR author: %+v %v", mr, err)
	}
	found, ok, err := g.FindMRBySourceBranch(c, project, "changeflow/op-cmp", gitlab.StateAll)
	if err != nil || !ok || found.AuthorUsername != "changeflow-bot" {
		t.Fatalf("FindMRBySourceBranch author: %+v %v %v", found, ok, err)
	}
	// sha on approve and merge answers 409 for a head that moved.
	err = g.Approve(c, gitlab.Approver1, project, mr.IID, cm.ID)
	wantErr(t, err, "Approve", 409)
	_, err = g.Merge(c, project, mr.IID, cm.ID)
	wantErr(t, err, "Merge", 409)
}

// as calls the simulator's REST API with token and returns the status
// and the body.
func (e *env) as(token, method, p string, body any) (int, string) {
	e.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, e.base+"api/v4"+p, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("PRIVATE-TOKEN", token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, p, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(raw)
}
