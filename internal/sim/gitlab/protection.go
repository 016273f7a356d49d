package gitlab

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// GitLab's access levels (lib/gitlab/access.rb; the protected branches API
// recognises 0, 30, 40 and 60).
const (
	levelNoOne      = 0
	levelReporter   = 20
	levelDeveloper  = 30
	levelMaintainer = 40
	levelAdmin      = 60
)

// accessLevel is a user's project access level for their role.
func (u *user) accessLevel() int {
	switch u.Role {
	case roleMaintainer:
		return levelMaintainer
	case roleDeveloper:
		return levelDeveloper
	case roleReporter:
		return levelReporter
	}
	return 0
}

// worldSeed is what Options say about a new world (and every reset).
type worldSeed struct {
	Bots              BotTokens
	ProtectChangeflow bool
	HookURLs          []string
	HookToken         string
}

func seedOf(o Options) worldSeed {
	return worldSeed{Bots: o.BotTokens, ProtectChangeflow: o.ProtectChangeflow, HookURLs: o.HookURLs, HookToken: o.WebhookToken}
}

// projectAccess is a project's protected branches and webhooks. Guarded
// by the project's mu.
type projectAccess struct {
	protected  []*protectedBranch
	nextProtID int64
	nextLevel  int64
	hooks      []*projectHook
	nextHookID int64
}

// protectedBranch is one rule of GET /projects/:id/protected_branches: a
// name or a wildcard pattern ("changeflow/*") with who may push and who
// may merge.
type protectedBranch struct {
	ID             int64
	Name           string
	Push, Merge    []branchAccess
	AllowForcePush bool
}

// branchAccess is one entry of push_access_levels / merge_access_levels:
// either a role level (0 = no one) or one user.
type branchAccess struct {
	ID          int64
	AccessLevel int
	UserID      int64 // 0: a role entry
}

