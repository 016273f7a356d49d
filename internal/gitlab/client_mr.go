package gitlab

import (
	"context"
	"strconv"

	"github.com/hashicorp/go-retryablehttp"
	gl "gitlab.com/gitlab-org/api/client-go"
)

// FindMRBySourceBranch implements GitLab.
func (c *Client) FindMRBySourceBranch(ctx context.Context, project, source string, state MRStateFilter) (MR, bool, error) {
	var out MR
	found := false
	err := c.call(ctx, "FindMRBySourceBranch", Committer, func(ctx context.Context, cl *gl.Client) (*gl.Response, error) {
		opt := &gl.ListProjectMergeRequestsOptions{
			SourceBranch: gl.Ptr(source), State: gl.Ptr(string(state)),
			OrderBy: gl.Ptr("created_at"), Sort: gl.Ptr("desc"),
		}
		opt.PerPage = 1
		mrs, resp, err := cl.MergeRequests.ListProjectMergeRequests(project, opt, gl.WithContext(ctx))
		if err == nil && len(mrs) > 0 {
			out, found = fromBasicMR(mrs[0]), true
		}
		return resp, err
	})
	return out, found, err
}

// openMRsPerPage and maxOpenMRPages bound ListOpenMRs: 10 pages of 100
// is 1,000 open MRs into one branch, ten calls at most per project and
// run. What a bounded walk leaves out is the newest MRs (the list is
// oldest first, so an MR left open long ago is on the first pages); the
// caller is told (truncated) and logs it.
const (
	openMRsPerPage = 100
	maxOpenMRPages = 10
)

// ListOpenMRs implements GitLab: GET /projects/:id/merge_requests with
// state=opened, target_branch, order_by=created_at, sort=asc, following
// GitLab's pagination (the Link header's next URL, else X-Next-Page) up
// to maxOpenMRPages pages. A failed page fails the whole list: a partial
// list would look complete.
func (c *Client) ListOpenMRs(ctx context.Context, project, targetBranch string) ([]MR, bool, error) {
	perPage := c.openMRsPerPage
	if perPage <= 0 {
		perPage = openMRsPerPage
	}
	maxPages := c.maxOpenMRPages
	if maxPages <= 0 {
		maxPages = maxOpenMRPages
	}
	opt := &gl.ListProjectMergeRequestsOptions{
		State: gl.Ptr(string(StateOpened)), OrderBy: gl.Ptr("created_at"), Sort: gl.Ptr("asc"),
	}
	if targetBranch != "" {
		opt.TargetBranch = gl.Ptr(targetBranch)
	}
	opt.PerPage = int64(perPage)
	var out []MR
	var next gl.RequestOptionFunc // nil on the first page
	for page := 1; ; page++ {
		var resp *gl.Response
		err := c.call(ctx, "ListOpenMRs", Committer, func(ctx context.Context, cl *gl.Client) (*gl.Response, error) {
			opts := []gl.RequestOptionFunc{gl.WithContext(ctx)}
			if next != nil {
				opts = append(opts, next)
			}
			mrs, r, err := cl.MergeRequests.ListProjectMergeRequests(project, opt, opts...)
			for _, m := range mrs {
				out = append(out, fromBasicMR(m))
			}
			resp = r
			return r, err
		})
		if err != nil {
			return nil, false, err
		}
		if resp == nil {
			return out, false, nil
		}
		n, more := gl.WithNext(resp)
		if !more {
			return out, false, nil
		}
		if page >= maxPages {
			return out, true, nil
		}
		next = n
	}
}

// CreateMR implements GitLab.
func (c *Client) CreateMR(ctx context.Context, project string, r CreateMRRequest) (MR, error) {
	opt := &gl.CreateMergeRequestOptions{
		SourceBranch: gl.Ptr(r.SourceBranch), TargetBranch: gl.Ptr(r.TargetBranch),
		Title: gl.Ptr(r.Title), Description: gl.Ptr(r.Description),
	}
	return c.mrCallPaced(ctx, "CreateMR", project, func(ctx context.Context, cl *gl.Client) (*gl.MergeRequest, *gl.Response, error) {
		return cl.MergeRequests.CreateMergeRequest(project, opt, gl.WithContext(ctx))
	})
}

// GetMR implements GitLab.
func (c *Client) GetMR(ctx context.Context, project string, iid int64) (MR, error) {
	return c.mrCall(ctx, "GetMR", func(ctx context.Context, cl *gl.Client) (*gl.MergeRequest, *gl.Response, error) {
		return cl.MergeRequests.GetMergeRequest(project, iid, &gl.GetMergeRequestsOptions{IncludeRebaseInProgress: gl.Ptr(true)}, gl.WithContext(ctx))
	})
}

