package gitlab_test

import (
	"testing"

	"changeflow/internal/gitlab"
	simgl "changeflow/internal/sim/gitlab"
	"changeflow/internal/sim/simtoken"
)

// TestDeploymentReaderContract: the deployment checks' reads through the
// adapter against the simulator, with GitLab's shapes and error model.
func TestDeploymentReaderContract(t *testing.T) {
	e := newEnv(t, func(o *simgl.Options) {
		o.ProtectChangeflow = true
		o.HookURLs = []string{"https://changeflow.example.com/callbacks/gitlab"}
		o.WebhookToken = "hook-secret"
	})
	c := ctx(t)
	g := e.gl

	t.Run("current user per bot; an unknown token is 401", func(t *testing.T) {
		u, err := g.CurrentUser(c, gitlab.Committer)
		if err != nil || u.ID != 2 || u.Username != "changeflow-bot" {
			t.Fatalf("committer = %+v %v", u, err)
		}
		u, err = g.CurrentUser(c, gitlab.Approver2)
		if err != nil || u.Username != "approver-2" {
			t.Fatalf("approver2 = %+v %v", u, err)
		}
		e.set(func(s *gitlab.Settings) { s.Tokens.Approver1 = "glpat-revoked-0123456789ab" })
		_, err = g.CurrentUser(c, gitlab.Approver1)
		wantErr(t, err, "CurrentUser", 401)
		_, err = g.CurrentUser(c, gitlab.Doctor)
		if err == nil || gitlab.StatusOf(err) != 0 {
			t.Fatalf("no doctor token = %v, want a *Error without a status", err)
		}
	})
	t.Run("protected branches with their user entries", func(t *testing.T) {
		pbs, err := g.ProtectedBranches(c, gitlab.Committer, project)
		if err != nil || len(pbs) != 1 {
			t.Fatalf("ProtectedBranches = %+v %v", pbs, err)
		}
		pb := pbs[0]
		if pb.Name != "changeflow/*" || !pb.AllowForcePush || len(pb.Push) != 1 || pb.Push[0].UserID != 2 ||
			len(pb.Merge) != 1 || pb.Merge[0].UserID != 2 {
			t.Fatalf("rule = %+v", pb)
		}
		e.set(func(s *gitlab.Settings) { s.Tokens.Doctor = simtoken.Observer })
		_, err = g.ProtectedBranches(c, gitlab.Doctor, project)
		wantErr(t, err, "ProtectedBranches", 403)
	})
	t.Run("members: the access level; a stranger is 404", func(t *testing.T) {
		m, err := g.ProjectMember(c, gitlab.Committer, project, 2)
		if err != nil || m.AccessLevel != gitlab.AccessDeveloper || m.Username != "changeflow-bot" {
			t.Fatalf("member 2 = %+v %v", m, err)
		}
		_, err = g.ProjectMember(c, gitlab.Committer, project, 999)
		wantErr(t, err, "ProjectMember", 404)
	})
	t.Run("hooks: a maintainer reads them, the committer gets 403", func(t *testing.T) {
		_, err := g.ProjectHooks(c, gitlab.Committer, project)
		wantErr(t, err, "ProjectHooks", 403)
		e.set(func(s *gitlab.Settings) { s.Tokens.Doctor = simtoken.Maintainer })
		hs, err := g.ProjectHooks(c, gitlab.Doctor, project)
		if err != nil || len(hs) != 1 || hs[0].URL != "https://changeflow.example.com/callbacks/gitlab" ||
			!hs[0].MergeRequestsEvents || !hs[0].PipelineEvents || hs[0].AlertStatus != "executable" {
			t.Fatalf("ProjectHooks = %+v %v", hs, err)
		}
	})
}
