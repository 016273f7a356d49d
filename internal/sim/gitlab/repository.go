package gitlab

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strings"
)

// handleCreateBranch: POST /projects/:id/repository/branches (branch, ref)
// → 201 Branch; 400 "Branch already exists" / "Invalid reference name";
// 403 without push access, or on a protected branch the caller may not
// push to (lib/api/branches.rb).
func (s *Server) handleCreateBranch(w http.ResponseWriter, r *http.Request) {
	u := caller(r)
	in, err := readParams(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "400 Bad request - "+err.Error())
		return
	}
	branch, ref := in.get("branch"), in.get("ref")
	if branch == "" {
		writeParamError(w, "branch is missing")
		return
	}
	if ref == "" {
		writeParamError(w, "ref is missing")
		return
	}
	p := s.lockProject(w, r)
	if p == nil {
		return
	}
	defer p.mu.Unlock()
	if !p.canPushTo(u, branch, false) {
		writeError(w, http.StatusForbidden, "403 Forbidden")
		return
	}
	ctx := r.Context()
	if !validBranchName(branch) {
		writeError(w, http.StatusBadRequest, "Branch name is invalid")
		return
	}
	if old, err := p.repo.branchHead(ctx, branch); err != nil {
		s.internal(w, err)
		return
	} else if old != "" {
		writeError(w, http.StatusBadRequest, "Branch already exists")
		return
	}
	sha, err := p.repo.resolve(ctx, ref)
	if err != nil {
		s.internal(w, err)
		return
	}
	if sha == "" {
		writeError(w, http.StatusBadRequest, "Invalid reference name: "+ref)
		return
	}
	if err := p.repo.updateRef(ctx, branch, sha, ""); err != nil {
		if errors.Is(err, errRefMoved) {
			writeError(w, http.StatusBadRequest, "Branch already exists")
			return
		}
		s.internal(w, err)
		return
	}
	b, err := s.branchJSON(ctx, p, branch, sha, u)
	if err != nil {
		s.internal(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, b)
}

func validBranchName(b string) bool {
	if b == "" || strings.HasPrefix(b, "-") || strings.HasSuffix(b, "/") || strings.HasSuffix(b, ".lock") ||
		strings.Contains(b, "..") || strings.ContainsAny(b, " ~^:?*[\\") || strings.Contains(b, "//") {
		return false
	}
	return true
}

// handleGetBranch: GET /projects/:id/repository/branches/:branch.
func (s *Server) handleGetBranch(w http.ResponseWriter, r *http.Request) {
	p := s.lockProject(w, r)
	if p == nil {
		return
	}
	defer p.mu.Unlock()
	name := r.PathValue("branch")
	sha, err := p.repo.branchHead(r.Context(), name)
	if err != nil {
		s.internal(w, err)
		return
	}
	if sha == "" {
		writeError(w, http.StatusNotFound, "404 Branch Not Found")
		return
	}
	b, err := s.branchJSON(r.Context(), p, name, sha, caller(r))
	if err != nil {
		s.internal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, b)
}

