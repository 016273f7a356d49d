package flow

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"changeflow/internal/approval"
	"changeflow/internal/bindingfile"
	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/gitlab"
	"changeflow/internal/store"
)

// Flow names stored in operation.flow.
const (
	FlowLegacy       = "LEGACY"
	FlowApproveFirst = "APPROVE_FIRST"
)

// DefaultTargetBranch is the config repo's branch MRs go to when
// Env.TargetBranch is empty.
const DefaultTargetBranch = "main"

// Env is what every flow shares: the remote systems, the configuration,
// the logger, the observer and the clock. The composition root builds it
// once; each flow pairs it with the store interface of its own. Config is
// read on every run, so a reload (polling tiers, approval loop settings,
// targets) applies to the next step without a restart.
type Env struct {
	GitLab   gitlab.GitLab
	Approver gitlab.Approver
	Approval approval.Service
	Config   func() *config.Snapshot
	Logger   *slog.Logger
	// TargetBranch is the config repo's branch MRs go to ("" = main).
	TargetBranch string
	// RetryDelay is how long a step waits after a transient failure (no
	// answer, 429, 5xx, open breaker) before it runs again; ≤ 0 means 5 s.
	// The engine's MaxRetries bounds the retries.
	RetryDelay time.Duration
	// Observer is told, after commit and once, what the flows changed
	// (a grant in effect, a withdrawal, a revocation created or done, a
	// renewal's end, a security event): the business metrics. Nil
	// observes nothing.
	Observer Observer
	// RoundTrigger, shared by every flow of a process, schedules a
	// project's batch round when requests join its waiting set (an
	// admission: batch.gatherWindow later; a settled batch: at once). The
	// process's Rounds runs them. Nil: rounds run every batch.interval
	// only.
	RoundTrigger *RoundTrigger
	// Now is the clock an approve-first approval is timed by: the days
	// of the request count from it (store.WorkCallbackParams.ApprovedAt).
	// The application's clock, like the submission's; nil means
	// time.Now. Tests set it to approve "days later".
	Now func() time.Time
}

// CurrentTime is the time by env's clock (Env.Now).
func (env Env) CurrentTime() time.Time {
	if env.Now == nil {
		return time.Now()
	}
	return env.Now()
}

// Log is env's logger; a discarding one when none is set.
func (env Env) Log() *slog.Logger {
	if env.Logger == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return env.Logger
}

// RetryWait is how long a step waits after a transient failure
// (Env.RetryDelay, 5 s when unset).
func (env Env) RetryWait() time.Duration {
	if env.RetryDelay <= 0 {
		return 5 * time.Second
	}
	return env.RetryDelay
}

// MainBranch is the config repo's branch MRs go to (Env.TargetBranch,
// DefaultTargetBranch when unset).
func (env Env) MainBranch() string {
	if env.TargetBranch == "" {
		return DefaultTargetBranch
	}
	return env.TargetBranch
}

// ObserverOrNop is env's Observer, NopObserver when none is set.
func (env Env) ObserverOrNop() Observer {
	if env.Observer == nil {
		return NopObserver{}
	}
	return env.Observer
}

// Project is the GitLab :id of op's config repo: the project stored on
// the operation at submission, else the first gitlab.projects entry.
func (env Env) Project(op store.Operation) (string, error) {
	if op.ProjectID > 0 {
		return strconv.FormatInt(op.ProjectID, 10), nil
	}
	if ps, _ := env.Config().List(config.KeyGitLabProjects); len(ps) > 0 && ps[0] != "" {
		return ps[0], nil
	}
	return "", fmt.Errorf("operation %s has no project and gitlab.projects is empty", op.OperationID)
}

// ProjectID is the numeric project id for the deploy callback match and
// batch admission (0 when the project is configured by path only).
func (env Env) ProjectID(op store.Operation) int64 {
	if op.ProjectID > 0 {
		return op.ProjectID
	}
	p, err := env.Project(op)
	if err != nil {
		return 0
	}
	id, _ := strconv.ParseInt(p, 10, 64)
	return id
}

// Transient says err is worth a RetryAfter: no answer (the outcome may be
// unknown — the next run reads before it writes), 429, 5xx, open breaker.
func Transient(err error) bool {
	return gitlab.IsTransient(err) || gitlab.OutcomeUnknown(err) || gitlab.IsBreakerOpen(err)
}

// RetryLater is the RetryAfter of a transient remote failure. A call its
// client's breaker refused was never made: the retry is unattempted, so
// the time a breaker stays open (breaker.openFor, 30 s) does not spend the
// action's retry budget (workflow.maxRetries × the retry delay, 10 × 5 s)
// — under load the breaker used to open once and every claim while it was
// open counted, and a request stopped in a failure state although GitLab
// had answered its last real call. Real attempts still count, so a
// dependency that stays down still ends in the declared failure state,
// one probe per open interval. Options.MaxClaims still bounds the claims.
//
// A 429 (GitLab's, or this instance's pace with no time left before the
// step's deadline) is a wait, never a failure: the call was not applied,
// so the retry is unattempted too and comes after the wait it asked for
// (Retry-After, capped by the client) — GitLab's limits never spend the
// retry budget or stop a request (docs/workflow.md, "GitLab's limits").
func (env Env) RetryLater(err error, reason string) engine.Outcome {
	if gitlab.IsRateLimited(err) {
		return engine.RetryAfter(max(gitlab.RetryAfterOf(err), time.Second), reason).Unattempted()
	}
	out := engine.RetryAfter(env.RetryWait(), reason)
	if gitlab.IsBreakerOpen(err) || approval.IsBreakerOpen(err) {
		return out.Unattempted()
	}
	return out
}

