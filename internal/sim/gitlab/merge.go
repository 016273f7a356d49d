package gitlab

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// errMergeConflict means the source no longer merges cleanly into the target.
var errMergeConflict = errors.New("merge conflict")

// rebaseFailed is GitLab's merge_error after a failed rebase.
const rebaseFailed = "Rebase failed. Please rebase locally"

// handleMerge: PUT /projects/:id/merge_requests/:iid/merge [sha,
// should_remove_source_branch, merge_commit_message]. Checks in GitLab's
// order: 401 cannot merge, 409 sha mismatch, 405 not mergeable now (not
// open, draft, unchecked/checking, conflict, pipeline not passed, approvals
// missing), 422 "Branch cannot be merged" with merge_error when the merge
// itself fails (406 with the legacy switch). 200 with the merged MR.
func (s *Server) handleMerge(w http.ResponseWriter, r *http.Request) {
	u := caller(r)
	in, err := readParams(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "400 Bad request - "+err.Error())
		return
	}
	p, m := s.lockMR(w, r)
	if m == nil {
		return
	}
	defer p.mu.Unlock()
	ctx := r.Context()
	if !p.canMergeInto(u, m.TargetBranch) {
		writeError(w, http.StatusUnauthorized, "401 Unauthorized")
		return
	}
	if sha, ok := in.str("sha"); ok && sha != "" && sha != m.SHA {
		writeError(w, http.StatusConflict, "SHA does not match HEAD of source branch: "+m.SHA)
		return
	}
	if st := s.detailedStatus(ctx, p, m); st != "mergeable" {
		writeError(w, http.StatusMethodNotAllowed, "405 Method Not Allowed")
		return
	}
	failStatus := http.StatusUnprocessableEntity
	if s.settings().LegacyMerge406 {
		failStatus = http.StatusNotAcceptable
	}
	if msg := s.takeMergeFailure(); msg != "" {
		m.MergeError = msg
		writeError(w, failStatus, "Branch cannot be merged")
		return
	}
	err = s.doMerge(ctx, p, m, u, in.get("merge_commit_message"), in.boolean("should_remove_source_branch"))
	switch {
	case errors.Is(err, errMergeConflict) || errors.Is(err, errRefMoved):
		m.MergeError = "Merge request is not mergeable"
		writeError(w, failStatus, "Branch cannot be merged")
		return
	case err != nil:
		s.internal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.mrJSON(ctx, p, m, u, false))
}

func (s *Server) takeMergeFailure() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.mergeFail) == 0 {
		return ""
	}
	msg := s.mergeFail[0]
	s.mergeFail = s.mergeFail[1:]
	return msg
}

// doMerge merges m into its target with a real merge commit (merge-tree
// --write-tree, commit-tree, update-ref CAS) and publishes the merge. It
// checks nothing but the Git merge itself, so the control API uses it to
// merge "from outside". Caller holds p.mu.
func (s *Server) doMerge(ctx context.Context, p *project, m *mergeRequest, by *user, msg string, removeSource bool) error {
	if m.State != stateOpened {
		return fmt.Errorf("merge !%d: state %s", m.IID, m.State)
	}
	target, err := p.repo.branchHead(ctx, m.TargetBranch)
	if err != nil {
		return err
	}
	tree, conflict, _, err := p.repo.mergeTree(ctx, target, m.SHA)
	if err != nil {
		return err
	}
	if conflict {
		return errMergeConflict
	}
	if msg == "" {
		msg = fmt.Sprintf("Merge branch '%s' into '%s'\n\n%s\n\nSee merge request %s!%d",
			m.SourceBranch, m.TargetBranch, m.Title, p.Path, m.IID)
	}
	now := s.now()
	commit, err := p.repo.commitTree(ctx, tree, []string{target, m.SHA}, msg, by.sig(now), by.sig(now))
	if err != nil {
		return err
	}
	if err := p.repo.updateRef(ctx, m.TargetBranch, commit, target); err != nil {
		return err
	}
	m.State, m.MergeCommitSHA, m.MergedAt, m.MergedBy, m.MergeError, m.UpdatedAt = stateMerged, commit, now, by, "", now
	if removeSource || m.RemoveSourceBranch {
		if err := p.repo.deleteRef(ctx, m.SourceBranch, m.SHA); err != nil {
			s.log.Warn("remove source branch", "mr", m.IID, "err", err)
		}
	}
	s.branchMoved(ctx, p, m.TargetBranch, commit, by, false, false)
	s.mrHook(ctx, p, m, "merge", by, "")
	ev := MergeEvent{ProjectID: p.ID, MRIID: m.IID, MergeCommitSHA: commit, TargetBranch: m.TargetBranch, MergedAt: now}
	s.mu.Lock()
	subs := append([]func(MergeEvent){}, s.mergeSubs...)
	s.mu.Unlock()
	s.merges.push(func(context.Context) {
		for _, fn := range subs {
			fn(ev)
		}
	})
	return nil
}

