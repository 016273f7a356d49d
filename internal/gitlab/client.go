package gitlab

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	gl "gitlab.com/gitlab-org/api/client-go"
	"golang.org/x/time/rate"

	"changeflow/internal/outbound"
)

// Options configures a Client.
type Options struct {
	// Settings is called on every call; nil means nothing is configured.
	Settings func() Settings
	// Transport is the HTTP transport (default http.DefaultTransport).
	Transport http.RoundTripper
	// Logger; nil discards.
	Logger *slog.Logger
	// BreakerName names this client's circuit breaker; "" means "gitlab".
	// Each Client has its own breaker: a second Client (the preview's) can
	// fail, or be made to fail, without opening the first one's.
	BreakerName string
}

// Client is the adapter: GitLab and CheckItemsAPI over the official client
// library (and plain net/http for the check-items extension). One
// client-library client per bot token, one breaker for GitLab.
type Client struct {
	// out is the plumbing: settings, deadline, the one breaker of this
	// client, and plain HTTP for the direct calls.
	out    *outbound.Client[Settings]
	logger *slog.Logger

	// pipelinesPerPage and maxPipelinePages override ListMRPipelines'
	// paging (tests set them small to cross pages and reach the bound);
	// 0 means the constants.
	pipelinesPerPage, maxPipelinePages int
	// openMRsPerPage and maxOpenMRPages do the same for ListOpenMRs.
	openMRsPerPage, maxOpenMRPages int

	mu      sync.Mutex
	clients map[clientKey]*gl.Client
	// users caches CurrentUser per base URL and token: a token's account
	// does not change, and the head check asks for it before every
	// approval and merge. A new token (a reload) is a new key.
	users map[clientKey]User
}

type clientKey struct{ base, token string }

var (
	_ GitLab        = (*Client)(nil)
	_ CheckItemsAPI = (*Client)(nil)
)

// New returns a Client; it does no I/O.
func New(opts Options) *Client {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	out := outbound.NewClient(outbound.Options[Settings]{
		Service: "gitlab", BreakerName: opts.BreakerName, Settings: opts.Settings, Call: Settings.call, Timeout: 10 * time.Second,
		Transport: opts.Transport, IsSuccessful: healthyAnswer,
		Adapt: func(e *outbound.Error) error { return fromOutbound(e) },
	})
	return &Client{out: out, logger: logger, clients: map[clientKey]*gl.Client{}, users: map[clientKey]User{}}
}

// healthyAnswer says err is an answer from a working GitLab: any 4xx but
// 429 is GitLab refusing this request, not GitLab failing, so it must not
// open the breaker (a run of 401s from duplicate approvals would otherwise
// cut the service off from a healthy GitLab).
func healthyAnswer(err error) bool {
	return err == nil || outbound.HealthyAnswer(StatusOf(err))
}

// lib returns the client-library client for bot under s.
//
// Retries are off (WithoutRetries, and RetryMax 0 for good measure):
// client-go's default policy retries every method, POST included, on 429
// and 5xx (retryHTTPCheck in gitlab.go of v1.46.0), so a create whose
// answer was a 502 after it was applied would run twice. We retry in our
// own code, after reading remote state. The library's rate limiter, which
// would make a call wait on its own clock, is replaced by an unlimited
// one: waiting is the workflow's decision, and every call has a deadline.
func (c *Client) lib(s Settings, op string, bot Bot) (*gl.Client, error) {
	if s.BaseURL == "" {
		return nil, &Error{Op: op, Message: "gitlab.baseURL is not configured"}
	}
	token := s.Tokens.token(bot)
	if token == "" {
		return nil, &Error{Op: op, Message: fmt.Sprintf("no token for bot %q (gitlab.tokens.%s)", bot, bot)}
	}
	key := clientKey{s.apiBase(), token}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.clients[key]; ok {
		return cl, nil
	}
	cl, err := gl.NewClient(token,
		gl.WithBaseURL(key.base),
		gl.WithHTTPClient(&http.Client{Transport: c.out.HTTP().Transport}),
		gl.WithoutRetries(),
		gl.WithCustomRetryMax(0),
		gl.WithCustomLimiter(rate.NewLimiter(rate.Inf, 0)),
	)
	if err != nil {
		return nil, &Error{Op: op, Message: "client: " + err.Error(), Err: err}
	}
	c.clients[key] = cl
	return cl, nil
}

// call runs fn as bot with the deadline, through the breaker, and
// translates its failure.
func (c *Client) call(ctx context.Context, op string, bot Bot, fn func(ctx context.Context, cl *gl.Client) (*gl.Response, error)) error {
	s := c.out.Settings()
	cl, err := c.lib(s, op, bot)
	if err != nil {
		return err
	}
	return c.out.Call(ctx, s, op, func(ctx context.Context) error {
		resp, err := fn(ctx, cl)
		if err != nil {
			return translate(op, resp, err)
		}
		return nil
	})
}