// RenewalFlipped reports the end of a renewal that flip f records, if it
// records one (domain.RenewalEndOf). Every committed binding move passes
// through exactly one caller of it — the engine's commit hook for a
// step's own move (RegisterSteps), flipped for a confirmation, the
// approval callback for a decision — so a renewal's end is counted once,
// by the transaction that moved it, and never by a retried step or a
// duplicate callback, which move nothing.
func (env Env) RenewalFlipped(ctx context.Context, f store.Flip) {
	if o := domain.RenewalEndOf(f.From, f.To, f.EndedWithoutEffect, domain.StepStatus(f.ToStep)); o != "" {
		env.ObserverOrNop().RenewalEnded(ctx, f.OperationID, o)
	}
}

// Flipped tells the observer of f's success: Revoked for a removal
// confirmed, Validated for a grant in effect.
func (env Env) Flipped(ctx context.Context, f store.Flip) {
	if f.To == domain.BindingRevoked {
		env.ObserverOrNop().Revoked(ctx, f)
		return
	}
	// A renewal in effect is a grant in effect too: both are counted.
	env.RenewalFlipped(ctx, f)
	env.ObserverOrNop().Validated(ctx, f)
}

// RevokedHook is the after-commit hook of an outcome that writes REVOKED.
func (env Env) RevokedHook() engine.FlipHook {
	return func(ctx context.Context, f store.Flip) { env.Flipped(ctx, f) }
}

// Clip shortens s to at most n runes for a reason or a log line.
func Clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// Short is a sha's first 8 characters.
func Short(sha string) string {
	if len(sha) > 8 {
		return sha[:8]
	}
	return sha
}

// ReadBindingFile reads and parses path at ref; a missing file is empty.
func (env Env) ReadBindingFile(ctx context.Context, project, path, ref string) (bindingfile.File, bool, error) {
	f, err := env.GitLab.GetFile(ctx, project, path, ref)
	if gitlab.IsNotFound(err) {
		return bindingfile.File{}, false, nil
	}
	if err != nil {
		return bindingfile.File{}, false, err
	}
	parsed, err := bindingfile.Parse(f.Content)
	return parsed, true, err
}

// RetryOr turns a transient failure into RetryAfter and anything else
// into an error for the safety net.
func (env Env) RetryOr(err error, what string) (engine.Outcome, error) {
	if Transient(err) {
		return env.RetryLater(err, what+": "+err.Error()), nil
	}
	return engine.Outcome{}, fmt.Errorf("%s: %w", what, err)
}

// BatchFiles builds the content of every binding file the batch changes:
// per target file, the file at ref with every member's entry added or
// replaced (several members of one file make one edit). It returns the
// commit's actions, empty when ref already holds every entry.
func (env Env) BatchFiles(ctx context.Context, project, ref string, ops []store.Operation) ([]gitlab.FileAction, error) {
	byFile := map[string][]store.Operation{}
	var files []string
	for _, op := range ops {
		target, ok := env.Config().Target(op.TargetKey)
		if !ok {
			return nil, fmt.Errorf("%s of %s: %w", op.TargetKey, op.OperationID, ErrTargetGone)
		}
		if _, seen := byFile[target.File]; !seen {
			files = append(files, target.File)
		}
		byFile[target.File] = append(byFile[target.File], op)
	}
	slices.Sort(files)
	var actions []gitlab.FileAction
	for _, path := range files {
		file, exists, err := env.ReadBindingFile(ctx, project, path, ref)
		if err != nil {
			return nil, fmt.Errorf("binding file %s: %w", path, err)
		}
		next := file
		for _, op := range byFile[path] {
			if op.Kind == domain.OperationRevoke {
				// Only the grant's own entry goes; an entry changeflow did
				// not write, or one already gone, is left as it is.
				next, _ = next.WithoutEntryOf(op.Subject, op.GrantOperationID)
				continue
			}
			next = next.With(bindingfile.Entry{Subject: op.Subject, ExpiresAt: op.ExpiresAt, OperationID: op.OperationID})
		}
		content := next.Marshal()
		if exists && bytes.Equal(content, file.Marshal()) {
			continue
		}
		action := gitlab.ActionUpdate
		if !exists {
			action = gitlab.ActionCreate
		}
		actions = append(actions, gitlab.FileAction{Action: action, Path: path, Content: string(content)})
	}
	return actions, nil
}

// RemainingMembers drops from ops the revocations a round of this batch
// already settled as nothing to remove (a round that died after that
// transaction, resumed): they are no longer part of the batch's change.
func RemainingMembers(ops []store.Operation) []store.Operation {
	out := ops[:0:0]
	for _, op := range ops {
		if op.Kind == domain.OperationRevoke && domain.StepStatus(op.Step) == domain.StepRevokeAbsent {
			continue
		}
		out = append(out, op)
	}
	return out
}

// ErrTargetGone: a member's target is no longer configured, so its binding
// file is unknown — a person must restore the target or settle the batch.
var ErrTargetGone = errors.New("the target is no longer configured")

// StepEnd is an outcome (or error) that ends a step at once: what a
// step's helper returns when the step should return now.
type StepEnd struct {
	Out engine.Outcome
	Err error
}
