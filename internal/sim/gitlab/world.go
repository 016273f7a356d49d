package gitlab

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"changeflow/internal/sim/simtoken"
)

// role is what a user may do in every project of the simulated world.
type role int

const (
	// roleReporter reads only: no push, no approval permission (403), no
	// merge (401).
	roleReporter role = iota + 1
	// roleDeveloper pushes, opens, approves and merges. GitLab's "prevent
	// approval by author/committers" rules still refuse its approvals of MRs
	// it wrote (401).
	roleDeveloper
	// roleMaintainer may do anything, including approving its own MRs.
	roleMaintainer
)

// user is one account with a fixed personal access token.
type user struct {
	ID       int64
	Username string
	Name     string
	Token    string
	Role     role
}

func (u *user) email() string { return u.Username + "@changeflow.local" }

func (u *user) sig(t time.Time) signature { return signature{Name: u.Name, Email: u.email(), When: t} }

func (u *user) canPush() bool { return u.Role >= roleDeveloper }

func (u *user) canMerge() bool { return u.Role >= roleDeveloper }

func (u *user) hasApprovePermission() bool { return u.Role >= roleDeveloper }

// seedUsers is the local world of README.md, "The local run" plus a read-only account that
// exercises the 403 and 401 permission paths.
func seedUsers() []*user {
	return []*user{
		{ID: 1, Username: "maintainer", Name: "Maintainer", Token: simtoken.Maintainer, Role: roleMaintainer},
		{ID: 2, Username: "changeflow-bot", Name: "changeflow bot", Token: simtoken.Committer, Role: roleDeveloper},
		{ID: 3, Username: "approver-1", Name: "Approver One", Token: simtoken.Approver1, Role: roleDeveloper},
		{ID: 4, Username: "approver-2", Name: "Approver Two", Token: simtoken.Approver2, Role: roleDeveloper},
		{ID: 5, Username: "observer", Name: "Observer", Token: simtoken.Observer, Role: roleReporter},
		// A person with push rights to the config repository: the actor
		// changeflow's foreign-head checks defend against (docs/security.md).
		{ID: 6, Username: "developer", Name: "Dev Eloper", Token: simtoken.Developer, Role: roleDeveloper},
	}
}

// CheckItem is one entry of a project's required approval check items
// (docs/adapters.md, a simulator-only extension modelling the company's
// upstream change). An approve call must acknowledge every configured item
// at its current version.
type CheckItem struct {
	Key     string `json:"key"`
	Version int    `json:"version"`
	Title   string `json:"title,omitempty"`
}

// project is one repository with its merge requests and pipelines. mu
// serialises every write to the project (and guards its in-memory state);
// update-ref compare-and-swap stays the safety net underneath.
type project struct {
	mu            sync.Mutex
	ID            int64
	Path          string // "config/bindings"
	Name          string
	DefaultBranch string
	repo          *repo
	mrs           []*mergeRequest // index iid-1
	pipelines     map[int64]*pipeline
	nextPipeIID   int64
	checkItems    []CheckItem
	access        projectAccess // protected branches and webhooks (protection.go, hooks.go)
	dead          bool          // set when the world was reset; timers must not touch it
}

func (p *project) mr(iid int64) *mergeRequest {
	if iid < 1 || iid > int64(len(p.mrs)) {
		return nil
	}
	return p.mrs[iid-1]
}

// world is everything a reset throws away.
type world struct {
	dir        string
	users      []*user
	byToken    map[string]*user
	projects   map[int64]*project
	byPath     map[string]*project
	nextMRID   int64
	nextPipeID int64
}

// BotTokens replace the well-known tokens of changeflow's three bot
// accounts (changeflow-bot, approver-1, approver-2); "" keeps the
// well-known one. A changeflow outside --local refuses the well-known
// tokens, so a world it talks to is given tokens of its own.
type BotTokens struct {
	Committer, Approver1, Approver2 string
	// Doctor is one more token of the maintainer account, for
	// changeflow's read-only deployment checks (gitlab.tokens.doctor; in
	// GitLab a Maintainer's token of scope read_api — the simulator models
	// no scopes). The maintainer keeps its well-known token.
	Doctor string
}

// newWorld creates the seeded world in dir: project config/bindings (id 1)
// with an initial commit on main holding bindings/README.md.
func newWorld(ctx context.Context, dir string, now time.Time, seed worldSeed) (*world, error) {
	bots := seed.Bots
	w := &world{
		dir:      dir,
		users:    seedUsers(),
		byToken:  map[string]*user{},
		projects: map[int64]*project{},
		byPath:   map[string]*project{},
	}
	override := map[string]string{simtoken.Committer: bots.Committer, simtoken.Approver1: bots.Approver1, simtoken.Approver2: bots.Approver2}
	for _, u := range w.users {
		if tok := override[u.Token]; tok != "" {
			u.Token = tok
		}
		w.byToken[u.Token] = u
	}
	if bots.Doctor != "" {
		w.byToken[bots.Doctor] = w.byToken[simtoken.Maintainer]
	}
	r, err := initRepo(ctx, filepath.Join(dir, "config", "bindings.git"))
	if err != nil {
		return nil, err
	}
	p := &project{ID: 1, Path: "config/bindings", Name: "bindings", DefaultBranch: "main", repo: r, pipelines: map[int64]*pipeline{}}
	m := w.byToken[simtoken.Maintainer]
	readme := "# bindings\n\nOne YAML file per target: a sorted list of {subject, expiresAt, operationId}.\n"
	sha, err := r.writeCommit(ctx, "", []fileChange{{Path: "bindings/README.md", Content: []byte(readme)}}, "Initial commit", m.sig(now), m.sig(now))
	if err != nil {
		return nil, fmt.Errorf("seed commit: %w", err)
	}
	if err := r.updateRef(ctx, "main", sha, ""); err != nil {
		return nil, err
	}
	seedAccess(w, p, seed, now)
	w.projects[p.ID] = p
	w.byPath[p.Path] = p
	return w, nil
}
