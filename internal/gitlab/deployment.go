package gitlab

import (
	"context"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"
)

// Doctor is the optional read-only account the deployment checks read
// with (gitlab.tokens.doctor): GitLab shows a project's webhooks, and on
// some versions its protected branches, only to Maintainers, and the
// committer should not be one. A Maintainer's token with scope read_api
// can read them and change nothing. Unset, the checks read as Committer.
const Doctor Bot = "doctor"

// DeploymentReader reads the project settings changeflow's safety rests
// on but cannot enforce itself (internal/doctor). Every method is one
// call, as bot, with the GitLab port's deadline, breaker and error model.
type DeploymentReader interface {
	// CurrentUser is the account bot's token belongs to (GET /user, the
	// GitLab port's, cached per token); a token GitLab does not accept is
	// a 401 *Error.
	CurrentUser(ctx context.Context, bot Bot) (User, error)
	// ProtectedBranches lists the project's protection rules as written
	// (wildcards such as "changeflow/*" included), at most 100.
	ProtectedBranches(ctx context.Context, bot Bot, project string) ([]ProtectedBranch, error)
	// ProjectMember reads userID's effective membership, inherited ones
	// included (GET /projects/:id/members/all/:user_id); none is a 404.
	ProjectMember(ctx context.Context, bot Bot, project string, userID int64) (Member, error)
	// ProjectHooks lists the project's webhooks, at most 100. GitLab never
	// returns a hook's secret token.
	ProjectHooks(ctx context.Context, bot Bot, project string) ([]Hook, error)
}

var _ DeploymentReader = (*Client)(nil)

// GitLab's access levels.
const (
	AccessNoOne      = 0
	AccessGuest      = 10
	AccessReporter   = 20
	AccessDeveloper  = 30
	AccessMaintainer = 40
	AccessOwner      = 50
	AccessAdmin      = 60
)

// BranchAccess is one entry of a protection rule's push or merge list:
// a role level (AccessNoOne = nobody), or one user, group or deploy key.
type BranchAccess struct {
	AccessLevel int
	UserID      int64
	GroupID     int64
	DeployKeyID int64
	Description string
}

// ProtectedBranch is one protection rule.
type ProtectedBranch struct {
	Name           string
	Push, Merge    []BranchAccess
	AllowForcePush bool
}

// Member is a project membership.
type Member struct {
	ID          int64
	Username    string
	AccessLevel int
}

// Hook is a project webhook (its token is never returned).
type Hook struct {
	ID                    int64
	URL                   string
	PushEvents            bool
	MergeRequestsEvents   bool
	PipelineEvents        bool
	EnableSSLVerification bool
	// AlertStatus is GitLab's "executable", "temporarily_disabled" or
	// "disabled" after failed deliveries ("" on versions without it).
	AlertStatus   string
	DisabledUntil *time.Time
}

// ProtectedBranches implements DeploymentReader.
func (c *Client) ProtectedBranches(ctx context.Context, bot Bot, project string) ([]ProtectedBranch, error) {
	var out []ProtectedBranch
	err := c.call(ctx, "ProtectedBranches", bot, func(ctx context.Context, cl *gl.Client) (*gl.Response, error) {
		opt := &gl.ListProtectedBranchesOptions{}
		opt.PerPage = 100
		pbs, resp, err := cl.ProtectedBranches.ListProtectedBranches(project, opt, gl.WithContext(ctx))
		for _, pb := range pbs {
			out = append(out, ProtectedBranch{Name: pb.Name, Push: toAccess(pb.PushAccessLevels),
				Merge: toAccess(pb.MergeAccessLevels), AllowForcePush: pb.AllowForcePush})
		}
		return resp, err
	})
	return out, err
}

func toAccess(ds []*gl.BranchAccessDescription) []BranchAccess {
	out := make([]BranchAccess, 0, len(ds))
	for _, d := range ds {
		out = append(out, BranchAccess{AccessLevel: int(d.AccessLevel), UserID: d.UserID, GroupID: d.GroupID,
			DeployKeyID: d.DeployKeyID, Description: d.AccessLevelDescription})
	}
	return out
}

// ProjectMember implements DeploymentReader.
func (c *Client) ProjectMember(ctx context.Context, bot Bot, project string, userID int64) (Member, error) {
	var out Member
	err := c.call(ctx, "ProjectMember", bot, func(ctx context.Context, cl *gl.Client) (*gl.Response, error) {
		m, resp, err := cl.ProjectMembers.GetInheritedProjectMember(project, userID, gl.WithContext(ctx))
		if err == nil {
			out = Member{ID: m.ID, Username: m.Username, AccessLevel: int(m.AccessLevel)}
		}
		return resp, err
	})
	return out, err
}

// ProjectHooks implements DeploymentReader.
func (c *Client) ProjectHooks(ctx context.Context, bot Bot, project string) ([]Hook, error) {
	var out []Hook
	err := c.call(ctx, "ProjectHooks", bot, func(ctx context.Context, cl *gl.Client) (*gl.Response, error) {
		opt := &gl.ListProjectHooksOptions{}
		opt.PerPage = 100
		hs, resp, err := cl.Projects.ListProjectHooks(project, opt, gl.WithContext(ctx))
		for _, h := range hs {
			out = append(out, Hook{ID: h.ID, URL: h.URL, PushEvents: h.PushEvents, MergeRequestsEvents: h.MergeRequestsEvents,
				PipelineEvents: h.PipelineEvents, EnableSSLVerification: h.EnableSSLVerification,
				AlertStatus: h.AlertStatus, DisabledUntil: h.DisabledUntil})
		}
		return resp, err
	})
	return out, err
}