// matches reports whether branch falls under the rule. GitLab's wildcard
// "*" matches any characters, "/" included (RefMatcher).
func (pb *protectedBranch) matches(branch string) bool {
	if !strings.Contains(pb.Name, "*") {
		return pb.Name == branch
	}
	parts := strings.Split(pb.Name, "*")
	for i, part := range parts {
		parts[i] = regexp.QuoteMeta(part)
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*?") + "$").MatchString(branch)
}

// allows reports whether u passes one of the entries.
func allows(entries []branchAccess, u *user) bool {
	for _, e := range entries {
		switch {
		case e.UserID != 0:
			if e.UserID == u.ID && u.canPush() {
				return true
			}
		case e.AccessLevel > levelNoOne && u.accessLevel() >= e.AccessLevel:
			return true
		}
	}
	return false
}

// rulesFor are the protection rules that cover branch. Caller holds p.mu.
func (p *project) rulesFor(branch string) []*protectedBranch {
	var out []*protectedBranch
	for _, pb := range p.access.protected {
		if pb.matches(branch) {
			out = append(out, pb)
		}
	}
	return out
}

// canPushTo says whether u may write branch (commits, creation, deletion,
// rebase): a developer may write any unprotected branch; a protected one
// only a user some covering rule allows to push — the most permissive rule
// wins, as in GitLab. force asks for an overwrite too, which a covering
// rule must allow. Caller holds p.mu.
func (p *project) canPushTo(u *user, branch string, force bool) bool {
	if !u.canPush() {
		return false
	}
	rules := p.rulesFor(branch)
	if len(rules) == 0 {
		return true
	}
	for _, pb := range rules {
		if allows(pb.Push, u) && (!force || pb.AllowForcePush) {
			return true
		}
	}
	return false
}

// canMergeInto says whether u may merge an MR into target. Caller holds
// p.mu.
func (p *project) canMergeInto(u *user, target string) bool {
	if !u.canMerge() {
		return false
	}
	rules := p.rulesFor(target)
	if len(rules) == 0 {
		return true
	}
	for _, pb := range rules {
		if allows(pb.Merge, u) {
			return true
		}
	}
	return false
}

// seedAccess gives a new world's project its seeded protection and hooks.
func seedAccess(w *world, p *project, seed worldSeed, now time.Time) {
	if seed.ProtectChangeflow {
		var bot *user
		for _, u := range w.users {
			if u.Username == "changeflow-bot" {
				bot = u
			}
		}
		only := func() []branchAccess {
			p.access.nextLevel++
			return []branchAccess{{ID: p.access.nextLevel, UserID: bot.ID}}
		}
		p.access.nextProtID++
		p.access.protected = append(p.access.protected, &protectedBranch{
			ID: p.access.nextProtID, Name: "changeflow/*", Push: only(), Merge: only(), AllowForcePush: true,
		})
	}
	urls := seed.HookURLs
	if len(urls) == 0 {
		urls = []string{DefaultHookURL}
	}
	for _, u := range urls {
		p.access.nextHookID++
		p.access.hooks = append(p.access.hooks, &projectHook{
			ID: p.access.nextHookID, URL: u, Token: seed.HookToken, MergeRequestsEvents: true, PipelineEvents: true,
			EnableSSLVerification: true, CreatedAt: now,
		})
	}
}

func (s *Server) protectedJSON(w *world, pb *protectedBranch) map[string]any {
	levels := func(es []branchAccess) []map[string]any {
		out := []map[string]any{}
		for _, e := range es {
			m := map[string]any{"id": e.ID, "access_level": e.AccessLevel, "user_id": nil, "group_id": nil,
				"access_level_description": levelDescription(e.AccessLevel)}
			if e.UserID != 0 {
				m["user_id"] = e.UserID
				m["access_level"] = levelMaintainer // GitLab reports a user entry at 40
				for _, u := range w.users {
					if u.ID == e.UserID {
						m["access_level_description"] = u.Name
					}
				}
			}
			out = append(out, m)
		}
		return out
	}
	return map[string]any{
		"id": pb.ID, "name": pb.Name, "push_access_levels": levels(pb.Push), "merge_access_levels": levels(pb.Merge),
		"unprotect_access_levels": []any{}, "allow_force_push": pb.AllowForcePush, "code_owner_approval_required": false,
	}
}

func levelDescription(l int) string {
	switch l {
	case levelNoOne:
		return "No one"
	case levelDeveloper:
		return "Developers + Maintainers"
	case levelMaintainer:
		return "Maintainers"
	case levelAdmin:
		return "Admins"
	}
	return strconv.Itoa(l)
}

// handleListProtected: GET /projects/:id/protected_branches[?search=] →
// every rule, wildcards as written. Reading needs at least Developer (403).
func (s *Server) handleListProtected(w http.ResponseWriter, r *http.Request) {
	p := s.lockProject(w, r)
	if p == nil {
		return
	}
	defer p.mu.Unlock()
	if caller(r).accessLevel() < levelDeveloper {
		writeError(w, http.StatusForbidden, "403 Forbidden")
		return
	}
	search := r.URL.Query().Get("search")
	out := []map[string]any{}
	for _, pb := range p.access.protected {
		if search == "" || strings.Contains(pb.Name, search) {
			out = append(out, s.protectedJSON(s.world(), pb))
		}
	}
	writeJSON(w, http.StatusOK, paginate(w, r, out))
}

// handleGetProtected: GET /projects/:id/protected_branches/:name (the rule
// as written, e.g. changeflow%2F%2A) → 404 "404 Not found" when none.
func (s *Server) handleGetProtected(w http.ResponseWriter, r *http.Request) {
	p := s.lockProject(w, r)
	if p == nil {
		return
	}
	defer p.mu.Unlock()
	if caller(r).accessLevel() < levelDeveloper {
		writeError(w, http.StatusForbidden, "403 Forbidden")
		return
	}
	for _, pb := range p.access.protected {
		if pb.Name == r.PathValue("name") {
			writeJSON(w, http.StatusOK, s.protectedJSON(s.world(), pb))
			return
		}
	}
	writeError(w, http.StatusNotFound, "404 Not found")
}

// handleProtect: POST /projects/:id/protected_branches {name,
// push_access_level, merge_access_level, allow_force_push, allowed_to_push:
// [{user_id}|{access_level}], allowed_to_merge} → 201; Maintainer only
// (403); an existing rule of that name is 409. Without allowed_to_* the
// levels default to 40 (Maintainers), as in GitLab.
func (s *Server) handleProtect(w http.ResponseWriter, r *http.Request) {
	in, err := readParams(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "400 Bad request - "+err.Error())
		return
	}
	name := in.get("name")
	if name == "" {
		writeParamError(w, "name is missing")
		return
	}
	p := s.lockProject(w, r)
	if p == nil {
		return
	}
	defer p.mu.Unlock()
	if caller(r).accessLevel() < levelMaintainer {
		writeError(w, http.StatusForbidden, "403 Forbidden")
		return
	}
	for _, pb := range p.access.protected {
		if pb.Name == name {
			writeError(w, http.StatusConflict, "Protected branch '"+name+"' already exists")
			return
		}
	}
	entries := func(levelParam, listParam string) ([]branchAccess, bool) {
		var out []branchAccess
		add := func(level int, userID int64) {
			p.access.nextLevel++
			out = append(out, branchAccess{ID: p.access.nextLevel, AccessLevel: level, UserID: userID})
		}
		raw, hasList := in.raw(listParam)
		if hasList {
			var list []struct {
				UserID      *int64 `json:"user_id"`
				AccessLevel *int   `json:"access_level"`
			}
			if json.Unmarshal(raw, &list) != nil {
				return nil, false
			}
			for _, e := range list {
				switch {
				case e.UserID != nil:
					add(levelMaintainer, *e.UserID)
				case e.AccessLevel != nil:
					add(*e.AccessLevel, 0)
				}
			}
		}
		if v, ok := in.str(levelParam); ok {
			l, err := strconv.Atoi(v)
			if err != nil {
				return nil, false
			}
			add(l, 0)
		} else if !hasList {
			add(levelMaintainer, 0)
		}
		return out, true
	}
	push, ok1 := entries("push_access_level", "allowed_to_push")
	merge, ok2 := entries("merge_access_level", "allowed_to_merge")
	if !ok1 || !ok2 {
		writeParamError(w, "access levels are invalid")
		return
	}
	p.access.nextProtID++
	pb := &protectedBranch{ID: p.access.nextProtID, Name: name, Push: push, Merge: merge, AllowForcePush: in.boolean("allow_force_push")}
	p.access.protected = append(p.access.protected, pb)
	writeJSON(w, http.StatusCreated, s.protectedJSON(s.world(), pb))
}

