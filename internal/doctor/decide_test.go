package doctor

import (
	"strings"
	"testing"

	"changeflow/internal/gitlab"
)

// TestProtectionAudit is the table of what one protection rule admits,
// without GitLab: who may push or merge besides the committer, and
// whether the committer may push at all.
func TestProtectionAudit(t *testing.T) {
	committer := gitlab.User{ID: 2, Username: "changeflow-committer"}
	tests := []struct {
		name           string
		rule           gitlab.ProtectedBranch
		known          bool
		committerLevel int
		wantPushes     bool
		wantForce      bool
		wantFails      []string // substrings, in order
		wantWarns      []string
	}{
		{name: "the committer alone, force push on",
			rule:  gitlab.ProtectedBranch{Name: "changeflow/*", Push: []gitlab.BranchAccess{{UserID: 2}}, AllowForcePush: true},
			known: true, wantPushes: true, wantForce: true},
		{name: "the committer's id while its account is unknown is another user",
			rule:      gitlab.ProtectedBranch{Name: "changeflow/*", Push: []gitlab.BranchAccess{{UserID: 2, Description: "c"}}},
			wantFails: []string{"user c (id 2) may push (changeflow/*)"}},
		{name: "every Developer may push",
			rule:  gitlab.ProtectedBranch{Name: "changeflow/*", Push: []gitlab.BranchAccess{{AccessLevel: gitlab.AccessDeveloper}}},
			known: true, committerLevel: gitlab.AccessDeveloper, wantPushes: true,
			wantFails: []string{"every Developer may push (changeflow/*)"}},
		{name: "Maintainers may push: a warning, and a Developer committer cannot",
			rule:  gitlab.ProtectedBranch{Name: "changeflow/*", Push: []gitlab.BranchAccess{{AccessLevel: gitlab.AccessMaintainer}}},
			known: true, committerLevel: gitlab.AccessDeveloper,
			wantWarns: []string{"every Maintainer may push (changeflow/*): they can also change this rule"}},
		{name: "a Maintainer committer pushes by its role",
			rule:  gitlab.ProtectedBranch{Name: "changeflow/*", Push: []gitlab.BranchAccess{{AccessLevel: gitlab.AccessMaintainer}}},
			known: true, committerLevel: gitlab.AccessMaintainer, wantPushes: true,
			wantWarns: []string{"every Maintainer may push"}},
		{name: "no one may push: the committer neither",
			rule:  gitlab.ProtectedBranch{Name: "changeflow/*", Push: []gitlab.BranchAccess{{AccessLevel: gitlab.AccessNoOne}}},
			known: true, committerLevel: gitlab.AccessMaintainer},
		{name: "a group and a deploy key may merge",
			rule:      gitlab.ProtectedBranch{Name: "changeflow/*", Merge: []gitlab.BranchAccess{{GroupID: 7, Description: "devs"}, {DeployKeyID: 9}}},
			known:     true,
			wantFails: []string{"every member of group devs (id 7) may merge into changeflow's branches (changeflow/*)", "deploy key 9 may merge"}},
		{name: "Maintainers may merge: a warning",
			rule:      gitlab.ProtectedBranch{Name: "changeflow/*", Merge: []gitlab.BranchAccess{{AccessLevel: gitlab.AccessMaintainer}}},
			known:     true,
			wantWarns: []string{"every Maintainer may merge into changeflow's branches (changeflow/*)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := protectionAudit{committer: committer, known: tt.known, committerLevel: tt.committerLevel}
			a.rule(tt.rule)
			if a.committerPushes != tt.wantPushes || a.force != tt.wantForce {
				t.Fatalf("committer pushes %v, force %v; want %v, %v", a.committerPushes, a.force, tt.wantPushes, tt.wantForce)
			}
			requireLines(t, "fails", a.fails, tt.wantFails)
			requireLines(t, "warns", a.warns, tt.wantWarns)
		})
	}
}

// TestHookProblems is the table of what is wrong with changeflow's
// webhook as GitLab lists it.
func TestHookProblems(t *testing.T) {
	const want = "https://changeflow.example.com/callbacks/gitlab"
	good := gitlab.Hook{URL: want, MergeRequestsEvents: true, PipelineEvents: true, EnableSSLVerification: true, AlertStatus: "executable"}
	tests := []struct {
		name      string
		edit      func(h *gitlab.Hook)
		want      string
		wantFails []string
		wantWarns []string
	}{
		{name: "as the guide says", edit: func(*gitlab.Hook) {}, want: want},
		{name: "no events", edit: func(h *gitlab.Hook) { h.MergeRequestsEvents, h.PipelineEvents = false, false }, want: want,
			wantFails: []string{"merge request events are off", "pipeline events are off"}},
		{name: "disabled after failures", edit: func(h *gitlab.Hook) { h.AlertStatus = "temporarily_disabled" }, want: want,
			wantFails: []string{"GitLab has temporarily disabled the hook"}},
		{name: "an older GitLab without alert status", edit: func(h *gitlab.Hook) { h.AlertStatus = "" }, want: want},
		{name: "SSL verification off over https", edit: func(h *gitlab.Hook) { h.EnableSSLVerification = false }, want: want,
			wantWarns: []string{"SSL verification is off"}},
		{name: "SSL verification off over http is no warning",
			edit: func(h *gitlab.Hook) {
				h.URL, h.EnableSSLVerification = "http://changeflow.internal/callbacks/gitlab", false
			}, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := good
			tt.edit(&h)
			fails, warns := hookProblems(h, tt.want)
			if tt.want == "" {
				tt.wantWarns = append(tt.wantWarns, "server.publicURL is unset")
			}
			requireLines(t, "fails", fails, tt.wantFails)
			requireLines(t, "warns", warns, tt.wantWarns)
		})
	}
}

// requireLines fails unless got has one line per want, each containing
// its want.
func requireLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = strings.Contains(got[i], want[i])
	}
	if !ok {
		t.Fatalf("%s = %q, want lines containing %q", what, got, want)
	}
}
