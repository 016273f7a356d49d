package gitlab

import (
	"context"
	"net/http"
	"strings"
)

// handleMergeBase: GET /projects/:id/repository/merge_base?refs[]=a&refs[]=b
// → 200 the best common ancestor's commit; 400 "Provide at least 2 refs"
// or "Could not find ref: x"; 404 "Merge Base Not Found" for unrelated
// histories (GitLab's answers).
func (s *Server) handleMergeBase(w http.ResponseWriter, r *http.Request) {
	refs := r.URL.Query()["refs[]"]
	if len(refs) < 2 {
		writeError(w, http.StatusBadRequest, "Provide at least 2 refs")
		return
	}
	p := s.lockProject(w, r)
	if p == nil {
		return
	}
	defer p.mu.Unlock()
	ctx := r.Context()
	shas := make([]string, 0, len(refs))
	for _, ref := range refs {
		sha, err := p.repo.resolve(ctx, ref)
		if err != nil || sha == "" {
			writeError(w, http.StatusBadRequest, "Could not find ref: "+ref)
			return
		}
		shas = append(shas, sha)
	}
	base, err := p.repo.mergeBase(ctx, shas[0], shas[1])
	if err != nil || base == "" {
		writeError(w, http.StatusNotFound, "404 Merge Base Not Found")
		return
	}
	c, err := p.repo.commitInfo(ctx, base)
	if err != nil {
		s.internal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.commitJSON(p, c))
}

// handleCompare: GET /projects/:id/repository/compare?from&to[&straight]
// → {commit, commits, diffs, compare_timeout, compare_same_ref, web_url}.
// straight=true compares from..to directly; otherwise from the merge base
// of the two (GitLab's from...to). commits are oldest first, as GitLab
// lists them; each diff carries its unified diff text. An unknown ref is
// 404 "Ref Not Found".
func (s *Server) handleCompare(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	from, to := q.Get("from"), q.Get("to")
	if from == "" || to == "" {
		writeError(w, http.StatusBadRequest, "400 Bad request - from, to are missing")
		return
	}
	p := s.lockProject(w, r)
	if p == nil {
		return
	}
	defer p.mu.Unlock()
	ctx := r.Context()
	fromSHA, err1 := p.repo.resolve(ctx, from)
	toSHA, err2 := p.repo.resolve(ctx, to)
	if err1 != nil || err2 != nil || fromSHA == "" || toSHA == "" {
		writeError(w, http.StatusNotFound, "404 Ref Not Found")
		return
	}
	base := fromSHA
	if q.Get("straight") != "true" {
		mb, err := p.repo.mergeBase(ctx, fromSHA, toSHA)
		if err != nil {
			writeError(w, http.StatusNotFound, "404 Ref Not Found")
			return
		}
		base = mb
	}
	out, err := s.compareJSON(ctx, p, base, toSHA)
	if err != nil {
		s.internal(w, err)
		return
	}
	out["compare_same_ref"] = fromSHA == toSHA
	out["web_url"] = s.projectURL(p) + "/-/compare/" + fromSHA + "..." + toSHA
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) compareJSON(ctx context.Context, p *project, base, head string) (map[string]any, error) {
	list, err := p.repo.git(ctx, nil, nil, "rev-list", "--reverse", base+".."+head)
	if err != nil {
		return nil, err
	}
	commits := []any{}
	var last any
	for _, sha := range strings.Fields(list) {
		c, err := p.repo.commitInfo(ctx, sha)
		if err != nil {
			return nil, err
		}
		last = s.commitJSON(p, c)
		commits = append(commits, last)
	}
	files, err := p.repo.diffNames(ctx, base, head)
	if err != nil {
		return nil, err
	}
	diffs := []any{}
	for _, f := range files {
		text, err := p.repo.git(ctx, nil, nil, "diff", base, head, "--", f.Path)
		if err != nil {
			return nil, err
		}
		// GitLab's diff is the hunks only, without the header lines.
		if i := strings.Index(text, "\n@@"); i >= 0 {
			text = text[i+1:]
		}
		diffs = append(diffs, map[string]any{
			"old_path": f.Path, "new_path": f.Path, "a_mode": "100644", "b_mode": "100644",
			"new_file": f.Status == "A", "renamed_file": false, "deleted_file": f.Status == "D",
			"diff": text,
		})
	}
	return map[string]any{"commit": last, "commits": commits, "diffs": diffs, "compare_timeout": false}, nil
}

// currentUserJSON is GET /user: the caller's own account, with the fields
// GitLab shows only to the account itself (email, commit_email).
func (s *Server) currentUserJSON(u *user) any {
	m, _ := s.userJSON(u).(map[string]any)
	if m == nil {
		return nil
	}
	m["email"] = u.email()
	m["commit_email"] = u.email()
	return m
}
