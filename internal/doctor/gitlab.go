package doctor

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"changeflow/internal/config"
	"changeflow/internal/gitlab"
)

// sampleBranches are names changeflow gives its branches (a single
// request's, a rebuilt one's, a batch's): a rule must cover them all.
func sampleBranches() []string {
	return []string{"changeflow/op-doctor", "changeflow/r2/op-doctor", "changeflow/batch-1"}
}

// Bots checked for their account and role.
func checkedBots() []gitlab.Bot {
	return []gitlab.Bot{gitlab.Committer, gitlab.Approver1, gitlab.Approver2}
}

// gitlabFindings are the checks against GitLab: the bots' accounts, and
// per project the protection of changeflow/*, the bots' roles and the
// webhook. Reads go as gitlab.tokens.doctor when it is set, else as the
// committer; a read GitLab refuses to that token is a warning saying
// what to look at by hand.
func gitlabFindings(ctx context.Context, o Options) []Finding {
	s := o.Snapshot
	if o.GitLab == nil {
		return []Finding{{ID: "gitlab", Status: StatusWarn, Title: "GitLab's settings",
			Detail: "not checked: no GitLab client", Fix: "run `changeflow doctor --config FILE` against the real GitLab"}}
	}
	if s.Endpoints().GitLab == "" {
		return []Finding{{ID: "gitlab", Subject: config.KeyGitLabBaseURL, Status: StatusFail, Title: "GitLab's settings",
			Detail: "gitlab.baseURL is not set: changeflow cannot reach GitLab", Fix: "set gitlab.baseURL to GitLab's root URL"}}
	}
	reader := gitlab.Committer
	if _, ok, _ := s.GitLabToken(string(gitlab.Doctor)); ok {
		reader = gitlab.Doctor
	}
	users, accounts := botAccounts(ctx, o.GitLab, s)
	out := []Finding{accounts}
	projects, _ := s.List(config.KeyGitLabProjects)
	if len(projects) == 0 {
		out = append(out, Finding{ID: "gitlab", Subject: config.KeyGitLabProjects, Status: StatusWarn, Title: "GitLab's settings",
			Detail: "gitlab.projects is empty: changeflow changes no repository", Fix: "list the config repositories in gitlab.projects"})
	}
	for _, p := range projects {
		roles, levels := roleFindings(ctx, o.GitLab, reader, p, users)
		out = append(out, protectionFinding(ctx, o.GitLab, reader, p, users, levels[gitlab.Committer]))
		out = append(out, roles...)
		out = append(out, webhookFinding(ctx, o.GitLab, reader, p, s))
	}
	return out
}

// botAccounts asks GitLab who each bot's token belongs to: every token
// accepted, and three different accounts (GitLab refuses an author's own
// approval and a second approval by one user).
func botAccounts(ctx context.Context, g gitlab.DeploymentReader, s *config.Snapshot) (map[gitlab.Bot]gitlab.User, Finding) {
	f := Finding{ID: "bot-accounts", Title: "Each bot's token is accepted by GitLab and belongs to an account of its own"}
	users := map[gitlab.Bot]gitlab.User{}
	var fails, warns, fixes []string
	for _, b := range checkedBots() {
		key := "gitlab.tokens." + string(b)
		if _, ok, _ := s.GitLabToken(string(b)); !ok {
			fails = append(fails, key+" is not set")
			fixes = append(fixes, "set "+key+" to the "+string(b)+" bot's access token (scope api)")
			continue
		}
		u, err := g.CurrentUser(ctx, b)
		switch {
		case err == nil:
			users[b] = u
		case gitlab.IsUnauthorized(err):
			fails = append(fails, "GitLab does not accept "+key+" (revoked, expired or mistyped)")
			fixes = append(fixes, "make a new access token for the "+string(b)+" bot and set "+key)
		default:
			warns = append(warns, "could not ask GitLab who "+key+" belongs to: "+err.Error())
		}
	}
	seen := map[int64]gitlab.Bot{}
	for _, b := range checkedBots() {
		u, ok := users[b]
		if !ok {
			continue
		}
		if other, dup := seen[u.ID]; dup {
			fails = append(fails, fmt.Sprintf("%s and %s are both %s", other, b, u.Username))
			fixes = append(fixes, "give "+string(b)+" a token of a GitLab user of its own: two approvals by one user are one approval, and GitLab refuses an author's approval")
		}
		seen[u.ID] = b
	}
	var names []string
	for _, b := range checkedBots() {
		if u, ok := users[b]; ok {
			names = append(names, fmt.Sprintf("%s is %s (id %d)", b, u.Username, u.ID))
		}
	}
	switch {
	case len(fails) > 0:
		f.Status, f.Detail, f.Fix = StatusFail, strings.Join(append(fails, warns...), "; "), strings.Join(fixes, "; ")
	case len(warns) > 0:
		f.Status, f.Detail, f.Fix = StatusWarn, strings.Join(warns, "; "), "check that gitlab.baseURL is reachable from here and run the check again"
	default:
		f.Status, f.Detail = StatusOK, strings.Join(names, ", ")
	}
	return users, f
}

