package gitlab

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Pipeline statuses used by the simulator (a subset of GitLab's).
const (
	pipeCreated  = "created"
	pipePending  = "pending"
	pipeRunning  = "running"
	pipeSuccess  = "success"
	pipeFailed   = "failed"
	pipeCanceled = "canceled"
)

// Forced pipeline outcomes (control API).
const (
	outcomeRule  = "rule"  // decided by the YAML rule (the default)
	outcomePass  = "pass"  // success
	outcomeFail  = "fail"  // failed
	outcomeNever = "never" // stays running forever
)

// pipelineForce overrides the outcome of pipelines. Delay > 0 replaces the
// running time.
type pipelineForce struct {
	Outcome string        `json:"outcome"`
	Delay   time.Duration `json:"delay"`
	Count   int           `json:"count,omitempty"` // for "next N pipelines"
}

// pipeline is one check pipeline of an MR head.
type pipeline struct {
	ID, IID, ProjectID int64
	MRIID              int64
	SHA, BeforeSHA     string
	Ref                string
	Status             string
	Outcome            string // what it will finish as: pass, fail or never
	Reason             string // why the rule failed, for the state dump
	Duration           time.Duration
	User               *user
	CreatedAt          time.Time
	UpdatedAt          time.Time
	StartedAt          time.Time
	FinishedAt         time.Time
	epoch              int // bumps on reschedule; stale timers see a different epoch
}

func (pl *pipeline) terminal() bool {
	switch pl.Status {
	case pipeSuccess, pipeFailed, pipeCanceled:
		return true
	}
	return false
}

func (p *project) headPipeline(m *mergeRequest) *pipeline {
	for i := len(m.Pipelines) - 1; i >= 0; i-- {
		if pl := p.pipelines[m.Pipelines[i]]; pl != nil && pl.SHA == m.SHA {
			return pl
		}
	}
	return nil
}

// startPipeline creates the check pipeline for the MR's current head and
// schedules its transitions, and returns it. Over the project's
// pipeline_rate_per_minute it creates none and returns nil (the push that
// asked for it stands, as on gitlab.com). Caller holds p.mu.
func (s *Server) startPipeline(ctx context.Context, p *project, m *mergeRequest, before string) *pipeline {
	if ok, _ := s.pipelineAllowed(p); !ok {
		return nil
	}
	now := s.now()
	s.mu.Lock()
	s.w.nextPipeID++
	id := s.w.nextPipeID
	set := s.set
	force := m.Force
	if force == nil && len(s.force) > 0 {
		f := s.force[0]
		force = &f
		s.force[0].Count--
		if s.force[0].Count <= 0 {
			s.force = s.force[1:]
		}
	}
	s.mu.Unlock()
	p.nextPipeIID++
	pl := &pipeline{
		ID: id, IID: p.nextPipeIID, ProjectID: p.ID, MRIID: m.IID,
		SHA: m.SHA, BeforeSHA: before, Ref: m.SourceBranch, Status: pipeCreated,
		Duration: set.PipelineDuration, User: m.Author, CreatedAt: now, UpdatedAt: now,
	}
	if force != nil && force.Outcome != outcomeRule && force.Outcome != "" {
		pl.Outcome = force.Outcome
		if force.Delay > 0 {
			pl.Duration = force.Delay
		}
	} else {
		if force != nil && force.Delay > 0 {
			pl.Duration = force.Delay
		}
		pl.Outcome, pl.Reason = outcomePass, ""
		if reason := s.checkRule(ctx, p, m); reason != "" {
			pl.Outcome, pl.Reason = outcomeFail, reason
		}
	}
	p.pipelines[id] = pl
	m.Pipelines = append(m.Pipelines, id)
	s.pipelineHook(ctx, p, pl)
	s.schedulePipeline(p, pl, set.PipelineStartDelay)
	return pl
}

// schedulePipeline arms the timers that move pl to running after start and
// to its outcome after its duration.
func (s *Server) schedulePipeline(p *project, pl *pipeline, start time.Duration) {
	pl.epoch++
	epoch := pl.epoch
	step := func(fn func()) func() {
		return func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.dead || pl.epoch != epoch || pl.terminal() {
				return
			}
			fn()
		}
	}
	if pl.Status == pipeCreated || pl.Status == pipePending {
		s.sched.after(start, step(func() {
			pl.Status, pl.StartedAt, pl.UpdatedAt = pipeRunning, s.now(), s.now()
			s.pipelineHook(s.ctx, p, pl)
		}))
	} else {
		start = 0
	}
	if pl.Outcome == outcomeNever {
		return
	}
	s.sched.after(start+pl.Duration, step(func() {
		now := s.now()
		if pl.StartedAt.IsZero() {
			pl.StartedAt = now
		}
		pl.Status, pl.FinishedAt, pl.UpdatedAt = pipeSuccess, now, now
		if pl.Outcome == outcomeFail {
			pl.Status = pipeFailed
		}
		s.pipelineHook(s.ctx, p, pl)
	}))
}

