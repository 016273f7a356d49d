// Package doctor checks changeflow's own deployment: what its
// configuration and the real GitLab say about the things changeflow's
// safety rests on but cannot enforce by itself — secrets that are secret,
// login headers believed only from a real proxy, a `changeflow/*` branch
// namespace only the committer bot may push to, bots holding the roles
// they need, the webhook in place. `changeflow doctor` and
// `GET /ops/checks` run the same Check, so an operator and the console
// see one report.
//
// Each finding has a status and, unless it is ok, what to change. A check
// that cannot be made (GitLab unreachable, a token that may not read a
// setting) is a warning that says so and what to look at by hand, never
// an ok.
package doctor

import (
	"context"
	"time"

	"changeflow/internal/config"
	"changeflow/internal/gitlab"
)

// Status is a finding's verdict.
type Status string

// The statuses, in increasing severity.
const (
	// StatusOK: checked and as it should be.
	StatusOK Status = "ok"
	// StatusWarn: works, but weaker than it should be, or could not be
	// checked.
	StatusWarn Status = "warn"
	// StatusFail: a defence is missing or changeflow cannot work.
	StatusFail Status = "fail"
)

func (s Status) rank() int {
	switch s {
	case StatusFail:
		return 2
	case StatusWarn:
		return 1
	}
	return 0
}

// Finding is one check's result.
type Finding struct {
	// ID names the check, stable across versions: "secrets",
	// "trusted-proxies", "protected-branch", "bot-role", "webhook".
	ID string `json:"id"`
	// Project is the GitLab project the finding is about ("" for the
	// configuration's own checks).
	Project string `json:"project,omitempty"`
	// Subject narrows it further: a configuration key or a bot name.
	Subject string `json:"subject,omitempty"`
	// Status is the verdict.
	Status Status `json:"status"`
	// Title says what was checked, in words.
	Title string `json:"title"`
	// Detail says what was found.
	Detail string `json:"detail"`
	// Fix says what to change; empty when the status is ok.
	Fix string `json:"fix,omitempty"`
}

// Report is every finding of one run, configuration first, then each
// project's.
type Report struct {
	// Status is the worst finding's status.
	Status Status `json:"status"`
	// CheckedAt is when the run started.
	CheckedAt time.Time `json:"checkedAt"`
	Findings  []Finding `json:"findings"`
}

// Options says what to check against.
type Options struct {
	// Snapshot is the configuration checked.
	Snapshot *config.Snapshot
	// Local says the process runs the local profile (--local), where the
	// simulators' published tokens and a trusted loopback are the design.
	Local bool
	// GitLab reads the project settings; nil skips the GitLab checks
	// (reported as a warning).
	GitLab gitlab.DeploymentReader
	// Now stamps the report; nil means time.Now.
	Now func() time.Time
}

// Check runs every check. It does not fail: what it could not check is a
// finding.
func Check(ctx context.Context, o Options) Report {
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	r := Report{CheckedAt: now().UTC()}
	r.Findings = append(r.Findings, ConfigFindings(o.Snapshot, o.Local)...)
	r.Findings = append(r.Findings, gitlabFindings(ctx, o)...)
	r.Status = Worst(r.Findings)
	return r
}

// Worst is the most severe status among fs (ok for none).
func Worst(fs []Finding) Status {
	w := StatusOK
	for _, f := range fs {
		if f.Status.rank() > w.rank() {
			w = f.Status
		}
	}
	return w
}