// readRefused is the warning for a read GitLab refused to reader.
func readRefused(reader gitlab.Bot, what, byHand string) (Status, string, string) {
	return StatusWarn, "GitLab does not let gitlab.tokens." + string(reader) + " read " + what + " (403; GitLab shows it only to Maintainers)",
		"set gitlab.tokens.doctor to a Maintainer's access token with scope read_api (it can read, not change), or check by hand: " + byHand
}

// readFailed is the finding's fields for a read that failed otherwise.
func readFailed(project string, err error) (Status, string, string) {
	if gitlab.IsNotFound(err) {
		return StatusFail, "GitLab has no project " + project + " the token can see (404)",
			"check gitlab.projects, and that the bots are members of the project"
	}
	return StatusWarn, "could not ask GitLab: " + err.Error(), "check that gitlab.baseURL is reachable from here and run the check again"
}

// covers reports whether a rule pattern covers branch (GitLab's
// RefMatcher: "*" matches anything, "/" included).
func covers(pattern, branch string) bool {
	if !strings.Contains(pattern, "*") {
		return pattern == branch
	}
	parts := strings.Split(pattern, "*")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*?") + "$").MatchString(branch)
}

// protectionFinding: changeflow/* must be protected so that only the
// committer may push (and, for merges into those branches, nobody else
// may merge), with force push allowed, since changeflow overwrites and
// rebases its own branches.
//
// committerLevel is the committer's role on the project (0 when unknown):
// a rule that admits a role admits the committer when it holds that role.
func protectionFinding(ctx context.Context, g gitlab.DeploymentReader, reader gitlab.Bot, project string, users map[gitlab.Bot]gitlab.User, committerLevel int) Finding {
	f := Finding{ID: "protected-branch", Project: project, Subject: "changeflow/*",
		Title: "changeflow/* is a protected branch only the committer bot may push to"}
	committer, known := users[gitlab.Committer]
	name := "the committer bot"
	if known {
		name = fmt.Sprintf("%s (user id %d)", committer.Username, committer.ID)
	}
	fix := "in GitLab, project " + project + " → Settings → Repository → Protected branches: branch `changeflow/*`, " +
		"Allowed to merge: No one, Allowed to push and merge: " + name + " only, Allowed to force push: on " +
		"(docs/deploy.md, \"Protect changeflow's branches\")"
	rules, err := g.ProtectedBranches(ctx, reader, project)
	if err != nil {
		f.Status, f.Detail, f.Fix = readProblem(reader, project, "the protected branches", fix, err)
		return f
	}
	if b, ok := uncoveredBranch(rules); ok {
		f.Status = StatusFail
		f.Detail = "no protection rule covers " + b + ": anyone who may push to the repository can put commits on changeflow's branches, and a pre-made changeflow/ branch is what changeflow would be asked to approve"
		f.Fix = fix
		return f
	}
	var covering []gitlab.ProtectedBranch
	for _, r := range rules {
		if covers(r.Name, sampleBranches()[0]) {
			covering = append(covering, r)
		}
	}
	a := protectionAudit{committer: committer, known: known, committerLevel: committerLevel}
	for _, r := range covering {
		a.rule(r)
	}
	fails, warns := a.fails, a.warns
	if !a.committerPushes {
		fails = append(fails, name+" is not allowed to push to changeflow's branches: every request would stop at its first commit")
	}
	if !a.force {
		fails = append(fails, "force push is off: changeflow rebuilds a change by overwriting its own branch and GitLab's rebase of its MR rewrites it, both refused (403) without it")
	}
	switch {
	case len(fails) > 0:
		f.Status, f.Detail, f.Fix = StatusFail, strings.Join(append(fails, warns...), "; "), fix
	case len(warns) > 0:
		f.Status, f.Detail, f.Fix = StatusWarn, strings.Join(warns, "; "), fix
	default:
		f.Status = StatusOK
		f.Detail = "covered by " + ruleNames(covering) + ": only " + name + " may push, nobody else may merge into them, force push allowed"
	}
	return f
}

