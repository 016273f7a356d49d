package gitlab

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strings"
)

// commitAction is one entry of actions[] in the create-commit call.
type commitAction struct {
	Action          string `json:"action"`
	FilePath        string `json:"file_path"`
	PreviousPath    string `json:"previous_path"`
	Content         string `json:"content"`
	Encoding        string `json:"encoding"`
	LastCommitID    string `json:"last_commit_id"`
	ExecuteFilemode *bool  `json:"execute_filemode"`
}

// refusal is an answer GitLab gives instead of doing what was asked; the
// zero refusal is none.
type refusal struct {
	status int
	msg    any  // GitLab's "message": a string, or a list of them
	param  bool // Grape's parameter error instead: 400 {"error": msg}
}

func badRequest(msg any) refusal { return refusal{status: http.StatusBadRequest, msg: msg} }

// paramRefusal is Grape's refusal of a parameter.
func paramRefusal(msg string) refusal {
	return refusal{status: http.StatusBadRequest, msg: msg, param: true}
}

// write answers the refusal.
func (rf refusal) write(w http.ResponseWriter) {
	if rf.param {
		writeParamError(w, fmt.Sprint(rf.msg))
		return
	}
	writeError(w, rf.status, rf.msg)
}

// refusedInternal is a failure of the simulator's own git, answered as
// GitLab answers one.
func refusedInternal() refusal {
	return refusal{status: http.StatusInternalServerError, msg: "500 Internal Server Error"}
}

// commitRequest is the create-commit call's parameters.
type commitRequest struct {
	branch, msg           string
	startBranch, startSHA string
	force                 bool
	actions               []commitAction
}

// readCommitRequest reads the parameters in Grape's order of validation;
// the string is its parameter error ("" for none). Without start_sha,
// start_branch defaults to branch.
func readCommitRequest(in params) (commitRequest, string) {
	c := commitRequest{branch: in.get("branch"), msg: in.get("commit_message"),
		startBranch: in.get("start_branch"), startSHA: in.get("start_sha"), force: in.boolean("force")}
	if raw, ok := in.raw("actions"); ok {
		if err := json.Unmarshal(raw, &c.actions); err != nil {
			return c, "actions is invalid"
		}
	}
	switch {
	case c.branch == "":
		return c, "branch is missing"
	case c.msg == "":
		return c, "commit_message is missing"
	case len(c.actions) == 0:
		return c, "actions is missing"
	case c.startBranch != "" && c.startSHA != "":
		return c, "start_branch, start_sha are mutually exclusive"
	}
	if c.startSHA == "" && c.startBranch == "" {
		c.startBranch = c.branch
	}
	return c, ""
}

// handleCreateCommit: POST /projects/:id/repository/commits with branch,
// commit_message, actions[] and optional start_branch/start_sha/force →
// 201 Commit; 400 with Gitaly's messages ("A file with this name already
// exists", "A file with this name doesn't exist"); 403 without push access
// to the branch (a protected branch admits only the users its rule allows,
// and a force overwrite only with allow_force_push).
// The new commit lands with an update-ref compare-and-swap.
//
// The start point follows lib/api/commits.rb and Commits::CreateService:
// start_branch and start_sha are mutually exclusive (400); without
// start_sha, start_branch defaults to branch; a start_branch that does not
// exist is 400 "You can only create or edit files when you are on a
// branch"; starting elsewhere than branch while branch exists is 400 "A
// branch called … already exists" unless force is true. The new commit's
// parent is always the start point, so with force the branch is
// overwritten with one commit on start_branch's head (or start_sha) —
// GitLab's "force push" through the API.
func (s *Server) handleCreateCommit(w http.ResponseWriter, r *http.Request) {
	u := caller(r)
	in, err := readParams(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "400 Bad request - "+err.Error())
		return
	}
	c, perr := readCommitRequest(in)
	if perr != "" {
		writeParamError(w, perr)
		return
	}
	p := s.lockProject(w, r)
	if p == nil {
		return
	}
	defer p.mu.Unlock()
	if !u.canPush() {
		writeError(w, http.StatusForbidden, "403 Forbidden")
		return
	}
	ctx := r.Context()
	old, err := p.repo.branchHead(ctx, c.branch)
	if err != nil {
		s.internal(w, err)
		return
	}
	// A protected branch takes commits only from a user its rule allows to
	// push, and an overwrite (force on an existing branch) only where the
	// rule allows force pushes.
	if !p.canPushTo(u, c.branch, old != "" && c.force) {
		writeError(w, http.StatusForbidden, "403 Forbidden")
		return
	}
	parent, rf, err := startPoint(ctx, p, c, old)
	if err != nil {
		s.internal(w, err)
		return
	}
	if rf.status != 0 {
		rf.write(w)
		return
	}
	changes, rf := planActions(ctx, p, parent, c.actions)
	if rf.status != 0 {
		rf.write(w)
		return
	}
	s.landCommit(w, r, p, u, c, old, parent, changes)
}