// CloseMR implements GitLab.
func (c *Client) CloseMR(ctx context.Context, project string, iid int64) (MR, error) {
	return c.mrCall(ctx, "CloseMR", func(ctx context.Context, cl *gl.Client) (*gl.MergeRequest, *gl.Response, error) {
		return cl.MergeRequests.UpdateMergeRequest(project, iid, &gl.UpdateMergeRequestOptions{StateEvent: gl.Ptr("close")}, gl.WithContext(ctx))
	})
}

// Merge implements GitLab.
func (c *Client) Merge(ctx context.Context, project string, iid int64, sha string) (MR, error) {
	opt := &gl.AcceptMergeRequestOptions{}
	if sha != "" {
		opt.SHA = gl.Ptr(sha)
	}
	return c.mrCall(ctx, "Merge", func(ctx context.Context, cl *gl.Client) (*gl.MergeRequest, *gl.Response, error) {
		return cl.MergeRequests.AcceptMergeRequest(project, iid, opt, gl.WithContext(ctx))
	})
}

func (c *Client) mrCall(ctx context.Context, op string, fn func(ctx context.Context, cl *gl.Client) (*gl.MergeRequest, *gl.Response, error)) (MR, error) {
	return c.mrCallPaced(ctx, op, "", fn)
}

// mrCallPaced is mrCall for a call that starts a pipeline in project
// (callPaced): opening an MR starts its pipeline.
func (c *Client) mrCallPaced(ctx context.Context, op, project string, fn func(ctx context.Context, cl *gl.Client) (*gl.MergeRequest, *gl.Response, error)) (MR, error) {
	var out MR
	err := c.callPaced(ctx, op, Committer, project, func(ctx context.Context, cl *gl.Client) (*gl.Response, error) {
		m, resp, err := fn(ctx, cl)
		if err == nil && m != nil {
			out = fromMR(m)
		}
		return resp, err
	})
	return out, err
}

// Rebase implements GitLab.
func (c *Client) Rebase(ctx context.Context, project string, iid int64) error {
	return c.callPaced(ctx, "Rebase", Committer, project, func(ctx context.Context, cl *gl.Client) (*gl.Response, error) {
		return cl.MergeRequests.RebaseMergeRequest(project, iid, nil, gl.WithContext(ctx))
	})
}

// Pagination of ListMRPipelines. GitLab pages the MR pipelines endpoint
// by offset (X-Page, X-Next-Page and a Link header; 20 a page unless
// per_page says otherwise, at most 100). The adapter asks for the largest
// page, so an ordinary MR is one round trip, and follows the next page
// with the client library's WithNext, which takes the Link header's next
// URL when there is one (keyset style) and X-Next-Page otherwise.
//
// maxPipelinePages bounds the walk: 20 pages of 100 is 2000 pipelines,
// far more than any MR of this service runs (one per push of its
// branch), while a runaway MR or a server that keeps answering a next
// page cannot hold a caller for more than 20 call deadlines. The list is
// newest first, so what a bounded walk leaves out is the oldest
// pipelines; the truncation is logged, not an error, because the head
// pipelines a caller looks for are on the first page.
const (
	pipelinesPerPage = 100
	maxPipelinePages = 20
)

// ListMRPipelines implements GitLab: every page, newest first, up to
// maxPipelinePages pages. Each page is one call with its own deadline
// through the breaker; a failed page fails the whole list (a partial list
// would look complete).
func (c *Client) ListMRPipelines(ctx context.Context, project string, iid int64) ([]Pipeline, error) {
	perPage := c.pipelinesPerPage
	if perPage <= 0 {
		perPage = pipelinesPerPage
	}
	maxPages := c.maxPipelinePages
	if maxPages <= 0 {
		maxPages = maxPipelinePages
	}
	var out []Pipeline
	var next gl.RequestOptionFunc // nil on the first page
	for page := 1; ; page++ {
		var resp *gl.Response
		err := c.call(ctx, "ListMRPipelines", Committer, func(ctx context.Context, cl *gl.Client) (*gl.Response, error) {
			opts := []gl.RequestOptionFunc{gl.WithContext(ctx), withPerPage(perPage)}
			if next != nil {
				opts = append(opts, next)
			}
			ps, r, err := cl.MergeRequests.ListMergeRequestPipelines(project, iid, opts...)
			for _, p := range ps {
				out = append(out, fromPipelineInfo(p))
			}
			resp = r
			return r, err
		})
		if err != nil {
			return nil, err
		}
		if resp == nil {
			return out, nil
		}
		n, more := gl.WithNext(resp)
		if !more {
			return out, nil
		}
		if page >= maxPages {
			c.logger.Warn("gitlab: MR pipeline list truncated", "project", project, "iid", iid,
				"pages", page, "pipelines", len(out))
			return out, nil
		}
		next = n
	}
}

