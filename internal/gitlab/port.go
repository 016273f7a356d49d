// Package gitlab is changeflow's port to GitLab and its adapter over the
// official client library (gitlab.com/gitlab-org/api/client-go), plus the
// approval pieces the workflow builds on: the Approver component with its
// client-library and direct-HTTP (check items) implementations and
// the bot approval loop.
//
// Nothing from the client library leaks out: the port speaks this
// package's types, and every failure is a *Error carrying the real HTTP
// status (0 when there was no answer).
package gitlab

import (
	"context"
	"time"
)

// Bot names a GitLab account the service acts as. The names are the keys
// of gitlab.tokens.<name> in configuration.
type Bot string

// The bot accounts. Committer pushes and opens, merges, rebases and closes
// MRs; the two approvers give the two approvals an MR needs (docs/workflow.md).
const (
	Committer Bot = "committer"
	Approver1 Bot = "approver1"
	Approver2 Bot = "approver2"
)

// Bots are the bots' tokens, one GitLab client each.
type Bots struct {
	Committer string
	Approver1 string
	Approver2 string
	// Doctor is the optional read-only token of the deployment checks
	// (deployment.go).
	Doctor string
}

// token returns bot's token ("" when unknown or not configured).
func (b Bots) token(bot Bot) string {
	switch bot {
	case Committer:
		return b.Committer
	case Approver1:
		return b.Approver1
	case Approver2:
		return b.Approver2
	case Doctor:
		return b.Doctor
	}
	return ""
}

// GitLab is what the workflow needs from GitLab. Every method does one
// HTTP call with a deadline through the GitLab circuit breaker, never
// retries on its own (a write that failed may still have happened — see
// OutcomeUnknown — so the caller reads before it writes again), and
// reports every failure as a *Error. The one exception is a 429: GitLab
// refused the call before doing anything, so the client sends it again
// after Retry-After while that fits in the call's context (pacing.go),
// and every call waits for its turn under gitlab.rateLimit.*.
//
// project is GitLab's :id — a numeric id or a full path ("config/bindings").
// Every method acts as Committer except GetApprovals and Approve, which act
// as the bot given (user_has_approved is answered for the caller's token).
type GitLab interface {
	// GetBranch reads a branch; a missing one is a 404 *Error.
	GetBranch(ctx context.Context, project, branch string) (Branch, error)
	// CreateBranch creates branch at ref; an existing branch is a 400.
	CreateBranch(ctx context.Context, project, branch, ref string) (Branch, error)
	// CreateCommit commits the actions on c.Branch (created from
	// c.StartBranch or c.StartSHA when the branch does not exist; with
	// c.Force an existing branch is overwritten by one commit on the start
	// point).
	CreateCommit(ctx context.Context, project string, c CommitRequest) (Commit, error)
	// GetCommit reads a commit by its sha (a branch name with a slash is
	// not a usable path segment: read the branch's head with GetBranch);
	// missing → 404.
	GetCommit(ctx context.Context, project, sha string) (Commit, error)
	// GetFile reads a file at ref (a branch, tag or sha); missing → 404.
	GetFile(ctx context.Context, project, path, ref string) (File, error)
	// FindMRBySourceBranch returns the newest MR whose source branch is
	// source, in state (StateOpened, or StateAll for any); ok is false when
	// there is none. The MR has the list's fields: HeadPipeline,
	// MergeError and RebaseInProgress are not filled (use GetMR).
	FindMRBySourceBranch(ctx context.Context, project, source string, state MRStateFilter) (mr MR, ok bool, err error)
	// ListOpenMRs lists the project's open MRs into targetBranch ("" for
	// any), oldest first, with the list's fields (as FindMRBySourceBranch),
	// following GitLab's pagination up to a bound; truncated reports that
	// the bound cut the list.
	ListOpenMRs(ctx context.Context, project, targetBranch string) (mrs []MR, truncated bool, err error)
	// CreateMR opens an MR; another open MR for source is a 409.
	CreateMR(ctx context.Context, project string, r CreateMRRequest) (MR, error)
	// GetMR reads an MR with rebase_in_progress.
	GetMR(ctx context.Context, project string, iid int64) (MR, error)
	// CloseMR closes an MR and returns what GitLab answered (which may be
	// "merged" when a merge won the race: read State).
	CloseMR(ctx context.Context, project string, iid int64) (MR, error)
	// ListMRPipelines lists the MR's pipelines, newest first, following
	// GitLab's pagination (bounded: see maxPipelinePages).
	ListMRPipelines(ctx context.Context, project string, iid int64) ([]Pipeline, error)
	// RetryPipeline re-runs a pipeline's failed and canceled jobs (POST
	// /projects/:id/pipelines/:pipeline_id/retry): the same pipeline runs
	// again and returns to pending or running. A pipeline with nothing to
	// retry is refused by GitLab (a 4xx *Error).
	RetryPipeline(ctx context.Context, project string, pipelineID int64) (Pipeline, error)
	// CreateMRPipeline creates a new pipeline for the MR's head (POST
	// …/merge_requests/:iid/pipelines): for a head GitLab created none
	// for, because the push was over GitLab's pipeline rate.
	CreateMRPipeline(ctx context.Context, project string, iid int64) (Pipeline, error)
	// GetApprovals reads the MR's approvals as bot.
	GetApprovals(ctx context.Context, bot Bot, project string, iid int64) (Approvals, error)
	// Approve approves as bot through the client library (no check
	// items: the library cannot express them — see CheckItemsAPI). sha
	// pins the head ("" = unpinned).
	Approve(ctx context.Context, bot Bot, project string, iid int64, sha string) error
	// Merge merges the MR at sha ("" = unpinned) and returns the MR.
	Merge(ctx context.Context, project string, iid int64, sha string) (MR, error)
	// Rebase asks for an asynchronous rebase (202); poll GetMR's
	// RebaseInProgress and MergeError for the result.
	Rebase(ctx context.Context, project string, iid int64) error
	// CurrentUser reads the account bot's token belongs to (GET /user):
	// who the workflow's commits and MRs are by.
	CurrentUser(ctx context.Context, bot Bot) (User, error)
	// MergeBase reads the best common ancestor of two refs (branch names
	// or shas; GET …/repository/merge_base?refs[]=a&refs[]=b).
	MergeBase(ctx context.Context, project, a, b string) (Commit, error)
	// Compare reads what to has that from has not (GET
	// …/repository/compare, straight): the commits from..to, oldest
	// first, with their authors, and the paths the diff touches.
	Compare(ctx context.Context, project, from, to string) (Comparison, error)
}