// translate turns a client-library failure into a *Error with the real
// status. A 404 comes back as the gl.ErrNotFound sentinel without a body;
// the response still has the status.
func translate(op string, resp *gl.Response, err error) *Error {
	var er *gl.ErrorResponse
	switch {
	case errors.As(err, &er) && er.Response != nil:
		return &Error{Op: op, Status: er.Response.StatusCode, Message: er.Message, Err: err}
	case resp != nil && resp.Response != nil && resp.StatusCode >= 300:
		return &Error{Op: op, Status: resp.StatusCode, Message: err.Error(), Err: err}
	case errors.Is(err, gl.ErrNotFound):
		return &Error{Op: op, Status: http.StatusNotFound, Message: "404 Not Found", Err: err}
	}
	return transportError(op, err)
}

// transportError is a failure without an answer (outbound.TransportError):
// an unknown outcome unless the connection was never made.
func transportError(op string, err error) *Error {
	return fromOutbound(outbound.TransportError("gitlab", op, err))
}

// GetBranch implements GitLab.
func (c *Client) GetBranch(ctx context.Context, project, branch string) (Branch, error) {
	var out Branch
	err := c.call(ctx, "GetBranch", Committer, func(ctx context.Context, cl *gl.Client) (*gl.Response, error) {
		b, resp, err := cl.Branches.GetBranch(project, branch, gl.WithContext(ctx))
		if err == nil {
			out = toBranch(b)
		}
		return resp, err
	})
	return out, err
}

// CreateBranch implements GitLab.
func (c *Client) CreateBranch(ctx context.Context, project, branch, ref string) (Branch, error) {
	var out Branch
	err := c.call(ctx, "CreateBranch", Committer, func(ctx context.Context, cl *gl.Client) (*gl.Response, error) {
		b, resp, err := cl.Branches.CreateBranch(project, &gl.CreateBranchOptions{Branch: gl.Ptr(branch), Ref: gl.Ptr(ref)}, gl.WithContext(ctx))
		if err == nil {
			out = toBranch(b)
		}
		return resp, err
	})
	return out, err
}

// CreateCommit implements GitLab.
func (c *Client) CreateCommit(ctx context.Context, project string, r CommitRequest) (Commit, error) {
	opt := &gl.CreateCommitOptions{Branch: gl.Ptr(r.Branch), CommitMessage: gl.Ptr(r.Message)}
	if r.StartBranch != "" {
		opt.StartBranch = gl.Ptr(r.StartBranch)
	}
	if r.StartSHA != "" {
		opt.StartSHA = gl.Ptr(r.StartSHA)
	}
	if r.Force {
		opt.Force = gl.Ptr(true)
	}
	for _, a := range r.Actions {
		act := &gl.CommitActionOptions{Action: gl.Ptr(gl.FileActionValue(a.Action)), FilePath: gl.Ptr(a.Path)}
		if a.Action != ActionDelete {
			act.Content = gl.Ptr(a.Content)
		}
		opt.Actions = append(opt.Actions, act)
	}
	var out Commit
	err := c.call(ctx, "CreateCommit", Committer, func(ctx context.Context, cl *gl.Client) (*gl.Response, error) {
		cm, resp, err := cl.Commits.CreateCommit(project, opt, gl.WithContext(ctx))
		if err == nil && cm != nil {
			out = toCommit(cm)
		}
		return resp, err
	})
	return out, err
}

// GetCommit implements GitLab.
func (c *Client) GetCommit(ctx context.Context, project, sha string) (Commit, error) {
	var out Commit
	err := c.call(ctx, "GetCommit", Committer, func(ctx context.Context, cl *gl.Client) (*gl.Response, error) {
		cm, resp, err := cl.Commits.GetCommit(project, sha, nil, gl.WithContext(ctx))
		if err == nil && cm != nil {
			out = toCommit(cm)
		}
		return resp, err
	})
	return out, err
}

func toCommit(cm *gl.Commit) Commit {
	return Commit{ID: cm.ID, Title: cm.Title, Message: cm.Message, ParentIDs: cm.ParentIDs,
		AuthorName: cm.AuthorName, AuthorEmail: cm.AuthorEmail}
}

// CurrentUser implements GitLab; an answer is cached per token.
func (c *Client) CurrentUser(ctx context.Context, bot Bot) (User, error) {
	s := c.out.Settings()
	key := clientKey{s.apiBase(), s.Tokens.token(bot)}
	c.mu.Lock()
	cached, ok := c.users[key]
	c.mu.Unlock()
	if ok {
		return cached, nil
	}
	var out User
	err := c.call(ctx, "CurrentUser", bot, func(ctx context.Context, cl *gl.Client) (*gl.Response, error) {
		u, resp, err := cl.Users.CurrentUser(gl.WithContext(ctx))
		if err == nil && u != nil {
			out = User{ID: u.ID, Username: u.Username, Email: u.Email}
		}
		return resp, err
	})
	if err == nil && out.Username != "" {
		c.mu.Lock()
		c.users[key] = out
		c.mu.Unlock()
	}
	return out, err
}