// handleRebase: PUT …/rebase [skip_ci] → 202 {"rebase_in_progress": true};
// 403 cannot push to the source branch (or it is gone, or the MR is not
// open); 409 a rebase is already running. The rebase finishes on a timer:
// rebase_in_progress turns false, and merge_error is "Rebase failed.
// Please rebase locally" on conflict.
func (s *Server) handleRebase(w http.ResponseWriter, r *http.Request) {
	u := caller(r)
	in, err := readParams(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "400 Bad request - "+err.Error())
		return
	}
	p, m := s.lockMR(w, r)
	if m == nil {
		return
	}
	defer p.mu.Unlock()
	// A rebase rewrites the source branch: on a protected one it needs
	// push and force push (RebaseService#validate).
	if !p.canPushTo(u, m.SourceBranch, true) || m.State != stateOpened {
		writeError(w, http.StatusForbidden, "403 Forbidden")
		return
	}
	if head, err := p.repo.branchHead(r.Context(), m.SourceBranch); err != nil || head == "" {
		writeError(w, http.StatusForbidden, "403 Forbidden")
		return
	}
	if m.RebaseInProgress {
		writeError(w, http.StatusConflict, "Failed to enqueue the rebase operation, possibly due to a long-lived transaction. Try again later.")
		return
	}
	m.RebaseInProgress, m.MergeError = true, ""
	skipCI := in.boolean("skip_ci")
	s.sched.after(s.settings().RebaseDuration, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.dead || !m.RebaseInProgress {
			return
		}
		s.doRebase(s.ctx, p, m, u, skipCI)
	})
	writeJSON(w, http.StatusAccepted, map[string]any{"rebase_in_progress": true})
}

// doRebase replays the MR's commits onto its target. Caller holds p.mu.
func (s *Server) doRebase(ctx context.Context, p *project, m *mergeRequest, by *user, skipCI bool) {
	m.RebaseInProgress = false
	target, err := p.repo.branchHead(ctx, m.TargetBranch)
	if err != nil || target == "" {
		m.MergeError = rebaseFailed
		return
	}
	head, err := p.repo.branchHead(ctx, m.SourceBranch)
	if err != nil || head == "" {
		m.MergeError = rebaseFailed
		return
	}
	next, conflict, err := p.repo.rebase(ctx, target, head, by.sig(s.now()))
	if err != nil || conflict {
		if err != nil {
			s.log.Warn("rebase", "mr", m.IID, "err", err)
		}
		m.MergeError = rebaseFailed
		return
	}
	if next == head {
		return
	}
	if err := p.repo.updateRef(ctx, m.SourceBranch, next, head); err != nil {
		m.MergeError = rebaseFailed
		return
	}
	s.branchMoved(ctx, p, m.SourceBranch, next, by, true, skipCI)
}

// handleCreateMRPipeline is POST …/merge_requests/:iid/pipelines: a new
// pipeline for the MR's head (201), as GitLab's "create MR pipeline". An
// MR that is not open is GitLab's 405; over pipeline_rate_per_minute the
// answer is 429 with Retry-After and no pipeline is created.
func (s *Server) handleCreateMRPipeline(w http.ResponseWriter, r *http.Request) {
	p, m := s.lockMR(w, r)
	if m == nil {
		return
	}
	defer p.mu.Unlock()
	if m.State != stateOpened {
		writeError(w, http.StatusMethodNotAllowed, "405 Method Not Allowed")
		return
	}
	pl := s.startPipeline(r.Context(), p, m, "")
	if pl == nil {
		set := s.settings()
		now := s.now()
		_, _, reset := s.pipelineRate.peek(strconv.FormatInt(p.ID, 10), now, set.RateWindow)
		writeTooManyPipelines(w, now, reset)
		return
	}
	writeJSON(w, http.StatusCreated, s.pipelineJSON(p, pl))
}