// handleUnprotect: DELETE /projects/:id/protected_branches/:name → 204;
// Maintainer only; no such rule → 404.
func (s *Server) handleUnprotect(w http.ResponseWriter, r *http.Request) {
	p := s.lockProject(w, r)
	if p == nil {
		return
	}
	defer p.mu.Unlock()
	if caller(r).accessLevel() < levelMaintainer {
		writeError(w, http.StatusForbidden, "403 Forbidden")
		return
	}
	for i, pb := range p.access.protected {
		if pb.Name == r.PathValue("name") {
			p.access.protected = append(p.access.protected[:i], p.access.protected[i+1:]...)
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	writeError(w, http.StatusNotFound, "404 Not found")
}

// handleEditMember: PUT /projects/:id/members/:user_id {access_level} →
// 200 the member; Maintainer only (403); 20, 30 and 40 are the roles the
// simulator has (400 otherwise). A role holds in every project of the
// world, as the seeded accounts' roles do.
func (s *Server) handleEditMember(w http.ResponseWriter, r *http.Request) {
	in, err := readParams(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "400 Bad request - "+err.Error())
		return
	}
	p := s.lockProject(w, r)
	if p == nil {
		return
	}
	defer p.mu.Unlock()
	if caller(r).accessLevel() < levelMaintainer {
		writeError(w, http.StatusForbidden, "403 Forbidden")
		return
	}
	roles := map[string]role{"20": roleReporter, "30": roleDeveloper, "40": roleMaintainer}
	ro, ok := roles[in.get("access_level")]
	if !ok {
		writeParamError(w, "access_level does not have a valid value")
		return
	}
	id, _ := strconv.ParseInt(r.PathValue("user_id"), 10, 64)
	for _, u := range s.world().users {
		if u.ID == id {
			u.Role = ro
			m := s.userJSON(u).(map[string]any)
			m["access_level"] = u.accessLevel()
			writeJSON(w, http.StatusOK, m)
			return
		}
	}
	writeError(w, http.StatusNotFound, "404 Not found")
}

// handleGetMember: GET /projects/:id/members/all/:user_id → the member
// with access_level (every seeded account is a member of every project at
// its role); an unknown user is 404 "404 Not found".
func (s *Server) handleGetMember(w http.ResponseWriter, r *http.Request) {
	p := s.lockProject(w, r)
	if p == nil {
		return
	}
	p.mu.Unlock()
	id, _ := strconv.ParseInt(r.PathValue("user_id"), 10, 64)
	for _, u := range s.world().users {
		if u.ID == id {
			m := s.userJSON(u).(map[string]any)
			m["access_level"] = u.accessLevel()
			m["expires_at"] = nil
			m["membership_state"] = "active"
			writeJSON(w, http.StatusOK, m)
			return
		}
	}
	writeError(w, http.StatusNotFound, "404 Not found")
}