// User is a GitLab account as GET /user answers for its own token.
type User struct {
	ID       int64
	Username string
	// Email is the account's primary email: the author email of the
	// commits GitLab makes for it through the commits API.
	Email string
}

// Comparison is what Compare answers.
type Comparison struct {
	Commits []Commit
	// Paths are every path the diff touches (old and new path of a
	// rename both), in GitLab's order.
	Paths []string
	// Timeout: GitLab cut the comparison short (compare_timeout); the
	// lists are incomplete and prove nothing.
	Timeout bool
}

// CheckItemsAPI is the part of GitLab the client library cannot express:
// the company's approve-with-check-items extension (docs/adapters.md), spoken in
// plain HTTP with the same tokens, deadline and breaker as GitLab.
type CheckItemsAPI interface {
	// CheckItems reads the project's required check items
	// (GET /projects/:id/approval_check_items) as bot.
	CheckItems(ctx context.Context, bot Bot, project string) ([]CheckItem, error)
	// ApproveWithCheckItems POSTs …/approve {sha, check_items} as bot. A
	// 422 *Error carries the current list in CurrentCheckItems when the
	// body had one.
	ApproveWithCheckItems(ctx context.Context, bot Bot, project string, iid int64, sha string, items []CheckItem) error
}

// MRStateFilter is the state filter of FindMRBySourceBranch.
type MRStateFilter string

// State filters.
const (
	StateOpened MRStateFilter = "opened"
	StateAll    MRStateFilter = "all"
)

// MR states as GitLab names them.
const (
	MRStateOpened = "opened"
	MRStateClosed = "closed"
	MRStateMerged = "merged"
	MRStateLocked = "locked"
)

// Branch is a branch and its head commit.
type Branch struct {
	Name     string
	CommitID string
}

// FileActionKind is a commit action.
type FileActionKind string

// The commit actions the workflow uses.
const (
	ActionCreate FileActionKind = "create"
	ActionUpdate FileActionKind = "update"
	ActionDelete FileActionKind = "delete"
)

// FileAction is one file change of a commit. Content is text.
type FileAction struct {
	Action  FileActionKind
	Path    string
	Content string
}

// CommitRequest is a multi-file commit (POST …/repository/commits).
type CommitRequest struct {
	Branch string
	// StartBranch creates Branch from it when Branch does not exist yet
	// ("" = Branch must exist). Mutually exclusive with StartSHA.
	StartBranch string
	// StartSHA is a commit to start from instead of a branch: the parent
	// is exactly what the caller read, even if the branch moved since.
	StartSHA string
	// Force overwrites an existing Branch with one new commit on the start
	// point (GitLab's force push through the API); without it, starting an
	// existing branch anywhere else is a 400.
	Force   bool
	Message string
	Actions []FileAction
}

// Commit is a commit as the workflow reads it.
type Commit struct {
	ID        string
	Title     string
	Message   string
	ParentIDs []string
	// AuthorName and AuthorEmail are the commit's author as Git records
	// it (filled by GetCommit and Compare).
	AuthorName  string
	AuthorEmail string
	// CommittedDate is the committer's time, at GitLab's second
	// precision (zero when the answer had none).
	CommittedDate time.Time
}

// File is a file's text and the last commit that changed it.
type File struct {
	Path         string
	Content      []byte
	BlobID       string
	CommitID     string
	LastCommitID string
}

// CreateMRRequest opens an MR.
type CreateMRRequest struct {
	SourceBranch string
	TargetBranch string
	Title        string
	Description  string
}

// MR is a merge request as the workflow reads it.
type MR struct {
	IID                 int64
	ProjectID           int64
	Title               string
	Description         string
	SourceBranch        string
	TargetBranch        string
	State               string
	DetailedMergeStatus string
	HasConflicts        bool
	RebaseInProgress    bool
	MergeError          string
	SHA                 string
	MergeCommitSHA      string
	WebURL              string
	HeadPipeline        *Pipeline
	// AuthorUsername is the account that opened the MR.
	AuthorUsername string
}

// Pipeline is a pipeline's id, status and commit.
type Pipeline struct {
	ID        int64
	Status    string
	SHA       string
	Ref       string
	CreatedAt time.Time
}

// Approvals is an MR's approval state as one bot sees it.
type Approvals struct {
	Approved bool
	// ApprovedBy are the usernames that approved.
	ApprovedBy []string
	// UserHasApproved and UserCanApprove are for the token that read.
	UserHasApproved bool
	UserCanApprove  bool
	ApprovalsLeft   int64
}

// CheckItem is one required check item of a project.
type CheckItem struct {
	Key     string `json:"key"`
	Version int    `json:"version"`
	Title   string `json:"title,omitempty"`
}