// readProblem is the finding's fields for a read of what that failed:
// refused (readRefused, with byHand as the manual check) or otherwise
// (readFailed).
func readProblem(reader gitlab.Bot, project, what, byHand string, err error) (Status, string, string) {
	if gitlab.IsForbidden(err) {
		return readRefused(reader, what, byHand)
	}
	return readFailed(project, err)
}

// uncoveredBranch returns the first of sampleBranches no rule covers.
func uncoveredBranch(rules []gitlab.ProtectedBranch) (string, bool) {
	for _, b := range sampleBranches() {
		if !slices.ContainsFunc(rules, func(r gitlab.ProtectedBranch) bool { return covers(r.Name, b) }) {
			return b, true
		}
	}
	return "", false
}

// protectionAudit collects what the protection rules covering
// changeflow's branches admit: whether the committer may push, whether
// force push is allowed, and who else may push or merge (fails), or may
// but could change the rule anyway (warns).
type protectionAudit struct {
	committer      gitlab.User
	known          bool // committer is known
	committerLevel int  // the committer's role on the project; 0 when unknown

	committerPushes, force bool
	fails, warns           []string
}

// rule adds what rule r admits.
func (a *protectionAudit) rule(r gitlab.ProtectedBranch) {
	if r.AllowForcePush {
		a.force = true
	}
	for _, e := range r.Push {
		a.push(r.Name, e)
	}
	for _, e := range r.Merge {
		switch who, st := judgeEntry(e, a.committer, a.known); st {
		case entryFail:
			a.fails = append(a.fails, who+" may merge into changeflow's branches ("+r.Name+")")
		case entryWarn:
			a.warns = append(a.warns, who+" may merge into changeflow's branches ("+r.Name+")")
		}
	}
}

// push adds what push entry e of rule name admits. A role entry admits
// the committer when it holds that role.
func (a *protectionAudit) push(name string, e gitlab.BranchAccess) {
	switch who, st := judgeEntry(e, a.committer, a.known); st {
	case entryCommitter:
		a.committerPushes = true
	case entryFail:
		a.fails = append(a.fails, who+" may push ("+name+")")
	case entryWarn:
		a.warns = append(a.warns, who+" may push ("+name+"): they can also change this rule, so this widens nothing, but changeflow's own checks are then all that stands between them and the bots' approvals")
	}
	if e.UserID == 0 && e.GroupID == 0 && e.DeployKeyID == 0 && e.AccessLevel > gitlab.AccessNoOne &&
		a.committerLevel >= e.AccessLevel {
		a.committerPushes = true
	}
}

func ruleNames(rs []gitlab.ProtectedBranch) string {
	var n []string
	for _, r := range rs {
		n = append(n, r.Name)
	}
	return strings.Join(n, ", ")
}

