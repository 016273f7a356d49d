package gitlab

import (
	"context"
	"fmt"
	"time"
)

// This file renders GitLab's API entities. Field names follow
// lib/api/entities/*.rb; fields the simulator has no notion of are left out.

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func durationSeconds(pl *pipeline) any {
	if pl.StartedAt.IsZero() || pl.FinishedAt.IsZero() {
		return nil
	}
	return int64(pl.FinishedAt.Sub(pl.StartedAt).Seconds())
}

func (s *Server) projectURL(p *project) string { return s.baseURL + "/" + p.Path }

func (s *Server) mrURL(p *project, m *mergeRequest) string {
	return fmt.Sprintf("%s/-/merge_requests/%d", s.projectURL(p), m.IID)
}

func (s *Server) pipelineURL(p *project, pl *pipeline) string {
	return fmt.Sprintf("%s/-/pipelines/%d", s.projectURL(p), pl.ID)
}

func (s *Server) userJSON(u *user) any {
	if u == nil {
		return nil
	}
	return map[string]any{
		"id": u.ID, "username": u.Username, "name": u.Name, "state": "active",
		"locked": false, "avatar_url": nil, "web_url": s.baseURL + "/" + u.Username,
	}
}

func (s *Server) projectJSON(p *project) any {
	return map[string]any{
		"id": p.ID, "name": p.Name, "path": p.Name, "path_with_namespace": p.Path,
		"name_with_namespace": p.Path, "default_branch": p.DefaultBranch,
		"web_url": s.projectURL(p), "merge_method": "merge",
		"only_allow_merge_if_pipeline_succeeds": true,
		"approvals_before_merge":                s.settings().ApprovalsRequired,
	}
}

func (s *Server) commitJSON(p *project, c commitMeta) map[string]any {
	title := c.Message
	for i, r := range title {
		if r == '\n' {
			title = title[:i]
			break
		}
	}
	parents := c.Parents
	if parents == nil {
		parents = []string{}
	}
	return map[string]any{
		"id": c.ID, "short_id": c.ID[:8], "title": title, "message": c.Message,
		"author_name": c.Author.Name, "author_email": c.Author.Email, "authored_date": c.Author.When,
		"committer_name": c.Committer.Name, "committer_email": c.Committer.Email,
		"committed_date": c.Committer.When, "created_at": c.Committer.When,
		"parent_ids": parents, "project_id": p.ID,
		"web_url": fmt.Sprintf("%s/-/commit/%s", s.projectURL(p), c.ID),
	}
}

func (s *Server) branchJSON(ctx context.Context, p *project, name, sha string, u *user) (map[string]any, error) {
	c, err := p.repo.commitInfo(ctx, sha)
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"name": name, "commit": s.commitJSON(p, c), "merged": false, "protected": name == p.DefaultBranch,
		"default": name == p.DefaultBranch, "developers_can_push": name != p.DefaultBranch,
		"developers_can_merge": true, "can_push": u.canPush(),
		"web_url": fmt.Sprintf("%s/-/tree/%s", s.projectURL(p), name),
	}, nil
}

func (s *Server) pipelineInfoJSON(p *project, pl *pipeline) map[string]any {
	return map[string]any{
		"id": pl.ID, "iid": pl.IID, "project_id": pl.ProjectID, "sha": pl.SHA, "ref": pl.Ref,
		"status": pl.Status, "source": "merge_request_event", "created_at": pl.CreatedAt,
		"updated_at": pl.UpdatedAt, "web_url": s.pipelineURL(p, pl),
	}
}

func (s *Server) pipelineJSON(p *project, pl *pipeline) map[string]any {
	m := s.pipelineInfoJSON(p, pl)
	m["before_sha"] = pl.BeforeSHA
	m["tag"] = false
	m["yaml_errors"] = nil
	m["user"] = s.userJSON(pl.User)
	m["started_at"] = timePtr(pl.StartedAt)
	m["finished_at"] = timePtr(pl.FinishedAt)
	m["committed_at"] = nil
	m["duration"] = durationSeconds(pl)
	m["queued_duration"] = nil
	m["coverage"] = nil
	m["detailed_status"] = map[string]any{
		"icon": "status_" + pl.Status, "text": pl.Status, "label": pl.Status,
		"group": pl.Status, "tooltip": pl.Status, "has_details": true,
	}
	return m
}

