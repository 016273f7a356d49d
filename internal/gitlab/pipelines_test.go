package gitlab_test

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"changeflow/internal/gitlab"
)

// pushes adds n commits to branch, each of which starts an MR pipeline.
func (e *env) pushes(branch string, n int) {
	e.t.Helper()
	for i := range n {
		if _, err := e.gl.CreateCommit(ctx(e.t), project, gitlab.CommitRequest{
			Branch: branch, Message: "update " + branch,
			Actions: []gitlab.FileAction{{Action: gitlab.ActionUpdate, Path: "bindings/" + branch + ".yaml", Content: binding(branch + fmtInt(int64(i)))}},
		}); err != nil {
			e.t.Fatalf("commit %d: %v", i, err)
		}
	}
}

const pipelinesPath = "/projects/*/merge_requests/*/pipelines"

// TestListMRPipelinesFollowsPages: with more pipelines than a page, the
// adapter follows GitLab's pagination and returns every pipeline, newest
// first, one GET per page.
func TestListMRPipelinesFollowsPages(t *testing.T) {
	e := newEnv(t)
	mr := e.openMR("req/pages")
	e.pushes("req/pages", 4) // 5 pipelines: the MR's first and one a push
	gitlab.SetPipelinePaging(e.gl, 2, 0)
	e.resetCalls()
	var pages []string
	e.setBefore(func(r *http.Request) {
		if r.Method == http.MethodGet {
			pages = append(pages, r.URL.Query().Get("page")+"/"+r.URL.Query().Get("per_page"))
		}
	})

	ps, err := e.gl.ListMRPipelines(ctx(t), project, mr.IID)
	if err != nil {
		t.Fatalf("ListMRPipelines: %v", err)
	}
	if len(ps) != 5 {
		t.Fatalf("want 5 pipelines over 3 pages, got %d: %+v", len(ps), ps)
	}
	for i := 1; i < len(ps); i++ {
		if ps[i].ID >= ps[i-1].ID {
			t.Fatalf("not newest first (or repeated): %+v", ps)
		}
	}
	if n := e.count(http.MethodGet, pipelinesPath); n != 3 {
		t.Fatalf("want 3 page requests, got %d", n)
	}
	e.setBefore(nil)
	if want := []string{"/2", "2/2", "3/2"}; len(pages) != 3 || pages[0] != want[0] || pages[1] != want[1] || pages[2] != want[2] {
		t.Fatalf("page/per_page requested: %v, want %v", pages, want)
	}
	mrNow, err := e.gl.GetMR(ctx(t), project, mr.IID)
	if err != nil || mrNow.HeadPipeline == nil || ps[0].ID != mrNow.HeadPipeline.ID {
		t.Fatalf("first listed is not the head pipeline: %+v %+v %v", ps[0], mrNow.HeadPipeline, err)
	}
}

// TestListMRPipelinesBounded: the walk stops after the page bound with the
// newest pipelines, and no request goes past it.
func TestListMRPipelinesBounded(t *testing.T) {
	e := newEnv(t)
	mr := e.openMR("req/bound")
	e.pushes("req/bound", 4)
	gitlab.SetPipelinePaging(e.gl, 1, 3)
	all, err := func() ([]gitlab.Pipeline, error) {
		gitlab.SetPipelinePaging(e.gl, 100, 0)
		defer gitlab.SetPipelinePaging(e.gl, 1, 3)
		return e.gl.ListMRPipelines(ctx(t), project, mr.IID)
	}()
	if err != nil || len(all) != 5 {
		t.Fatalf("full list: %d %v", len(all), err)
	}
	e.resetCalls()

	ps, err := e.gl.ListMRPipelines(ctx(t), project, mr.IID)
	if err != nil {
		t.Fatalf("ListMRPipelines: %v", err)
	}
	if len(ps) != 3 || ps[0].ID != all[0].ID || ps[1].ID != all[1].ID || ps[2].ID != all[2].ID {
		t.Fatalf("want the 3 newest of %+v, got %+v", all, ps)
	}
	if n := e.count(http.MethodGet, pipelinesPath); n != 3 {
		t.Fatalf("want 3 page requests, got %d", n)
	}
}

// TestListMRPipelinesPageFailure: a page that fails fails the list (a
// partial list would look complete).
func TestListMRPipelinesPageFailure(t *testing.T) {
	e := newEnv(t)
	mr := e.openMR("req/pagefail")
	e.pushes("req/pagefail", 2)
	var pages atomic.Int32
	g := gitlab.New(gitlab.Options{
		Settings: func() gitlab.Settings { return *e.settings.Load() },
		Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
			pages.Add(1)
			if r.URL.Query().Get("page") == "2" {
				return &http.Response{
					StatusCode: http.StatusServiceUnavailable, Header: http.Header{"Content-Type": {"application/json"}},
					Body: io.NopCloser(strings.NewReader(`{"message":"503 Service Unavailable"}`)), Request: r,
				}, nil
			}
			return http.DefaultTransport.RoundTrip(r)
		}),
	})
	gitlab.SetPipelinePaging(g, 2, 0)
	ps, err := g.ListMRPipelines(ctx(t), project, mr.IID)
	wantErr(t, err, "ListMRPipelines", http.StatusServiceUnavailable)
	if ps != nil || pages.Load() != 2 {
		t.Fatalf("want no list after 2 requests, got %+v after %d", ps, pages.Load())
	}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