// forcePipelines applies an override to an MR: its head pipeline, if not
// finished, is rescheduled with the new outcome, and later pipelines of the
// MR use it too. Caller holds p.mu.
func (s *Server) forcePipelines(p *project, m *mergeRequest, f pipelineForce) {
	if f.Outcome == outcomeRule || f.Outcome == "" {
		m.Force = nil
	} else {
		m.Force = &f
	}
	hp := p.headPipeline(m)
	if hp == nil || hp.terminal() || m.Force == nil {
		return
	}
	hp.Outcome = f.Outcome
	hp.Duration = s.settings().PipelineDuration
	if f.Delay > 0 {
		hp.Duration = f.Delay
	}
	s.schedulePipeline(p, hp, s.settings().PipelineStartDelay)
}

// checkRule is the check pipeline's job: every changed *.yaml file under
// bindings/ must parse as YAML and be a list whose entries each have a
// non-empty subject and expiresAt. It returns why it fails, or "".
//
// The check is the pipeline's work, not the request's: it runs inside the
// API call that created the MR or pushed its head, but a client that gives
// up on that call (its deadline, a shutdown) must not fail the pipeline —
// real GitLab's jobs do not depend on the HTTP request that triggered them.
// With the request's context, git was killed mid-check and the pipeline
// failed as "target branch missing" or "no merge base".
func (s *Server) checkRule(ctx context.Context, p *project, m *mergeRequest) string {
	ctx = context.WithoutCancel(ctx)
	target, err := p.repo.branchHead(ctx, m.TargetBranch)
	if err != nil || target == "" {
		return "target branch missing"
	}
	base, err := p.repo.mergeBase(ctx, target, m.SHA)
	if err != nil {
		return "no merge base"
	}
	files, err := p.repo.diffNames(ctx, base, m.SHA)
	if err != nil {
		return err.Error()
	}
	for _, f := range files {
		if f.Status == "D" || !strings.HasPrefix(f.Path, "bindings/") {
			continue
		}
		if ext := path.Ext(f.Path); ext != ".yaml" && ext != ".yml" {
			continue
		}
		data, _, ok, err := p.repo.readFile(ctx, m.SHA, f.Path)
		if err != nil || !ok {
			return fmt.Sprintf("%s: unreadable", f.Path)
		}
		if reason := checkBindingsYAML(data); reason != "" {
			return f.Path + ": " + reason
		}
	}
	return ""
}

func checkBindingsYAML(data []byte) string {
	if len(strings.TrimSpace(string(data))) == 0 {
		return "empty file, want a YAML list (use [] for none)"
	}
	var entries []map[string]any
	if err := yaml.Unmarshal(data, &entries); err != nil {
		return "not a YAML list of mappings: " + err.Error()
	}
	for i, e := range entries {
		for _, k := range []string{"subject", "expiresAt"} {
			v, ok := e[k]
			if !ok || v == nil || strings.TrimSpace(fmt.Sprint(v)) == "" {
				return fmt.Sprintf("entry %d: %s is missing", i, k)
			}
		}
	}
	return ""
}