// basicMRJSON renders GitLab's list entity (MergeRequestBasic).
func (s *Server) basicMRJSON(ctx context.Context, p *project, m *mergeRequest) map[string]any {
	ms := s.mergeStatus(ctx, p, m)
	ref := fmt.Sprintf("!%d", m.IID)
	out := map[string]any{
		"id": m.ID, "iid": m.IID, "project_id": p.ID, "title": m.Title, "description": m.Description,
		"state": m.State, "created_at": m.CreatedAt, "updated_at": m.UpdatedAt,
		"merged_by": s.userJSON(m.MergedBy), "merge_user": s.userJSON(m.MergedBy), "merged_at": timePtr(m.MergedAt),
		"closed_by": s.userJSON(m.ClosedBy), "closed_at": timePtr(m.ClosedAt),
		"target_branch": m.TargetBranch, "source_branch": m.SourceBranch,
		"user_notes_count": 0, "upvotes": 0, "downvotes": 0,
		"author": s.userJSON(m.Author), "assignees": []any{}, "assignee": nil, "reviewers": []any{},
		"source_project_id": p.ID, "target_project_id": p.ID, "labels": []string{},
		"draft": m.draft(), "work_in_progress": m.draft(), "milestone": nil,
		"merge_when_pipeline_succeeds":  false,
		"merge_status":                  ms,
		"detailed_merge_status":         s.detailedStatus(ctx, p, m),
		"sha":                           m.SHA,
		"merge_commit_sha":              nullable(m.MergeCommitSHA),
		"squash_commit_sha":             nil,
		"discussion_locked":             nil,
		"should_remove_source_branch":   m.RemoveSourceBranch,
		"force_remove_source_branch":    m.RemoveSourceBranch,
		"prepared_at":                   m.CreatedAt,
		"reference":                     ref,
		"references":                    map[string]any{"short": ref, "relative": ref, "full": p.Path + ref},
		"web_url":                       s.mrURL(p, m),
		"squash":                        false,
		"squash_on_merge":               false,
		"has_conflicts":                 ms == "cannot_be_merged",
		"blocking_discussions_resolved": true,
	}
	return out
}

// mrJSON renders the single-MR entity: the list entity plus pipelines,
// diff refs, merge_error and the viewer's can_merge. rebaseField adds
// rebase_in_progress, which GitLab exposes only with
// include_rebase_in_progress=true.
func (s *Server) mrJSON(ctx context.Context, p *project, m *mergeRequest, viewer *user, rebaseField bool) map[string]any {
	out := s.basicMRJSON(ctx, p, m)
	var head, pipe any
	if hp := p.headPipeline(m); hp != nil {
		head = s.pipelineJSON(p, hp)
		pipe = s.pipelineInfoJSON(p, hp)
	}
	base := ""
	if target, err := p.repo.branchHead(ctx, m.TargetBranch); err == nil && target != "" && m.SHA != "" {
		base, _ = p.repo.mergeBase(ctx, target, m.SHA)
	}
	out["pipeline"] = pipe
	out["head_pipeline"] = head
	out["diff_refs"] = map[string]any{"base_sha": nullable(base), "head_sha": nullable(m.SHA), "start_sha": nullable(base)}
	out["merge_error"] = nullable(m.MergeError)
	out["user"] = map[string]any{"can_merge": viewer != nil && viewer.canMerge()}
	out["subscribed"] = false
	out["changes_count"] = nil
	out["latest_build_started_at"] = nil
	out["latest_build_finished_at"] = nil
	out["first_deployed_to_production_at"] = nil
	out["first_contribution"] = false
	if rebaseField {
		out["rebase_in_progress"] = m.RebaseInProgress
	}
	return out
}

// approvalsJSON renders the approvals entity as seen by viewer.
func (s *Server) approvalsJSON(ctx context.Context, p *project, m *mergeRequest, viewer *user) map[string]any {
	required := s.settings().ApprovalsRequired
	by := make([]any, 0, len(m.Approvals))
	for _, a := range m.Approvals {
		by = append(by, map[string]any{"user": s.userJSON(a.User), "approved_at": a.At})
	}
	left := max(required-len(m.Approvals), 0)
	canApprove := viewer != nil && s.approveRefusal(ctx, p, m, viewer) == 0
	return map[string]any{
		"id": m.ID, "iid": m.IID, "project_id": p.ID, "title": m.Title, "description": m.Description,
		"state": m.State, "created_at": m.CreatedAt, "updated_at": m.UpdatedAt,
		"merge_status": s.mergeStatus(ctx, p, m), "approved": left == 0,
		"approvals_required": required, "approvals_left": left,
		"require_password_to_approve": false, "approved_by": by,
		"suggested_approvers": []any{}, "approvers": []any{}, "approver_groups": []any{},
		"user_has_approved":   viewer != nil && m.approvedBy(viewer),
		"user_can_approve":    canApprove,
		"approval_rules_left": []any{}, "has_approval_rules": true,
		"merge_request_approvers_available": true, "multiple_approval_rules_available": true,
	}
}
