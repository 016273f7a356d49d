package gitlab

import (
	"encoding/base64"
	"errors"
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