// MergeBase implements GitLab.
func (c *Client) MergeBase(ctx context.Context, project, a, b string) (Commit, error) {
	var out Commit
	err := c.call(ctx, "MergeBase", Committer, func(ctx context.Context, cl *gl.Client) (*gl.Response, error) {
		cm, resp, err := cl.Repositories.MergeBase(project, &gl.MergeBaseOptions{Ref: &[]string{a, b}}, gl.WithContext(ctx))
		if err == nil && cm != nil {
			out = toCommit(cm)
		}
		return resp, err
	})
	return out, err
}

// Compare implements GitLab. straight=true: from..to exactly, so the
// caller chooses the base (the merge base it read) instead of GitLab
// computing another one in between.
func (c *Client) Compare(ctx context.Context, project, from, to string) (Comparison, error) {
	var out Comparison
	err := c.call(ctx, "Compare", Committer, func(ctx context.Context, cl *gl.Client) (*gl.Response, error) {
		cmp, resp, err := cl.Repositories.Compare(project, &gl.CompareOptions{From: gl.Ptr(from), To: gl.Ptr(to), Straight: gl.Ptr(true)}, gl.WithContext(ctx))
		if err != nil || cmp == nil {
			return resp, err
		}
		out = Comparison{Timeout: cmp.CompareTimeout}
		for _, cm := range cmp.Commits {
			if cm != nil {
				out.Commits = append(out.Commits, toCommit(cm))
			}
		}
		for _, d := range cmp.Diffs {
			if d == nil {
				continue
			}
			out.Paths = append(out.Paths, d.NewPath)
			if d.OldPath != d.NewPath && d.OldPath != "" {
				out.Paths = append(out.Paths, d.OldPath)
			}
		}
		return resp, nil
	})
	return out, err
}

// GetFile implements GitLab.
func (c *Client) GetFile(ctx context.Context, project, path, ref string) (File, error) {
	var out File
	err := c.call(ctx, "GetFile", Committer, func(ctx context.Context, cl *gl.Client) (*gl.Response, error) {
		f, resp, err := cl.RepositoryFiles.GetFile(project, path, &gl.GetFileOptions{Ref: gl.Ptr(ref)}, gl.WithContext(ctx))
		if err != nil {
			return resp, err
		}
		content := []byte(f.Content)
		if f.Encoding == "base64" {
			if content, err = base64.StdEncoding.DecodeString(f.Content); err != nil {
				// An answer arrived: the outcome is known, the body unusable.
				return resp, &gl.ErrorResponse{Response: resp.Response, Message: "decode file content: " + err.Error()}
			}
		}
		out = File{Path: f.FilePath, Content: content, BlobID: f.BlobID, CommitID: f.CommitID, LastCommitID: f.LastCommitID}
		return resp, nil
	})
	return out, err
}

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
	return c.mrCall(ctx, "CreateMR", func(ctx context.Context, cl *gl.Client) (*gl.MergeRequest, *gl.Response, error) {
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
	var out MR
	err := c.call(ctx, op, Committer, func(ctx context.Context, cl *gl.Client) (*gl.Response, error) {
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
	return c.call(ctx, "Rebase", Committer, func(ctx context.Context, cl *gl.Client) (*gl.Response, error) {
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
				pl := Pipeline{ID: p.ID, Status: p.Status, SHA: p.SHA, Ref: p.Ref}
				if p.CreatedAt != nil {
					pl.CreatedAt = *p.CreatedAt
				}
				out = append(out, pl)
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
	err := c.call(ctx, "RetryPipeline", Committer, func(ctx context.Context, cl *gl.Client) (*gl.Response, error) {
		p, r, err := cl.Pipelines.RetryPipelineBuild(project, pipelineID, gl.WithContext(ctx))
		if p != nil {
			out = Pipeline{ID: p.ID, Status: p.Status, SHA: p.SHA, Ref: p.Ref}
			if p.CreatedAt != nil {
				out.CreatedAt = *p.CreatedAt
			}
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

func toBranch(b *gl.Branch) Branch {
	if b == nil {
		return Branch{}
	}
	out := Branch{Name: b.Name}
	if b.Commit != nil {
		out.CommitID = b.Commit.ID
	}
	return out
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
		out.HeadPipeline = &Pipeline{ID: p.ID, Status: p.Status, SHA: p.SHA, Ref: p.Ref}
		if p.CreatedAt != nil {
			out.HeadPipeline.CreatedAt = *p.CreatedAt
		}
	}
	return out
}