// RetryPipeline implements GitLab.
func (c *Client) RetryPipeline(ctx context.Context, project string, pipelineID int64) (Pipeline, error) {
	var out Pipeline
	err := c.callPaced(ctx, "RetryPipeline", Committer, project, func(ctx context.Context, cl *gl.Client) (*gl.Response, error) {
		p, r, err := cl.Pipelines.RetryPipelineBuild(project, pipelineID, gl.WithContext(ctx))
		if p != nil {
			out = fromPipeline(p)
		}
		return r, err
	})
	return out, err
}

// CreateMRPipeline implements GitLab.
func (c *Client) CreateMRPipeline(ctx context.Context, project string, iid int64) (Pipeline, error) {
	var out Pipeline
	err := c.callPaced(ctx, "CreateMRPipeline", Committer, project, func(ctx context.Context, cl *gl.Client) (*gl.Response, error) {
		p, r, err := cl.MergeRequests.CreateMergeRequestPipeline(project, iid, gl.WithContext(ctx))
		if p != nil {
			out = fromPipelineInfo(p)
		}
		return r, err
	})
	return out, err
}

// withPerPage sets per_page on a list request whose method takes no list
// options (ListMergeRequestPipelines takes only request options).
func withPerPage(n int) gl.RequestOptionFunc {
	return func(req *retryablehttp.Request) error {
		q := req.URL.Query()
		q.Set("per_page", strconv.Itoa(n))
		req.URL.RawQuery = q.Encode()
		return nil
	}
}

// GetApprovals implements GitLab.
func (c *Client) GetApprovals(ctx context.Context, bot Bot, project string, iid int64) (Approvals, error) {
	var out Approvals
	err := c.call(ctx, "GetApprovals", bot, func(ctx context.Context, cl *gl.Client) (*gl.Response, error) {
		a, resp, err := cl.MergeRequestApprovals.GetConfiguration(project, iid, gl.WithContext(ctx))
		if err == nil && a != nil {
			out = Approvals{Approved: a.Approved, UserHasApproved: a.UserHasApproved, UserCanApprove: a.UserCanApprove, ApprovalsLeft: a.ApprovalsLeft}
			for _, u := range a.ApprovedBy {
				if u != nil && u.User != nil {
					out.ApprovedBy = append(out.ApprovedBy, u.User.Username)
				}
			}
		}
		return resp, err
	})
	return out, err
}

// Approve implements GitLab (client library, no check items).
func (c *Client) Approve(ctx context.Context, bot Bot, project string, iid int64, sha string) error {
	opt := &gl.ApproveMergeRequestOptions{}
	if sha != "" {
		opt.SHA = gl.Ptr(sha)
	}
	return c.call(ctx, "Approve", bot, func(ctx context.Context, cl *gl.Client) (*gl.Response, error) {
		_, resp, err := cl.MergeRequestApprovals.ApproveMergeRequest(project, iid, opt, gl.WithContext(ctx))
		return resp, err
	})
}

func fromBasicMR(m *gl.BasicMergeRequest) MR {
	return MR{
		IID: m.IID, ProjectID: m.ProjectID, Title: m.Title, Description: m.Description,
		SourceBranch: m.SourceBranch, TargetBranch: m.TargetBranch, State: m.State,
		DetailedMergeStatus: m.DetailedMergeStatus, HasConflicts: m.HasConflicts,
		SHA: m.SHA, MergeCommitSHA: m.MergeCommitSHA, WebURL: m.WebURL,
		AuthorUsername: authorUsername(m.Author),
	}
}

func authorUsername(u *gl.BasicUser) string {
	if u == nil {
		return ""
	}
	return u.Username
}

func fromMR(m *gl.MergeRequest) MR {
	out := fromBasicMR(&m.BasicMergeRequest)
	out.MergeError = m.MergeError
	out.RebaseInProgress = m.RebaseInProgress
	if p := m.HeadPipeline; p != nil {
		hp := fromPipeline(p)
		out.HeadPipeline = &hp
	}
	return out
}

// fromPipeline and fromPipelineInfo are the one conversion of GitLab's two
// pipeline shapes (a full pipeline, a list's or a create's summary).
func fromPipeline(p *gl.Pipeline) Pipeline {
	out := Pipeline{ID: p.ID, Status: p.Status, SHA: p.SHA, Ref: p.Ref}
	if p.CreatedAt != nil {
		out.CreatedAt = *p.CreatedAt
	}
	return out
}

func fromPipelineInfo(p *gl.PipelineInfo) Pipeline {
	out := Pipeline{ID: p.ID, Status: p.Status, SHA: p.SHA, Ref: p.Ref}
	if p.CreatedAt != nil {
		out.CreatedAt = *p.CreatedAt
	}
	return out
}