type entryVerdict int

const (
	entryNobody entryVerdict = iota
	entryCommitter
	entryWarn
	entryFail
)

// judgeEntry says what one push or merge entry admits.
func judgeEntry(e gitlab.BranchAccess, committer gitlab.User, known bool) (string, entryVerdict) {
	switch {
	case e.UserID != 0:
		if known && e.UserID == committer.ID {
			return committer.Username, entryCommitter
		}
		return fmt.Sprintf("user %s (id %d)", e.Description, e.UserID), entryFail
	case e.GroupID != 0:
		return fmt.Sprintf("every member of group %s (id %d)", e.Description, e.GroupID), entryFail
	case e.DeployKeyID != 0:
		return fmt.Sprintf("deploy key %d", e.DeployKeyID), entryFail
	case e.AccessLevel == gitlab.AccessNoOne:
		return "no one", entryNobody
	case e.AccessLevel < gitlab.AccessMaintainer:
		return "every Developer", entryFail
	case e.AccessLevel < gitlab.AccessAdmin:
		return "every Maintainer", entryWarn
	}
	return "instance administrators", entryNobody
}

// roleFindings: the committer needs at least Developer to push and open
// MRs (Maintainer where the default branch lets only Maintainers merge);
// each approver at least Developer to be an eligible approver.
func roleFindings(ctx context.Context, g gitlab.DeploymentReader, reader gitlab.Bot, project string, users map[gitlab.Bot]gitlab.User) ([]Finding, map[gitlab.Bot]int) {
	var out []Finding
	levels := map[gitlab.Bot]int{}
	for _, b := range checkedBots() {
		f := Finding{ID: "bot-role", Project: project, Subject: string(b), Title: "The " + string(b) + " bot holds the role it needs"}
		u, ok := users[b]
		if !ok {
			f.Status, f.Detail, f.Fix = StatusWarn, "not checked: the bot's account is not known (see bot-accounts)", "fix the bot's token first"
			out = append(out, f)
			continue
		}
		need := "push branches, open, rebase and merge MRs"
		if b != gitlab.Committer {
			need = "approve MRs"
		}
		m, err := g.ProjectMember(ctx, reader, project, u.ID)
		if err == nil {
			levels[b] = m.AccessLevel
		}
		switch {
		case gitlab.IsNotFound(err):
			f.Status = StatusFail
			f.Detail = u.Username + " is not a member of project " + project + ": it cannot " + need
			f.Fix = "add " + u.Username + " to project " + project + " with the Developer role (Members → Invite members)"
		case gitlab.IsForbidden(err):
			f.Status, f.Detail, f.Fix = readRefused(reader, "the project's members", "Members: "+u.Username+" must be at least Developer")
		case err != nil:
			f.Status, f.Detail, f.Fix = readFailed(project, err)
		case m.AccessLevel < gitlab.AccessDeveloper:
			f.Status = StatusFail
			f.Detail = fmt.Sprintf("%s has %s on project %s: it cannot %s", u.Username, levelName(m.AccessLevel), project, need)
			f.Fix = "give " + u.Username + " the Developer role on project " + project
		default:
			f.Status = StatusOK
			f.Detail = fmt.Sprintf("%s is %s on project %s", u.Username, levelName(m.AccessLevel), project)
		}
		out = append(out, f)
	}
	return out, levels
}

func levelName(l int) string {
	switch {
	case l >= gitlab.AccessOwner:
		return "Owner"
	case l >= gitlab.AccessMaintainer:
		return "Maintainer"
	case l >= gitlab.AccessDeveloper:
		return "Developer"
	case l >= gitlab.AccessReporter:
		return "Reporter"
	case l >= gitlab.AccessGuest:
		return "Guest"
	}
	return "no role"
}

