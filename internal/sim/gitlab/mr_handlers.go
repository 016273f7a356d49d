package gitlab

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"changeflow/internal/sim/simtoken"
)

// lockMR locks the {id} project and finds MR {iid}; the caller unlocks.
func (s *Server) lockMR(w http.ResponseWriter, r *http.Request) (*project, *mergeRequest) {
	p := s.lockProject(w, r)
	if p == nil {
		return nil, nil
	}
	iid, _ := strconv.ParseInt(r.PathValue("iid"), 10, 64)
	m := p.mr(iid)
	if m == nil {
		p.mu.Unlock()
		writeError(w, http.StatusNotFound, "404 Not found")
		return nil, nil
	}
	return p, m
}

// handleCreateMR: POST /projects/:id/merge_requests → 201; 409 with
// "Another open merge request already exists for this source branch: !N"
// (validate_branches → conflict!); 400 for missing parameters.
func (s *Server) handleCreateMR(w http.ResponseWriter, r *http.Request) {
	u := caller(r)
	in, err := readParams(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "400 Bad request - "+err.Error())
		return
	}
	src, dst, title := in.get("source_branch"), in.get("target_branch"), in.get("title")
	for _, f := range []struct{ v, name string }{{src, "source_branch"}, {dst, "target_branch"}, {title, "title"}} {
		if f.v == "" {
			writeParamError(w, f.name+" is missing")
			return
		}
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
	if src == dst {
		writeError(w, http.StatusConflict, []string{"You can't use same project/branch for source and target"})
		return
	}
	if other := p.openMRFor(src); other != nil {
		writeError(w, http.StatusConflict, []string{fmt.Sprintf("Another open merge request already exists for this source branch: !%d", other.IID)})
		return
	}
	head, err := p.repo.branchHead(ctx, src)
	if err != nil {
		s.internal(w, err)
		return
	}
	if head == "" {
		writeError(w, http.StatusBadRequest, []string{fmt.Sprintf("Source branch \"%s\" does not exist", src)})
		return
	}
	if t, err := p.repo.branchHead(ctx, dst); err != nil || t == "" {
		writeError(w, http.StatusBadRequest, []string{fmt.Sprintf("Target branch \"%s\" does not exist", dst)})
		return
	}
	now := s.now()
	s.mu.Lock()
	s.w.nextMRID++
	id := s.w.nextMRID
	s.mu.Unlock()
	m := &mergeRequest{
		ID: id, IID: int64(len(p.mrs)) + 1, ProjectID: p.ID, Title: title, Description: in.get("description"),
		SourceBranch: src, TargetBranch: dst, State: stateOpened, Author: u, SHA: head,
		RemoveSourceBranch: in.boolean("remove_source_branch"), CreatedAt: now, UpdatedAt: now,
	}
	m.markUnchecked(now)
	p.mrs = append(p.mrs, m)
	s.startPipeline(ctx, p, m, "")
	s.mrHook(ctx, p, m, "open", u, "")
	writeJSON(w, http.StatusCreated, s.mrJSON(ctx, p, m, u, false))
}

// handleGetMR: GET /projects/:id/merge_requests/:iid
// [?include_rebase_in_progress=true].
func (s *Server) handleGetMR(w http.ResponseWriter, r *http.Request) {
	p, m := s.lockMR(w, r)
	if m == nil {
		return
	}
	defer p.mu.Unlock()
	incl, _ := strconv.ParseBool(r.URL.Query().Get("include_rebase_in_progress"))
	writeJSON(w, http.StatusOK, s.mrJSON(r.Context(), p, m, caller(r), incl))
}

// handleListMRs: GET /projects/:id/merge_requests with state,
// source_branch, target_branch, iids[] filters; newest first; paginated.
func (s *Server) handleListMRs(w http.ResponseWriter, r *http.Request) {
	p := s.lockProject(w, r)
	if p == nil {
		return
	}
	defer p.mu.Unlock()
	q := r.URL.Query()
	state := q.Get("state")
	var iids []int64
	for _, v := range append(q["iids[]"], q["iids"]...) {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			iids = append(iids, n)
		}
	}
	var list []*mergeRequest
	for i := len(p.mrs) - 1; i >= 0; i-- {
		m := p.mrs[i]
		if state != "" && state != "all" && m.State != state {
			continue
		}
		if v := q.Get("source_branch"); v != "" && m.SourceBranch != v {
			continue
		}
		if v := q.Get("target_branch"); v != "" && m.TargetBranch != v {
			continue
		}
		if len(iids) > 0 && !slices.Contains(iids, m.IID) {
			continue
		}
		list = append(list, m)
	}
	if q.Get("sort") == "asc" {
		slices.Reverse(list)
	}
	page := paginate(w, r, list)
	out := make([]any, 0, len(page))
	for _, m := range page {
		out = append(out, s.basicMRJSON(r.Context(), p, m))
	}
	writeJSON(w, http.StatusOK, out)
}

