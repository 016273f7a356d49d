package gitlab

import (
	"context"
	"net/http"
)

// apiRoutes lists every REST v4 endpoint the simulator serves.
func (s *Server) apiRoutes() http.Handler {
	mux := http.NewServeMux()
	seen := map[string]bool{}
	handle := func(method, path string, h http.HandlerFunc) {
		mux.HandleFunc(method+" "+path, h)
		if !seen[path] {
			seen[path] = true
			// A known path with another method: Grape's 405 body.
			mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"error": "405 Not Allowed"})
			})
		}
	}
	const pr = "/api/v4/projects/{id}"
	const mr = pr + "/merge_requests/{iid}"
	handle("GET", "/api/v4/user", s.handleCurrentUser)
	handle("GET", pr, s.handleGetProject)
	handle("POST", pr+"/repository/branches", s.handleCreateBranch)
	handle("GET", pr+"/repository/branches/{branch}", s.handleGetBranch)
	handle("DELETE", pr+"/repository/branches/{branch}", s.handleDeleteBranch)
	handle("POST", pr+"/repository/commits", s.handleCreateCommit)
	handle("GET", pr+"/repository/commits", s.handleListCommits)
	handle("GET", pr+"/repository/commits/{sha}", s.handleGetCommit)
	handle("GET", pr+"/repository/compare", s.handleCompare)
	handle("GET", pr+"/repository/merge_base", s.handleMergeBase)
	handle("GET", pr+"/repository/files/{file}", s.handleGetFile)
	handle("GET", pr+"/repository/files/{file}/raw", s.handleGetRawFile)
	handle("GET", pr+"/merge_requests", s.handleListMRs)
	handle("POST", pr+"/merge_requests", s.handleCreateMR)
	handle("GET", mr, s.handleGetMR)
	handle("PUT", mr, s.handleUpdateMR)
	handle("POST", mr+"/approve", s.handleApprove)
	handle("POST", mr+"/unapprove", s.handleUnapprove)
	handle("GET", mr+"/approvals", s.handleGetApprovals)
	handle("PUT", mr+"/merge", s.handleMerge)
	handle("PUT", mr+"/rebase", s.handleRebase)
	handle("GET", mr+"/pipelines", s.handleMRPipelines)
	handle("POST", mr+"/pipelines", s.handleCreateMRPipeline)
	handle("GET", pr+"/pipelines/{pipeline}", s.handleGetPipeline)
	handle("POST", pr+"/pipelines/{pipeline}/retry", s.handleRetryPipeline)
	handle("GET", pr+"/approval_check_items", s.handleGetCheckItems)
	handle("GET", pr+"/protected_branches", s.handleListProtected)
	handle("POST", pr+"/protected_branches", s.handleProtect)
	handle("GET", pr+"/protected_branches/{name}", s.handleGetProtected)
	handle("DELETE", pr+"/protected_branches/{name}", s.handleUnprotect)
	handle("GET", pr+"/members/all/{user_id}", s.handleGetMember)
	handle("PUT", pr+"/members/{user_id}", s.handleEditMember)
	handle("GET", pr+"/hooks", s.handleListHooks)
	handle("POST", pr+"/hooks", s.handleAddHook)
	handle("DELETE", pr+"/hooks/{hook_id}", s.handleDeleteHook)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "404 Not Found")
	})
	return mux
}

type userKey struct{}

// withAuth resolves the caller from PRIVATE-TOKEN (or Authorization:
// Bearer); an unknown or missing token is GitLab's 401.
func (s *Server) withAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := requestToken(r)
		u, ok := s.world().byToken[tok]
		if tok == "" || !ok {
			writeError(w, http.StatusUnauthorized, "401 Unauthorized")
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, u)))
	})
}

func caller(r *http.Request) *user {
	u, _ := r.Context().Value(userKey{}).(*user)
	return u
}

func (s *Server) handleCurrentUser(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.currentUserJSON(caller(r)))
}

// lockProject finds the {id} project and locks it; the caller unlocks. A
// miss is written as GitLab's 404.
func (s *Server) lockProject(w http.ResponseWriter, r *http.Request) *project {
	p, err := s.project(r.PathValue("id"))
	if err != nil {
		writeError(w, http.StatusNotFound, "404 Project Not Found")
		return nil
	}
	p.mu.Lock()
	if p.dead {
		p.mu.Unlock()
		writeError(w, http.StatusNotFound, "404 Project Not Found")
		return nil
	}
	return p
}

func (s *Server) handleGetProject(w http.ResponseWriter, r *http.Request) {
	p := s.lockProject(w, r)
	if p == nil {
		return
	}
	defer p.mu.Unlock()
	writeJSON(w, http.StatusOK, s.projectJSON(p))
}
