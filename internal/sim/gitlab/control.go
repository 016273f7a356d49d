package gitlab

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"changeflow/internal/sim/simtoken"
)

// controlRoutes is the simulator's control API (docs/simulators.md).
func (s *Server) controlRoutes() http.Handler {
	mux := http.NewServeMux()
	const mr = "/_control/projects/{id}/merge_requests/{iid}"
	mux.HandleFunc("GET /_control/state", s.ctlState)
	mux.HandleFunc("POST /_control/reset", s.ctlReset)
	mux.HandleFunc("GET /_control/settings", s.ctlGetSettings)
	mux.HandleFunc("PUT /_control/settings", s.ctlPutSettings)
	mux.HandleFunc("GET /_control/faults", s.ctlListFaults)
	mux.HandleFunc("POST /_control/faults", s.ctlAddFault)
	mux.HandleFunc("DELETE /_control/faults", s.ctlClearFaults)
	mux.HandleFunc("DELETE /_control/faults/{fid}", s.ctlDeleteFault)
	mux.HandleFunc("GET /_control/faults/held", s.ctlHeld)
	mux.HandleFunc("POST /_control/faults/release", s.ctlReleaseHeld)
	mux.HandleFunc("POST /_control/pipelines", s.ctlForcePipelines)
	mux.HandleFunc("POST "+mr+"/conflict", s.ctlConflict)
	mux.HandleFunc("POST "+mr+"/merge", s.ctlOutsideMerge)
	mux.HandleFunc("POST /_control/close_merge_race", s.ctlCloseMergeRace)
	mux.HandleFunc("POST /_control/merge_failures", s.ctlMergeFailures)
	mux.HandleFunc("PUT /_control/projects/{id}/check_items", s.ctlSetCheckItems)
	mux.HandleFunc("GET /_control/webhooks", s.ctlListWebhooks)
	mux.HandleFunc("POST /_control/webhooks/redeliver", s.ctlRedeliver)
	mux.HandleFunc("GET /_control/requests", s.ctlListRequests)
	mux.HandleFunc("DELETE /_control/requests", s.ctlClearRequests)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "unknown control endpoint")
	})
	return mux
}

// decode reads a JSON control body into v; an empty body leaves v as is.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err == nil && len(b) > 0 {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid JSON body: "+err.Error())
		return false
	}
	return true
}

func (s *Server) ctlReset(w http.ResponseWriter, r *http.Request) {
	if err := s.reset(r.Context()); err != nil {
		s.internal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"reset": true})
}

// settingsView is the JSON shape of the runtime settings.
type settingsView struct {
	MergeabilityDelay     *Duration `json:"mergeability_delay,omitempty"`
	PipelineStartDelay    *Duration `json:"pipeline_start_delay,omitempty"`
	PipelineDuration      *Duration `json:"pipeline_duration,omitempty"`
	RebaseDuration        *Duration `json:"rebase_duration,omitempty"`
	ApprovalsRequired     *int      `json:"approvals_required,omitempty"`
	CompatAll401Approvals *bool     `json:"compat_all_401_approvals,omitempty"`
	LegacyMerge406        *bool     `json:"legacy_merge_406,omitempty"`
	RequireCheckItems     *bool     `json:"require_check_items,omitempty"`
	KeepApprovalsOnPush   *bool     `json:"keep_approvals_on_push,omitempty"`
	APIRatePerMinute      *int      `json:"api_rate_per_minute,omitempty"`
	PipelineRatePerMinute *int      `json:"pipeline_rate_per_minute,omitempty"`
	RateWindow            *Duration `json:"rate_window,omitempty"`
}

func viewOf(st settings) settingsView {
	d := func(v time.Duration) *Duration { x := Duration(v); return &x }
	return settingsView{
		MergeabilityDelay: d(st.MergeabilityDelay), PipelineStartDelay: d(st.PipelineStartDelay),
		PipelineDuration: d(st.PipelineDuration), RebaseDuration: d(st.RebaseDuration),
		ApprovalsRequired: &st.ApprovalsRequired, CompatAll401Approvals: &st.CompatAll401Approvals,
		LegacyMerge406: &st.LegacyMerge406, RequireCheckItems: &st.RequireCheckItems,
		KeepApprovalsOnPush: &st.KeepApprovalsOnPush,
		APIRatePerMinute:    &st.APIRatePerMinute, PipelineRatePerMinute: &st.PipelineRatePerMinute,
		RateWindow: d(st.RateWindow),
	}
}