// webhookFinding: a hook pointing at changeflow's webhook route with
// merge request and pipeline events, enabled; GitLab never returns its
// token, so only changeflow's side of the secret can be checked.
func webhookFinding(ctx context.Context, g gitlab.DeploymentReader, reader gitlab.Bot, project string, s *config.Snapshot) Finding {
	f := Finding{ID: "webhook", Project: project, Title: "GitLab's webhook reaches changeflow with its token"}
	want := ""
	if pu := s.Endpoints().PublicURL; pu != "" {
		want = strings.TrimRight(pu, "/") + "/callbacks/gitlab"
	}
	shown := want
	if shown == "" {
		shown = "<server.publicURL>/callbacks/gitlab"
	}
	fix := "in GitLab, project " + project + " → Settings → Webhooks: URL " + shown + ", Secret token = callbacks.tokens.gitlab, " +
		"triggers Merge request events and Pipeline events, SSL verification on"
	if _, ok, _ := s.CallbackToken(config.CallbackGitLab); !ok {
		f.Status = StatusFail
		f.Detail = "callbacks.tokens.gitlab is not set (or was refused): changeflow rejects every webhook"
		f.Fix = "set callbacks.tokens.gitlab (`" + config.GenerateHint + "`) and the same value as the hook's Secret token"
		return f
	}
	hooks, err := g.ProjectHooks(ctx, reader, project)
	if err != nil {
		f.Status, f.Detail, f.Fix = readProblem(reader, project, "the webhooks", fix, err)
		return f
	}
	h := changeflowHook(hooks, want)
	if h == nil {
		f.Status = StatusFail
		f.Detail = "no webhook of project " + project + " points at " + shown + ": changeflow learns of pipelines and merges only by polling (polling.pipeline.*), later"
		f.Fix = fix
		return f
	}
	fails, warns := hookProblems(*h, want)
	const tokenNote = "GitLab never returns a hook's secret token, so whether it equals callbacks.tokens.gitlab cannot be read: a wrong one shows as 401s under the hook's Recent events and as changeflow_http_requests_total{route=\"POST /callbacks/gitlab\",code=\"401\"}"
	switch {
	case len(fails) > 0:
		f.Status, f.Detail, f.Fix = StatusFail, h.URL+": "+strings.Join(append(fails, warns...), "; "), fix
	case len(warns) > 0:
		f.Status, f.Detail, f.Fix = StatusWarn, h.URL+": "+strings.Join(warns, "; ")+". "+tokenNote, fix
	default:
		f.Status, f.Detail = StatusOK, h.URL+" with merge request and pipeline events. "+tokenNote
	}
	return f
}

// changeflowHook is the first hook pointing at want, changeflow's webhook
// route; with want "" (server.publicURL unset), the first pointing at any
// host's /callbacks/gitlab. nil for none.
func changeflowHook(hooks []gitlab.Hook, want string) *gitlab.Hook {
	for i := range hooks {
		u := strings.TrimRight(hooks[i].URL, "/")
		if (want != "" && u == want) || (want == "" && strings.HasSuffix(u, "/callbacks/gitlab")) {
			return &hooks[i]
		}
	}
	return nil
}

// hookProblems lists what keeps hook h from reaching changeflow (fails)
// and what is weaker than the guide says or could not be checked (warns).
func hookProblems(h gitlab.Hook, want string) (fails, warns []string) {
	if !h.MergeRequestsEvents {
		fails = append(fails, "merge request events are off")
	}
	if !h.PipelineEvents {
		fails = append(fails, "pipeline events are off")
	}
	if h.AlertStatus != "" && h.AlertStatus != "executable" {
		fails = append(fails, "GitLab has "+strings.ReplaceAll(h.AlertStatus, "_", " ")+" the hook after failed deliveries (a wrong secret token is answered 401 and counts as one)")
	}
	if pu, err := url.Parse(h.URL); err == nil && pu.Scheme == "https" && !h.EnableSSLVerification {
		warns = append(warns, "SSL verification is off")
	}
	if want == "" {
		warns = append(warns, "server.publicURL is unset, so which changeflow the hook points at could not be checked")
	}
	return fails, warns
}