// writeTooManyPipelines is the answer to an API call that would create a
// pipeline over pipeline_rate_per_minute: 429, Retry-After the seconds
// left in the project's window, GitLab's message.
func writeTooManyPipelines(w http.ResponseWriter, now, reset time.Time) {
	w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(now, reset)))
	writeError(w, http.StatusTooManyRequests, "Too many pipelines created in the last minute. Try again later.")
}

// handleMRPipelines: GET …/merge_requests/:iid/pipelines, newest first.
func (s *Server) handleMRPipelines(w http.ResponseWriter, r *http.Request) {
	p, m := s.lockMR(w, r)
	if m == nil {
		return
	}
	defer p.mu.Unlock()
	var list []*pipeline
	for i := len(m.Pipelines) - 1; i >= 0; i-- {
		list = append(list, p.pipelines[m.Pipelines[i]])
	}
	out := []any{}
	for _, pl := range paginate(w, r, list) {
		out = append(out, s.pipelineInfoJSON(p, pl))
	}
	writeJSON(w, http.StatusOK, out)
}

// handleGetPipeline: GET /projects/:id/pipelines/:pipeline_id.
// handleRetryPipeline is POST /projects/:id/pipelines/:pipeline_id/retry:
// a failed or canceled pipeline runs again (the same id, back to pending),
// its outcome decided afresh — by a forced outcome queued for the next
// pipelines, else by the YAML rule on its commit, so a retry of a
// pipeline that failed by force passes. One with nothing to retry
// (running, passed) is refused, 403 as GitLab answers it.
func (s *Server) handleRetryPipeline(w http.ResponseWriter, r *http.Request) {
	p := s.lockProject(w, r)
	if p == nil {
		return
	}
	defer p.mu.Unlock()
	id, _ := strconv.ParseInt(r.PathValue("pipeline"), 10, 64)
	pl := p.pipelines[id]
	if pl == nil {
		writeError(w, http.StatusNotFound, "404 Not found")
		return
	}
	if pl.Status != pipeFailed && pl.Status != pipeCanceled {
		writeError(w, http.StatusForbidden, "403 Forbidden")
		return
	}
	if ok, reset := s.pipelineAllowed(p); !ok {
		writeTooManyPipelines(w, s.now(), reset)
		return
	}
	s.mu.Lock()
	set := s.set
	var force *pipelineForce
	if len(s.force) > 0 {
		f := s.force[0]
		force = &f
		s.force[0].Count--
		if s.force[0].Count <= 0 {
			s.force = s.force[1:]
		}
	}
	s.mu.Unlock()
	pl.Outcome, pl.Reason = outcomePass, ""
	switch {
	case force != nil && force.Outcome != outcomeRule && force.Outcome != "":
		pl.Outcome = force.Outcome
	default:
		if m := p.mr(pl.MRIID); m != nil {
			if reason := s.checkRule(r.Context(), p, m); reason != "" {
				pl.Outcome, pl.Reason = outcomeFail, reason
			}
		}
	}
	now := s.now()
	pl.Status, pl.UpdatedAt, pl.FinishedAt = pipePending, now, time.Time{}
	s.pipelineHook(r.Context(), p, pl)
	s.schedulePipeline(p, pl, set.PipelineStartDelay)
	writeJSON(w, http.StatusCreated, s.pipelineJSON(p, pl))
}

func (s *Server) handleGetPipeline(w http.ResponseWriter, r *http.Request) {
	p := s.lockProject(w, r)
	if p == nil {
		return
	}
	defer p.mu.Unlock()
	id, _ := strconv.ParseInt(r.PathValue("pipeline"), 10, 64)
	pl := p.pipelines[id]
	if pl == nil {
		writeError(w, http.StatusNotFound, "404 Not found")
		return
	}
	writeJSON(w, http.StatusOK, s.pipelineJSON(p, pl))
}