func (s *Server) ctlGetSettings(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, viewOf(s.settings()))
}

func (s *Server) ctlPutSettings(w http.ResponseWriter, r *http.Request) {
	var v settingsView
	if !decode(w, r, &v) {
		return
	}
	s.mu.Lock()
	st := &s.set
	setD := func(dst *time.Duration, src *Duration) {
		if src != nil && *src >= 0 {
			*dst = time.Duration(*src)
		}
	}
	setD(&st.MergeabilityDelay, v.MergeabilityDelay)
	setD(&st.PipelineStartDelay, v.PipelineStartDelay)
	setD(&st.PipelineDuration, v.PipelineDuration)
	setD(&st.RebaseDuration, v.RebaseDuration)
	if v.ApprovalsRequired != nil && *v.ApprovalsRequired >= 0 {
		st.ApprovalsRequired = *v.ApprovalsRequired
	}
	setRates(st, v)
	for _, b := range []struct {
		dst *bool
		src *bool
	}{{&st.CompatAll401Approvals, v.CompatAll401Approvals}, {&st.LegacyMerge406, v.LegacyMerge406},
		{&st.RequireCheckItems, v.RequireCheckItems}, {&st.KeepApprovalsOnPush, v.KeepApprovalsOnPush}} {
		if b.src != nil {
			*b.dst = *b.src
		}
	}
	out := viewOf(*st)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// setRates applies the rate-limit settings: a negative rate is ignored
// (0 turns a limit off) and a window below 1ms is ignored.
func setRates(st *settings, v settingsView) {
	for _, r := range []struct {
		dst *int
		src *int
	}{{&st.APIRatePerMinute, v.APIRatePerMinute}, {&st.PipelineRatePerMinute, v.PipelineRatePerMinute}} {
		if r.src != nil && *r.src >= 0 {
			*r.dst = *r.src
		}
	}
	if v.RateWindow != nil && time.Duration(*v.RateWindow) >= time.Millisecond {
		st.RateWindow = time.Duration(*v.RateWindow)
	}
}

func (s *Server) ctlListFaults(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	out := make([]Fault, 0, len(s.faults))
	for _, f := range s.faults {
		out = append(out, *f)
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) ctlAddFault(w http.ResponseWriter, r *http.Request) {
	var f Fault
	if !decode(w, r, &f) {
		return
	}
	if err := f.validate(); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	s.mu.Lock()
	s.nextFault++
	f.ID, f.Hits = s.nextFault, 0
	s.faults = append(s.faults, &f)
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, f)
}

func (s *Server) ctlClearFaults(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.faults = nil
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// ctlReleaseHeld ends the wait of every call a delay fault holds right
// now: one held before it applies (phase "before") is applied and
// answered, one held after answers. A test holds a call until the world
// is where it wants the call to land, rather than guessing a delay that
// is long enough on a loaded machine. Faults stay armed.
func (s *Server) ctlReleaseHeld(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	n := s.held
	if s.released != nil {
		close(s.released)
		s.released = nil
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"released": n})
}

// ctlHeld answers how many calls delay faults hold right now.
func (s *Server) ctlHeld(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	n := s.held
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"held": n})
}