// handleDeleteBranch: DELETE /projects/:id/repository/branches/:branch →
// 204; 403 without push access to it (a protected branch's rule).
func (s *Server) handleDeleteBranch(w http.ResponseWriter, r *http.Request) {
	p := s.lockProject(w, r)
	if p == nil {
		return
	}
	defer p.mu.Unlock()
	name := r.PathValue("branch")
	if !p.canPushTo(caller(r), name, false) {
		writeError(w, http.StatusForbidden, "403 Forbidden")
		return
	}
	sha, err := p.repo.branchHead(r.Context(), name)
	if err != nil {
		s.internal(w, err)
		return
	}
	if sha == "" {
		writeError(w, http.StatusNotFound, "404 Branch Not Found")
		return
	}
	if name == p.DefaultBranch {
		writeError(w, http.StatusBadRequest, "Cannot remove the default branch")
		return
	}
	if err := p.repo.deleteRef(r.Context(), name, sha); err != nil {
		s.internal(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

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
	branch, msg := in.get("branch"), in.get("commit_message")
	var actions []commitAction
	if raw, ok := in.raw("actions"); ok {
		if err := json.Unmarshal(raw, &actions); err != nil {
			writeParamError(w, "actions is invalid")
			return
		}
	}
	startBranch, startSHA := in.get("start_branch"), in.get("start_sha")
	switch {
	case branch == "":
		writeParamError(w, "branch is missing")
		return
	case msg == "":
		writeParamError(w, "commit_message is missing")
		return
	case len(actions) == 0:
		writeParamError(w, "actions is missing")
		return
	case startBranch != "" && startSHA != "":
		writeParamError(w, "start_branch, start_sha are mutually exclusive")
		return
	}
	if startSHA == "" && startBranch == "" {
		startBranch = branch
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
	old, err := p.repo.branchHead(ctx, branch)
	if err != nil {
		s.internal(w, err)
		return
	}
	// A protected branch takes commits only from a user its rule allows to
	// push, and an overwrite (force on an existing branch) only where the
	// rule allows force pushes.
	if !p.canPushTo(u, branch, old != "" && in.boolean("force")) {
		writeError(w, http.StatusForbidden, "403 Forbidden")
		return
	}
	var parent string
	if startSHA != "" {
		parent, err = p.repo.resolve(ctx, startSHA)
	} else {
		parent, err = p.repo.branchHead(ctx, startBranch)
	}
	if err != nil {
		s.internal(w, err)
		return
	}
	switch {
	case parent == "" && startSHA != "":
		writeError(w, http.StatusBadRequest, "Cannot find start_sha: "+startSHA)
		return
	case parent == "":
		writeError(w, http.StatusBadRequest, "You can only create or edit files when you are on a branch")
		return
	case old != "" && startBranch != branch && !in.boolean("force"):
		writeError(w, http.StatusBadRequest, fmt.Sprintf("A branch called '%s' already exists. Switch to that branch in order to make changes", branch))
		return
	}
	changes, status, emsg := s.planActions(r, p, parent, actions)
	if status != 0 {
		writeError(w, status, emsg)
		return
	}
	now := s.now()
	sha, err := p.repo.writeCommit(ctx, parent, changes, msg, u.sig(now), u.sig(now))
	if err != nil {
		s.internal(w, err)
		return
	}
	if err := p.repo.updateRef(ctx, branch, sha, old); err != nil {
		if errors.Is(err, errRefMoved) {
			writeError(w, http.StatusBadRequest, "Could not update "+branch+": the branch moved")
			return
		}
		s.internal(w, err)
		return
	}
	s.branchMoved(ctx, p, branch, sha, u, false, false)
	c, err := p.repo.commitInfo(ctx, sha)
	if err != nil {
		s.internal(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, s.commitJSON(p, c))
}

// planActions validates actions against parent's tree, in order, and
// returns the tree edits.
func (s *Server) planActions(r *http.Request, p *project, parent string, actions []commitAction) ([]fileChange, int, string) {
	ctx := r.Context()
	tree, err := p.repo.listTree(ctx, parent)
	if err != nil {
		return nil, http.StatusInternalServerError, "500 Internal Server Error"
	}
	var changes []fileChange
	for _, a := range actions {
		fp := strings.TrimPrefix(path.Clean("/"+a.FilePath), "/")
		if a.FilePath == "" || fp == "" || fp == "." {
			return nil, http.StatusBadRequest, "file_path is missing"
		}
		content := []byte(a.Content)
		if a.Encoding == "base64" {
			if content, err = base64.StdEncoding.DecodeString(a.Content); err != nil {
				return nil, http.StatusBadRequest, "Invalid base64 content"
			}
		}
		mode := "100644"
		if a.ExecuteFilemode != nil && *a.ExecuteFilemode {
			mode = "100755"
		}
		_, exists := tree[fp]
		if a.LastCommitID != "" && exists && (a.Action == "update" || a.Action == "delete" || a.Action == "move") && parent != "" {
			last, err := p.repo.lastCommitFor(ctx, parent, fp)
			if err == nil && last != a.LastCommitID {
				return nil, http.StatusBadRequest, "The file has changed since you started editing it: " + fp
			}
		}
		switch a.Action {
		case "create":
			if exists {
				return nil, http.StatusBadRequest, "A file with this name already exists"
			}
			tree[fp] = treeEntry{Mode: mode}
			changes = append(changes, fileChange{Path: fp, Content: content, Mode: mode})
		case "update":
			if !exists {
				return nil, http.StatusBadRequest, "A file with this name doesn't exist"
			}
			if a.ExecuteFilemode == nil {
				mode = tree[fp].Mode
			}
			changes = append(changes, fileChange{Path: fp, Content: content, Mode: mode})
		case "delete":
			if !exists {
				return nil, http.StatusBadRequest, "A file with this name doesn't exist"
			}
			delete(tree, fp)
			changes = append(changes, fileChange{Path: fp, Delete: true})
		case "move":
			prev := strings.TrimPrefix(path.Clean("/"+a.PreviousPath), "/")
			pe, ok := tree[prev]
			if a.PreviousPath == "" || !ok {
				return nil, http.StatusBadRequest, "A file with this name doesn't exist"
			}
			if exists {
				return nil, http.StatusBadRequest, "A file with this name already exists"
			}
			if a.Content == "" {
				data, _, _, err := p.repo.readFile(ctx, parent, prev)
				if err != nil {
					return nil, http.StatusInternalServerError, "500 Internal Server Error"
				}
				content = data
			}
			delete(tree, prev)
			tree[fp] = pe
			changes = append(changes, fileChange{Path: prev, Delete: true}, fileChange{Path: fp, Content: content, Mode: pe.Mode})
		case "chmod":
			if !exists {
				return nil, http.StatusBadRequest, "A file with this name doesn't exist"
			}
			data, _, _, err := p.repo.readFile(ctx, parent, fp)
			if err != nil {
				return nil, http.StatusInternalServerError, "500 Internal Server Error"
			}
			changes = append(changes, fileChange{Path: fp, Content: data, Mode: mode})
		default:
			return nil, http.StatusBadRequest, "actions[action] does not have a valid value"
		}
	}
	return changes, 0, ""
}

// handleGetCommit: GET /projects/:id/repository/commits/:sha.
func (s *Server) handleGetCommit(w http.ResponseWriter, r *http.Request) {
	p := s.lockProject(w, r)
	if p == nil {
		return
	}
	defer p.mu.Unlock()
	sha, err := p.repo.resolve(r.Context(), r.PathValue("sha"))
	if err != nil || sha == "" {
		writeError(w, http.StatusNotFound, "404 Commit Not Found")
		return
	}
	c, err := p.repo.commitInfo(r.Context(), sha)
	if err != nil {
		s.internal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.commitJSON(p, c))
}

// readRepoFile serves both file endpoints: ref defaults to the default
// branch (GitLab requires it for the JSON form; we are lenient).
func (s *Server) readRepoFile(w http.ResponseWriter, r *http.Request) (p *project, ref, commit, fp string, data []byte, blob string, ok bool) {
	p = s.lockProject(w, r)
	if p == nil {
		return nil, "", "", "", nil, "", false
	}
	defer p.mu.Unlock()
	ref = r.URL.Query().Get("ref")
	if ref == "" {
		ref = p.DefaultBranch
	}
	fp = r.PathValue("file")
	commit, err := p.repo.resolve(r.Context(), ref)
	if err != nil {
		s.internal(w, err)
		return nil, "", "", "", nil, "", false
	}
	if commit == "" {
		writeError(w, http.StatusNotFound, "404 Commit Not Found")
		return nil, "", "", "", nil, "", false
	}
	data, blob, found, err := p.repo.readFile(r.Context(), commit, fp)
	if err != nil {
		s.internal(w, err)
		return nil, "", "", "", nil, "", false
	}
	if !found {
		writeError(w, http.StatusNotFound, "404 File Not Found")
		return nil, "", "", "", nil, "", false
	}
	return p, ref, commit, fp, data, blob, true
}

// handleGetFile: GET /projects/:id/repository/files/:file_path?ref= →
// File with base64 content.
func (s *Server) handleGetFile(w http.ResponseWriter, r *http.Request) {
	p, ref, commit, fp, data, blob, ok := s.readRepoFile(w, r)
	if !ok {
		return
	}
	p.mu.Lock()
	last, _ := p.repo.lastCommitFor(r.Context(), commit, fp)
	p.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"file_name": path.Base(fp), "file_path": fp, "size": len(data), "encoding": "base64",
		"content": base64.StdEncoding.EncodeToString(data), "ref": ref, "blob_id": blob,
		"commit_id": commit, "last_commit_id": last, "execute_filemode": false,
	})
}

// handleGetRawFile: GET /projects/:id/repository/files/:file_path/raw.
func (s *Server) handleGetRawFile(w http.ResponseWriter, r *http.Request) {
	_, _, _, _, data, blob, ok := s.readRepoFile(w, r)
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Gitlab-Blob-Id", blob)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}

// internal logs err and answers GitLab's generic 500.
func (s *Server) internal(w http.ResponseWriter, err error) {
	s.log.Error("gitlab sim internal error", "err", err)
	writeError(w, http.StatusInternalServerError, "500 Internal Server Error")
}
