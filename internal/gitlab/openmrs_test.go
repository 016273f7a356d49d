package gitlab_test

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"changeflow/internal/gitlab"
)

const mrListPath = "/projects/*/merge_requests"

// openMRsWorld opens MRs on a, b, c, d, e into main (c then closed) and
// one on f into another branch: the open MRs into main are a, b, d, e.
func openMRsWorld(t *testing.T) (*env, []gitlab.MR) {
	e := newEnv(t)
	var mrs []gitlab.MR
	for _, b := range []string{"list/a", "list/b", "list/c", "list/d", "list/e"} {
		mrs = append(mrs, e.openMR(b))
	}
	if _, err := e.gl.CloseMR(ctx(t), project, mrs[2].IID); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, err := e.gl.CreateBranch(ctx(t), project, "release", "main"); err != nil {
		t.Fatalf("branch: %v", err)
	}
	if _, err := e.gl.CreateCommit(ctx(t), project, gitlab.CommitRequest{
		Branch: "list/f", StartBranch: "release", Message: "f",
		Actions: []gitlab.FileAction{{Action: gitlab.ActionCreate, Path: "bindings/f.yaml", Content: binding("f")}},
	}); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if _, err := e.gl.CreateMR(ctx(t), project, gitlab.CreateMRRequest{SourceBranch: "list/f", TargetBranch: "release", Title: "f"}); err != nil {
		t.Fatalf("MR into release: %v", err)
	}
	return e, []gitlab.MR{mrs[0], mrs[1], mrs[3], mrs[4]}
}

func iids(mrs []gitlab.MR) []int64 {
	out := make([]int64, len(mrs))
	for i, m := range mrs {
		out[i] = m.IID
	}
	return out
}

// TestListOpenMRsFollowsPagesOldestFirst: the list asks GitLab for the
// open MRs into the branch, oldest first (state=opened, target_branch,
// order_by=created_at, sort=asc), follows the pages, one GET each, and
// returns exactly the open MRs into that branch with their source branch.
func TestListOpenMRsFollowsPagesOldestFirst(t *testing.T) {
	e, want := openMRsWorld(t)
	gitlab.SetOpenMRPaging(e.gl, 2, 0)
	e.resetCalls()
	var queries []string
	e.setBefore(func(r *http.Request) {
		if r.Method == http.MethodGet {
			queries = append(queries, r.URL.RawQuery)
		}
	})
	got, truncated, err := e.gl.ListOpenMRs(ctx(t), project, "main")
	e.setBefore(nil)
	if err != nil || truncated {
		t.Fatalf("ListOpenMRs: truncated %v, %v", truncated, err)
	}
	if !slices.Equal(iids(got), iids(want)) {
		t.Fatalf("open MRs into main, oldest first: got %v, want %v", iids(got), iids(want))
	}
	for i, m := range got {
		if m.SourceBranch != want[i].SourceBranch || m.State != gitlab.MRStateOpened || m.TargetBranch != "main" {
			t.Fatalf("MR !%d: %+v", m.IID, m)
		}
	}
	if n := e.count(http.MethodGet, mrListPath); n != 2 {
		t.Fatalf("want 2 page requests for 4 MRs by 2, got %d (%v)", n, queries)
	}
	for _, q := range []string{"state=opened", "target_branch=main", "order_by=created_at", "sort=asc", "per_page=2"} {
		if !strings.Contains(queries[0], q) || !strings.Contains(queries[1], q) {
			t.Fatalf("every page asks %s: %v", q, queries)
		}
	}
	if !strings.Contains(queries[1], "page=2") {
		t.Fatalf("the second request asks page 2: %v", queries)
	}
}

// TestListOpenMRsBounded: the walk stops at the page bound with the
// oldest MRs and says the list was cut; no request goes past the bound.
func TestListOpenMRsBounded(t *testing.T) {
	e, want := openMRsWorld(t)
	gitlab.SetOpenMRPaging(e.gl, 1, 2)
	e.resetCalls()
	got, truncated, err := e.gl.ListOpenMRs(ctx(t), project, "main")
	if err != nil || !truncated {
		t.Fatalf("ListOpenMRs: truncated %v, %v", truncated, err)
	}
	if !slices.Equal(iids(got), iids(want[:2])) {
		t.Fatalf("the two oldest: got %v, want %v", iids(got), iids(want[:2]))
	}
	if n := e.count(http.MethodGet, mrListPath); n != 2 {
		t.Fatalf("want 2 page requests, got %d", n)
	}
}

// TestListOpenMRsPageFailure: a page that fails fails the list with the
// real status (a partial list would look complete).
func TestListOpenMRsPageFailure(t *testing.T) {
	e, _ := openMRsWorld(t)
	g := gitlab.New(gitlab.Options{
		Settings: func() gitlab.Settings { return *e.settings.Load() },
		Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
			if r.URL.Query().Get("page") == "2" {
				return &http.Response{
					StatusCode: http.StatusServiceUnavailable, Header: http.Header{"Content-Type": {"application/json"}},
					Body: io.NopCloser(strings.NewReader(`{"message":"503 Service Unavailable"}`)), Request: r,
				}, nil
			}
			return http.DefaultTransport.RoundTrip(r)
		}),
	})
	gitlab.SetOpenMRPaging(g, 2, 0)
	mrs, _, err := g.ListOpenMRs(ctx(t), project, "main")
	wantErr(t, err, "ListOpenMRs", http.StatusServiceUnavailable)
	if mrs != nil {
		t.Fatalf("no partial list: %+v", mrs)
	}
}