func (s *Server) ctlDeleteFault(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.Atoi(r.PathValue("fid"))
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range s.faults {
		if f.ID == id {
			s.faults = append(s.faults[:i:i], s.faults[i+1:]...)
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	writeError(w, http.StatusNotFound, "no such fault")
}

// ctlForcePipelines forces pipeline outcomes: with mr_iid, the MR's running
// head pipeline and its later ones; without, the next count pipelines
// created anywhere. outcome: pass, fail, never, rule; delay replaces the
// running time ("finish after a delay").
func (s *Server) ctlForcePipelines(w http.ResponseWriter, r *http.Request) {
	var in struct {
		ProjectID int64    `json:"project_id"`
		MRIID     int64    `json:"mr_iid"`
		Outcome   string   `json:"outcome"`
		Delay     Duration `json:"delay"`
		Count     int      `json:"count"`
	}
	if !decode(w, r, &in) {
		return
	}
	switch in.Outcome {
	case outcomePass, outcomeFail, outcomeNever, outcomeRule:
	case "":
		in.Outcome = outcomeRule
	default:
		writeError(w, http.StatusBadRequest, "outcome must be pass, fail, never or rule")
		return
	}
	f := pipelineForce{Outcome: in.Outcome, Delay: time.Duration(in.Delay), Count: max(in.Count, 1)}
	if in.MRIID == 0 {
		s.mu.Lock()
		s.force = append(s.force, f)
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"next_pipelines": f.Count, "outcome": f.Outcome})
		return
	}
	if in.ProjectID == 0 {
		in.ProjectID = 1
	}
	p, err := s.project(strconv.FormatInt(in.ProjectID, 10))
	if err != nil {
		writeError(w, http.StatusNotFound, "404 Project Not Found")
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.mr(in.MRIID)
	if m == nil {
		writeError(w, http.StatusNotFound, "404 Not found")
		return
	}
	s.forcePipelines(p, m, f)
	writeJSON(w, http.StatusOK, map[string]any{"mr_iid": m.IID, "outcome": f.Outcome})
}

// ctlConflict commits, as the maintainer, a change to the MR's target
// branch that rewrites every file the MR touches, so the MR (and its next
// rebase) really conflicts.
func (s *Server) ctlConflict(w http.ResponseWriter, r *http.Request) {
	p, m := s.lockMR(w, r)
	if m == nil {
		return
	}
	defer p.mu.Unlock()
	ctx := r.Context()
	target, err := p.repo.branchHead(ctx, m.TargetBranch)
	if err != nil || target == "" {
		writeError(w, http.StatusConflict, "target branch is gone")
		return
	}
	base, err := p.repo.mergeBase(ctx, target, m.SHA)
	if err != nil {
		s.internal(w, err)
		return
	}
	files, err := p.repo.diffNames(ctx, base, m.SHA)
	if err != nil {
		s.internal(w, err)
		return
	}
	if len(files) == 0 {
		writeError(w, http.StatusConflict, "the merge request changes nothing")
		return
	}
	now := s.now()
	var changes []fileChange
	var paths []string
	for _, f := range files {
		content := fmt.Sprintf("# changed on %s outside merge request !%d at %s\n", m.TargetBranch, m.IID, now.Format(time.RFC3339Nano))
		changes = append(changes, fileChange{Path: f.Path, Content: []byte(content)})
		paths = append(paths, f.Path)
	}
	maint := s.world().byToken[simtoken.Maintainer]
	sha, err := p.repo.writeCommit(ctx, target, changes, "Conflicting change from outside (simulator)", maint.sig(now), maint.sig(now))
	if err == nil {
		err = p.repo.updateRef(ctx, m.TargetBranch, sha, target)
	}
	if err != nil {
		s.internal(w, err)
		return
	}
	s.branchMoved(ctx, p, m.TargetBranch, sha, maint, false, false)
	_, conflict, _, _ := p.repo.mergeTree(ctx, sha, m.SHA)
	writeJSON(w, http.StatusOK, map[string]any{"target_sha": sha, "files": paths, "conflicts": conflict})
}

// ctlOutsideMerge merges the MR as the maintainer, skipping approval and
// pipeline rules (someone pressed "merge immediately").
func (s *Server) ctlOutsideMerge(w http.ResponseWriter, r *http.Request) {
	p, m := s.lockMR(w, r)
	if m == nil {
		return
	}
	defer p.mu.Unlock()
	maint := s.world().byToken[simtoken.Maintainer]
	if err := s.doMerge(r.Context(), p, m, maint, "", false); err != nil {
		writeError(w, http.StatusConflict, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, s.mrJSON(r.Context(), p, m, maint, true))
}

// ctlCloseMergeRace arms the close/merge race for the next count close
// calls (-1: until disarmed with count 0).
func (s *Server) ctlCloseMergeRace(w http.ResponseWriter, r *http.Request) {
	in := struct {
		Count int `json:"count"`
	}{Count: 1}
	if !decode(w, r, &in) {
		return
	}
	s.mu.Lock()
	s.closeRace = in.Count
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"close_merge_race": in.Count})
}