// startPoint is the new commit's parent: start_sha, or start_branch's
// head. It refuses a start point that does not exist, and starting
// elsewhere than an existing branch without force.
func startPoint(ctx context.Context, p *project, c commitRequest, old string) (string, refusal, error) {
	var parent string
	var err error
	if c.startSHA != "" {
		parent, err = p.repo.resolve(ctx, c.startSHA)
	} else {
		parent, err = p.repo.branchHead(ctx, c.startBranch)
	}
	if err != nil {
		return "", refusal{}, err
	}
	switch {
	case parent == "" && c.startSHA != "":
		return "", badRequest("Cannot find start_sha: " + c.startSHA), nil
	case parent == "":
		return "", badRequest("You can only create or edit files when you are on a branch"), nil
	case old != "" && c.startBranch != c.branch && !c.force:
		return "", badRequest(fmt.Sprintf("A branch called '%s' already exists. Switch to that branch in order to make changes", c.branch)), nil
	}
	return parent, refusal{}, nil
}

// landCommit writes the commit of changes on parent, moves the branch
// from old to it (compare-and-swap: a branch that moved meanwhile is a
// 400) and answers 201 with the commit.
func (s *Server) landCommit(w http.ResponseWriter, r *http.Request, p *project, u *user, c commitRequest, old, parent string, changes []fileChange) {
	ctx := r.Context()
	now := s.now()
	sha, err := p.repo.writeCommit(ctx, parent, changes, c.msg, u.sig(now), u.sig(now))
	if err != nil {
		s.internal(w, err)
		return
	}
	if err := p.repo.updateRef(ctx, c.branch, sha, old); err != nil {
		if errors.Is(err, errRefMoved) {
			writeError(w, http.StatusBadRequest, "Could not update "+c.branch+": the branch moved")
			return
		}
		s.internal(w, err)
		return
	}
	s.branchMoved(ctx, p, c.branch, sha, u, false, false)
	info, err := p.repo.commitInfo(ctx, sha)
	if err != nil {
		s.internal(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, s.commitJSON(p, info))
}

// planActions validates actions against parent's tree, in order (each
// sees the tree as the ones before it left it), and returns the tree
// edits.
func planActions(ctx context.Context, p *project, parent string, actions []commitAction) ([]fileChange, refusal) {
	tree, err := p.repo.listTree(ctx, parent)
	if err != nil {
		return nil, refusedInternal()
	}
	pl := actionPlan{ctx: ctx, repo: p.repo, parent: parent, tree: tree}
	var changes []fileChange
	for _, a := range actions {
		c, rf := pl.plan(a)
		if rf.status != 0 {
			return nil, rf
		}
		changes = append(changes, c...)
	}
	return changes, refusal{}
}

// actionPlan is the state the actions of one commit are planned against:
// parent's tree, edited by each action planned so far.
type actionPlan struct {
	ctx    context.Context
	repo   *repo
	parent string
	tree   map[string]treeEntry
}

// plannedAction is one action with its common fields read: the cleaned
// path, the decoded content, the mode it asks for, whether the path
// exists in the tree.
type plannedAction struct {
	commitAction
	fp      string
	content []byte
	mode    string
	exists  bool
}

// plan checks what every action shares, then plans a by its kind.
func (pl *actionPlan) plan(a commitAction) ([]fileChange, refusal) {
	in, rf := pl.read(a)
	if rf.status != 0 {
		return nil, rf
	}
	switch a.Action {
	case "create":
		return pl.create(in)
	case "update":
		return pl.update(in)
	case "delete":
		return pl.delete(in)
	case "move":
		return pl.move(in)
	case "chmod":
		return pl.chmod(in)
	}
	return nil, badRequest("actions[action] does not have a valid value")
}

// read reads a's path, content and mode, and refuses an update, delete
// or move of a file changed since a.LastCommitID.
func (pl *actionPlan) read(a commitAction) (plannedAction, refusal) {
	in := plannedAction{commitAction: a, fp: strings.TrimPrefix(path.Clean("/"+a.FilePath), "/"), content: []byte(a.Content), mode: "100644"}
	if a.FilePath == "" || in.fp == "" || in.fp == "." {
		return in, badRequest("file_path is missing")
	}
	if a.Encoding == "base64" {
		var err error
		if in.content, err = base64.StdEncoding.DecodeString(a.Content); err != nil {
			return in, badRequest("Invalid base64 content")
		}
	}
	if a.ExecuteFilemode != nil && *a.ExecuteFilemode {
		in.mode = "100755"
	}
	_, in.exists = pl.tree[in.fp]
	if pl.changedSince(in) {
		return in, badRequest("The file has changed since you started editing it: " + in.fp)
	}
	return in, refusal{}
}

// changedSince reports whether an update, delete or move names a
// last_commit_id other than the last commit at parent that touched its
// file. A failed look-up lets the action through, as before it reached
// Gitaly.
func (pl *actionPlan) changedSince(in plannedAction) bool {
	if in.LastCommitID == "" || !in.exists || pl.parent == "" ||
		(in.Action != "update" && in.Action != "delete" && in.Action != "move") {
		return false
	}
	last, err := pl.repo.lastCommitFor(pl.ctx, pl.parent, in.fp)
	return err == nil && last != in.LastCommitID
}

func (pl *actionPlan) create(in plannedAction) ([]fileChange, refusal) {
	if in.exists {
		return nil, badRequest("A file with this name already exists")
	}
	pl.tree[in.fp] = treeEntry{Mode: in.mode}
	return []fileChange{{Path: in.fp, Content: in.content, Mode: in.mode}}, refusal{}
}

// update keeps the file's mode unless the action sets one.
func (pl *actionPlan) update(in plannedAction) ([]fileChange, refusal) {
	if !in.exists {
		return nil, badRequest("A file with this name doesn't exist")
	}
	mode := in.mode
	if in.ExecuteFilemode == nil {
		mode = pl.tree[in.fp].Mode
	}
	return []fileChange{{Path: in.fp, Content: in.content, Mode: mode}}, refusal{}
}

func (pl *actionPlan) delete(in plannedAction) ([]fileChange, refusal) {
	if !in.exists {
		return nil, badRequest("A file with this name doesn't exist")
	}
	delete(pl.tree, in.fp)
	return []fileChange{{Path: in.fp, Delete: true}}, refusal{}
}

// move keeps the file's mode, and its content unless the action gives
// one.
func (pl *actionPlan) move(in plannedAction) ([]fileChange, refusal) {
	prev := strings.TrimPrefix(path.Clean("/"+in.PreviousPath), "/")
	pe, ok := pl.tree[prev]
	if in.PreviousPath == "" || !ok {
		return nil, badRequest("A file with this name doesn't exist")
	}
	if in.exists {
		return nil, badRequest("A file with this name already exists")
	}
	content := in.content
	if in.Content == "" {
		data, _, _, err := pl.repo.readFile(pl.ctx, pl.parent, prev)
		if err != nil {
			return nil, refusedInternal()
		}
		content = data
	}
	delete(pl.tree, prev)
	pl.tree[in.fp] = pe
	return []fileChange{{Path: prev, Delete: true}, {Path: in.fp, Content: content, Mode: pe.Mode}}, refusal{}
}

// chmod rewrites the file with its content at parent and the mode asked.
func (pl *actionPlan) chmod(in plannedAction) ([]fileChange, refusal) {
	if !in.exists {
		return nil, badRequest("A file with this name doesn't exist")
	}
	data, _, _, err := pl.repo.readFile(pl.ctx, pl.parent, in.fp)
	if err != nil {
		return nil, refusedInternal()
	}
	return []fileChange{{Path: in.fp, Content: data, Mode: in.mode}}, refusal{}
}