// handleUpdateMR: PUT /projects/:id/merge_requests/:iid with title,
// description, target_branch or state_event (close/reopen). With the
// close/merge race armed, a close first merges the MR as the maintainer
// ("from outside"), so the close finds it merged and changes nothing.
//
// The fields are applied in GitLab's order and each stays applied when a
// later one is refused.
func (s *Server) handleUpdateMR(w http.ResponseWriter, r *http.Request) {
	u := caller(r)
	in, err := readParams(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "400 Bad request - "+err.Error())
		return
	}
	if perr := mrUpdateMissing(in); perr != "" {
		writeParamError(w, perr)
		return
	}
	p, m := s.lockMR(w, r)
	if m == nil {
		return
	}
	defer p.mu.Unlock()
	if !u.canPush() && m.Author.ID != u.ID {
		writeError(w, http.StatusForbidden, "403 Forbidden")
		return
	}
	ctx := r.Context()
	now := s.now()
	if rf := updateMRFields(ctx, p, m, in, now); rf.status != 0 {
		rf.write(w)
		return
	}
	action, rf := s.mrStateEvent(ctx, p, m, u, in.get("state_event"), now)
	if rf.status != 0 {
		rf.write(w)
		return
	}
	if m.State != stateMerged {
		m.UpdatedAt = now
		s.mrHook(ctx, p, m, action, u, "")
	}
	writeJSON(w, http.StatusOK, s.mrJSON(ctx, p, m, u, false))
}

// mrUpdateMissing is Grape's error when the update names none of the
// fields it takes; "" when it names one.
func mrUpdateMissing(in params) string {
	fields := []string{"title", "description", "target_branch", "state_event", "remove_source_branch",
		"assignee_id", "assignee_ids", "reviewer_ids", "labels", "add_labels", "remove_labels",
		"milestone_id", "discussion_locked", "squash", "allow_collaboration"}
	for _, f := range fields {
		if _, ok := in.str(f); ok {
			return ""
		}
		if _, ok := in.raw(f); ok {
			return ""
		}
	}
	return strings.Join(fields, ", ") + " are missing, at least one parameter must be provided"
}

// updateMRFields applies title, description, remove_source_branch and
// target_branch to m; a target branch that does not exist is refused
// (the fields before it stay applied). A new target makes the merge
// status unchecked.
func updateMRFields(ctx context.Context, p *project, m *mergeRequest, in params, now time.Time) refusal {
	if v, ok := in.str("title"); ok && v != "" {
		m.Title = v
	}
	if v, ok := in.str("description"); ok {
		m.Description = v
	}
	if _, ok := in.str("remove_source_branch"); ok {
		m.RemoveSourceBranch = in.boolean("remove_source_branch")
	}
	if v, ok := in.str("target_branch"); ok && v != "" && v != m.TargetBranch {
		if t, err := p.repo.branchHead(ctx, v); err != nil || t == "" {
			return badRequest([]string{fmt.Sprintf("Target branch \"%s\" does not exist", v)})
		}
		m.TargetBranch = v
		m.markUnchecked(now)
	}
	return refusal{}
}

// mrStateEvent applies state_event ev to m by u and returns the hook's
// action: "close", "reopen", or "update" when the state did not change
// (no event, or one the state already answers).
func (s *Server) mrStateEvent(ctx context.Context, p *project, m *mergeRequest, u *user, ev string, now time.Time) (string, refusal) {
	switch ev {
	case "close":
		return s.closeMR(ctx, p, m, u, now), refusal{}
	case "reopen":
		return reopenMR(p, m, now)
	case "":
		return "update", refusal{}
	}
	return "", paramRefusal("state_event does not have a valid value")
}

// closeMR closes an open m. With the close/merge race armed it first
// merges m as the maintainer, so the close finds it merged.
func (s *Server) closeMR(ctx context.Context, p *project, m *mergeRequest, u *user, now time.Time) string {
	if m.State == stateOpened && s.takeCloseRace() {
		maint := s.world().byToken[simtoken.Maintainer]
		if err := s.doMerge(ctx, p, m, maint, "", false); err != nil {
			s.log.Warn("close/merge race: outside merge failed", "mr", m.IID, "err", err)
		}
	}
	if m.State != stateOpened {
		return "update"
	}
	m.State, m.ClosedAt, m.ClosedBy = stateClosed, now, u
	return "close"
}

// reopenMR reopens a closed m, unless another open MR has its source
// branch (409).
func reopenMR(p *project, m *mergeRequest, now time.Time) (string, refusal) {
	if m.State != stateClosed {
		return "update", refusal{}
	}
	if other := p.openMRFor(m.SourceBranch); other != nil {
		return "", refusal{status: http.StatusConflict,
			msg: []string{fmt.Sprintf("Another open merge request already exists for this source branch: !%d", other.IID)}}
	}
	m.State, m.ClosedAt, m.ClosedBy = stateOpened, time.Time{}, nil
	m.markUnchecked(now)
	return "reopen", refusal{}
}

func (s *Server) takeCloseRace() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closeRace == 0 {
		return false
	}
	if s.closeRace > 0 {
		s.closeRace--
	}
	return true
}