// ctlMergeFailures makes the next count merge calls that pass every check
// fail with 422 (406 legacy) and merge_error set to message.
func (s *Server) ctlMergeFailures(w http.ResponseWriter, r *http.Request) {
	in := struct {
		Count   int    `json:"count"`
		Message string `json:"message"`
	}{Count: 1, Message: "Something went wrong during merge pre-receive hook"}
	if !decode(w, r, &in) {
		return
	}
	s.mu.Lock()
	s.mergeFail = nil
	for range in.Count {
		s.mergeFail = append(s.mergeFail, in.Message)
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"merge_failures": in.Count})
}

// ctlSetCheckItems replaces a project's required approval check items.
func (s *Server) ctlSetCheckItems(w http.ResponseWriter, r *http.Request) {
	var in struct {
		CheckItems []CheckItem `json:"check_items"`
	}
	if !decode(w, r, &in) {
		return
	}
	for _, c := range in.CheckItems {
		if c.Key == "" {
			writeError(w, http.StatusBadRequest, "every check item needs a key")
			return
		}
	}
	p, err := s.project(r.PathValue("id"))
	if err != nil {
		writeError(w, http.StatusNotFound, "404 Project Not Found")
		return
	}
	p.mu.Lock()
	p.checkItems = in.CheckItems
	p.mu.Unlock()
	if in.CheckItems == nil {
		in.CheckItems = []CheckItem{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"check_items": in.CheckItems})
}

func (s *Server) ctlListWebhooks(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	out := make([]hookEvent, 0, len(s.events))
	for _, e := range s.events {
		out = append(out, *e)
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// ctlRedeliver resends event seq (0 or absent: the latest) with the same
// Idempotency-Key and X-Gitlab-Event-UUID.
func (s *Server) ctlRedeliver(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Seq int `json:"seq"`
	}
	if !decode(w, r, &in) {
		return
	}
	if !s.redeliver(in.Seq) {
		writeError(w, http.StatusNotFound, "no such event")
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"redelivered": in.Seq})
}

// ctlState dumps the world for people and tests.
func (s *Server) ctlState(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	wd := s.world()
	users := []any{}
	for _, u := range wd.users {
		role := map[role]string{roleReporter: "reporter", roleDeveloper: "developer", roleMaintainer: "maintainer"}[u.Role]
		users = append(users, map[string]any{"id": u.ID, "username": u.Username, "token": u.Token, "role": role})
	}
	projects := []any{}
	for _, p := range wd.projects {
		p.mu.Lock()
		branches, _ := p.repo.branches(ctx)
		mrs := []any{}
		for _, m := range p.mrs {
			approvers := []string{}
			for _, a := range m.Approvals {
				approvers = append(approvers, a.User.Username)
			}
			pipes := []any{}
			for _, id := range m.Pipelines {
				pl := p.pipelines[id]
				pipes = append(pipes, map[string]any{"id": pl.ID, "sha": pl.SHA, "status": pl.Status, "outcome": pl.Outcome, "reason": pl.Reason})
			}
			mrs = append(mrs, map[string]any{
				"iid": m.IID, "title": m.Title, "state": m.State, "source_branch": m.SourceBranch,
				"target_branch": m.TargetBranch, "sha": m.SHA, "detailed_merge_status": s.detailedStatus(ctx, p, m),
				"approved_by": approvers, "merge_error": m.MergeError, "rebase_in_progress": m.RebaseInProgress,
				"merge_commit_sha": m.MergeCommitSHA, "pipelines": pipes,
			})
		}
		items := p.checkItems
		if items == nil {
			items = []CheckItem{}
		}
		projects = append(projects, map[string]any{
			"id": p.ID, "path": p.Path, "default_branch": p.DefaultBranch, "branches": branches,
			"check_items": items, "merge_requests": mrs,
		})
		p.mu.Unlock()
	}
	s.mu.Lock()
	faults := make([]Fault, 0, len(s.faults))
	for _, f := range s.faults {
		faults = append(faults, *f)
	}
	out := map[string]any{
		"settings": viewOf(s.set), "users": users, "projects": projects, "faults": faults,
		"forced_pipelines": len(s.force), "close_merge_race": s.closeRace,
		"merge_failures": len(s.mergeFail), "webhook_events": len(s.events),
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}
