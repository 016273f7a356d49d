package gitlab

import (
	"context"
	"strings"
	"time"
)

// MR states as GitLab names them.
const (
	stateOpened = "opened"
	stateClosed = "closed"
	stateMerged = "merged"
)

// approval is one user's approval of an MR.
type approval struct {
	User *user
	At   time.Time
}

// mergeRequest is one MR. Guarded by its project's mutex.
type mergeRequest struct {
	ID, IID, ProjectID         int64
	Title, Description         string
	SourceBranch, TargetBranch string
	State                      string
	Author                     *user
	SHA                        string // head of the source branch
	MergeCommitSHA             string
	MergeError                 string
	RebaseInProgress           bool
	RemoveSourceBranch         bool
	CreatedAt, UpdatedAt       time.Time
	MergedAt, ClosedAt         time.Time
	MergedBy, ClosedBy         *user
	Approvals                  []approval
	Pipelines                  []int64 // ids, oldest first
	Force                      *pipelineForce

	// Mergeability is computed lazily, like GitLab's asynchronous check:
	// checkStart is when the MR (or its target) last changed; the check
	// result is cached for the (head, target head) pair in checkKey.
	checkStart time.Time
	checkKey   string
	conflict   bool
}

func (m *mergeRequest) draft() bool {
	t := strings.ToLower(strings.TrimSpace(m.Title))
	for _, p := range []string{"draft:", "[draft]", "(draft)", "draft "} {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

func (m *mergeRequest) approvedBy(u *user) bool {
	for _, a := range m.Approvals {
		if a.User.ID == u.ID {
			return true
		}
	}
	return false
}

// markUnchecked restarts the asynchronous mergeability check.
func (m *mergeRequest) markUnchecked(now time.Time) {
	m.checkStart = now
	m.checkKey = ""
}

// mergeStatus returns GitLab's (deprecated) merge_status: unchecked and
// checking while the asynchronous check runs, then can_be_merged or
// cannot_be_merged.
func (s *Server) mergeStatus(ctx context.Context, p *project, m *mergeRequest) string {
	if m.State != stateOpened {
		if m.conflict {
			return "cannot_be_merged"
		}
		return "can_be_merged"
	}
	delay := s.settings().MergeabilityDelay
	el := s.now().Sub(m.checkStart)
	switch {
	case el < delay/2:
		return "unchecked"
	case el < delay:
		return "checking"
	}
	target, err := p.repo.branchHead(ctx, m.TargetBranch)
	if err != nil || target == "" {
		return "cannot_be_merged"
	}
	if key := m.SHA + ".." + target; key != m.checkKey {
		_, conflict, _, err := p.repo.mergeTree(ctx, target, m.SHA)
		if err != nil {
			s.log.Warn("mergeability check", "mr", m.IID, "err", err)
			return "checking"
		}
		m.conflict, m.checkKey = conflict, key
	}
	if m.conflict {
		return "cannot_be_merged"
	}
	return "can_be_merged"
}

// detailedStatus returns detailed_merge_status, in GitLab's order of checks.
func (s *Server) detailedStatus(ctx context.Context, p *project, m *mergeRequest) string {
	if m.State != stateOpened {
		return "not_open"
	}
	if m.draft() {
		return "draft_status"
	}
	switch ms := s.mergeStatus(ctx, p, m); ms {
	case "unchecked", "checking":
		return ms
	case "cannot_be_merged":
		return "conflict"
	}
	if m.RebaseInProgress {
		return "checking"
	}
	hp := p.headPipeline(m)
	if hp == nil {
		return "ci_must_pass"
	}
	switch hp.Status {
	case pipeCreated, pipePending, pipeRunning:
		return "ci_still_running"
	case pipeSuccess:
	default:
		return "ci_must_pass"
	}
	if len(m.Approvals) < s.settings().ApprovalsRequired {
		return "not_approved"
	}
	return "mergeable"
}

// committerEmails returns the author emails of the MR's own commits, for
// the "committers cannot approve" rule.
func (p *project) committerEmails(ctx context.Context, m *mergeRequest) []string {
	target, err := p.repo.branchHead(ctx, m.TargetBranch)
	if err != nil || target == "" || m.SHA == "" {
		return nil
	}
	base, err := p.repo.mergeBase(ctx, target, m.SHA)
	if err != nil {
		return nil
	}
	emails, _ := p.repo.authorEmails(ctx, base, m.SHA)
	return emails
}

// openMRFor returns the open MR whose source is branch, if any.
func (p *project) openMRFor(branch string) *mergeRequest {
	for _, m := range p.mrs {
		if m.State == stateOpened && m.SourceBranch == branch {
			return m
		}
	}
	return nil
}

// branchMoved updates every MR a branch move affects: MRs from the branch
// get the new head, a new pipeline and (unless kept) lose their approvals;
// MRs into it restart their mergeability check. rebase marks a move made by
// the rebase endpoint, which keeps approvals; skipCI creates no pipeline.
func (s *Server) branchMoved(ctx context.Context, p *project, branch, head string, by *user, rebase, skipCI bool) {
	now := s.now()
	for _, m := range p.mrs {
		if m.State != stateOpened {
			continue
		}
		if m.TargetBranch == branch {
			m.markUnchecked(now)
		}
		if m.SourceBranch == branch && m.SHA != head {
			old := m.SHA
			m.SHA = head
			m.UpdatedAt = now
			m.markUnchecked(now)
			if !rebase && !s.settings().KeepApprovalsOnPush {
				m.Approvals = nil
			}
			if !skipCI {
				s.startPipeline(ctx, p, m, old)
			}
			s.mrHook(ctx, p, m, "update", by, old)
		}
	}
}
