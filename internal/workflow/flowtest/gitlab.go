package flowtest

import (
	"context"
	"fmt"
	"net/http"

	"changeflow/internal/gitlab"
)

// GitLab answers the GitLab calls the flows' steps under test make — find
// an MR by its branch, read it, close it; list an MR's pipelines, re-run
// one, create one — from what the test scripted, and records each in
// Calls. Any other call panics on the nil embedded port, so a step that reaches further
// than its test meant fails loudly. (The batch package's benchmark fake
// simulates MRs for whole rounds instead; it scripts nothing.)
type GitLab struct {
	gitlab.GitLab
	Calls []string

	// BySource answers FindMRBySourceBranch by branch, with FindErr.
	BySource map[string]gitlab.MR
	FindErr  error
	// MR and GetErr answer GetMR.
	MR     gitlab.MR
	GetErr error
	// Closed and CloseErr answer CloseMR.
	Closed   gitlab.MR
	CloseErr error
	// Pipelines and ListErr answer ListMRPipelines.
	Pipelines []gitlab.Pipeline
	ListErr   error
	// Retried and RetryErr answer RetryPipeline.
	Retried  gitlab.Pipeline
	RetryErr error
	// Created and CreateErr answer CreateMRPipeline.
	Created   gitlab.Pipeline
	CreateErr error
}

func (g *GitLab) call(format string, args ...any) {
	g.Calls = append(g.Calls, fmt.Sprintf(format, args...))
}

// FindMRBySourceBranch answers BySource[source] and FindErr.
func (g *GitLab) FindMRBySourceBranch(_ context.Context, project, source string, _ gitlab.MRStateFilter) (gitlab.MR, bool, error) {
	g.call("FindMRBySourceBranch %s %s", project, source)
	mr, ok := g.BySource[source]
	return mr, ok, g.FindErr
}

// GetMR answers MR and GetErr.
func (g *GitLab) GetMR(_ context.Context, project string, iid int64) (gitlab.MR, error) {
	g.call("GetMR %s !%d", project, iid)
	return g.MR, g.GetErr
}

// CloseMR answers Closed and CloseErr.
func (g *GitLab) CloseMR(_ context.Context, project string, iid int64) (gitlab.MR, error) {
	g.call("CloseMR %s !%d", project, iid)
	return g.Closed, g.CloseErr
}

// ListMRPipelines answers Pipelines and ListErr.
func (g *GitLab) ListMRPipelines(_ context.Context, project string, iid int64) ([]gitlab.Pipeline, error) {
	g.call("ListMRPipelines %s !%d", project, iid)
	return g.Pipelines, g.ListErr
}

// RetryPipeline answers Retried and RetryErr.
func (g *GitLab) RetryPipeline(_ context.Context, project string, id int64) (gitlab.Pipeline, error) {
	g.call("RetryPipeline %s %d", project, id)
	return g.Retried, g.RetryErr
}

// CreateMRPipeline answers Created and CreateErr.
func (g *GitLab) CreateMRPipeline(_ context.Context, project string, iid int64) (gitlab.Pipeline, error) {
	g.call("CreateMRPipeline %s !%d", project, iid)
	return g.Created, g.CreateErr
}

// GitLabError is GitLab's answer with status, as the client returns it.
func GitLabError(status int) error {
	return &gitlab.Error{Op: "test", Status: status, Message: http.StatusText(status)}
}
