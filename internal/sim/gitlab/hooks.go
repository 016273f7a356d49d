package gitlab

import (
	"net/http"
	"strconv"
	"time"
)

// DefaultHookURL is the seeded webhook's URL when Options.HookURLs is
// empty: the local run's changeflow (the Deliverer decides where a
// delivery really goes).
const DefaultHookURL = "http://127.0.0.1:8080" + WebhookPath

// projectHook is one project webhook (GET /projects/:id/hooks). A hook
// that subscribes to an event kind makes the simulator deliver that kind,
// with the hook's token; with no such hook the event is recorded (the
// control API lists it) but not delivered — as GitLab sends nothing
// without a hook.
type projectHook struct {
	ID                    int64
	URL                   string
	Token                 string
	PushEvents            bool
	MergeRequestsEvents   bool
	PipelineEvents        bool
	EnableSSLVerification bool
	CreatedAt             time.Time
}

// subscribes reports whether h wants event (an X-Gitlab-Event value).
func (h *projectHook) subscribes(event string) bool {
	switch event {
	case "Merge Request Hook":
		return h.MergeRequestsEvents
	case "Pipeline Hook":
		return h.PipelineEvents
	case "Push Hook":
		return h.PushEvents
	}
	return false
}

// hookFor is the first hook of p that subscribes to event; nil when none.
// Caller holds p.mu.
func (p *project) hookFor(event string) *projectHook {
	for _, h := range p.access.hooks {
		if h.subscribes(event) {
			return h
		}
	}
	return nil
}

// hookJSON is GitLab's project hook entity; the secret token is never
// returned (GitLab does not either), so a client cannot check it.
func hookJSON(p *project, h *projectHook) map[string]any {
	return map[string]any{
		"id": h.ID, "url": h.URL, "project_id": p.ID, "created_at": h.CreatedAt,
		"push_events": h.PushEvents, "merge_requests_events": h.MergeRequestsEvents, "pipeline_events": h.PipelineEvents,
		"tag_push_events": false, "issues_events": false, "confidential_issues_events": false, "note_events": false,
		"confidential_note_events": false, "job_events": false, "wiki_page_events": false, "deployment_events": false,
		"releases_events": false, "enable_ssl_verification": h.EnableSSLVerification, "alert_status": "executable",
		"disabled_until": nil, "push_events_branch_filter": "",
	}
}

// handleListHooks: GET /projects/:id/hooks → every hook, Maintainer only
// (403), as GitLab.
func (s *Server) handleListHooks(w http.ResponseWriter, r *http.Request) {
	p := s.lockProject(w, r)
	if p == nil {
		return
	}
	defer p.mu.Unlock()
	if caller(r).accessLevel() < levelMaintainer {
		writeError(w, http.StatusForbidden, "403 Forbidden")
		return
	}
	out := []map[string]any{}
	for _, h := range p.access.hooks {
		out = append(out, hookJSON(p, h))
	}
	writeJSON(w, http.StatusOK, paginate(w, r, out))
}

// handleAddHook: POST /projects/:id/hooks {url, token, push_events,
// merge_requests_events, pipeline_events, enable_ssl_verification} → 201;
// Maintainer only. push_events defaults to true, the others to false, as
// in GitLab.
func (s *Server) handleAddHook(w http.ResponseWriter, r *http.Request) {
	in, err := readParams(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "400 Bad request - "+err.Error())
		return
	}
	if in.get("url") == "" {
		writeParamError(w, "url is missing")
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
	push := true
	if _, ok := in.str("push_events"); ok {
		push = in.boolean("push_events")
	}
	ssl := true
	if _, ok := in.str("enable_ssl_verification"); ok {
		ssl = in.boolean("enable_ssl_verification")
	}
	p.access.nextHookID++
	h := &projectHook{ID: p.access.nextHookID, URL: in.get("url"), Token: in.get("token"), PushEvents: push,
		MergeRequestsEvents: in.boolean("merge_requests_events"), PipelineEvents: in.boolean("pipeline_events"),
		EnableSSLVerification: ssl, CreatedAt: s.now()}
	p.access.hooks = append(p.access.hooks, h)
	writeJSON(w, http.StatusCreated, hookJSON(p, h))
}

// handleDeleteHook: DELETE /projects/:id/hooks/:hook_id → 204; Maintainer
// only; no such hook → 404 "404 Not found".
func (s *Server) handleDeleteHook(w http.ResponseWriter, r *http.Request) {
	p := s.lockProject(w, r)
	if p == nil {
		return
	}
	defer p.mu.Unlock()
	if caller(r).accessLevel() < levelMaintainer {
		writeError(w, http.StatusForbidden, "403 Forbidden")
		return
	}
	id, _ := strconv.ParseInt(r.PathValue("hook_id"), 10, 64)
	for i, h := range p.access.hooks {
		if h.ID == id {
			p.access.hooks = append(p.access.hooks[:i], p.access.hooks[i+1:]...)
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	writeError(w, http.StatusNotFound, "404 Not found")
}
