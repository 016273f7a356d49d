package workflow

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"changeflow/internal/approval"
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
// Deps.TargetBranch is empty.
const DefaultTargetBranch = "main"

// Deps are what the business steps and the callback sink need. The
// composition root builds them once; Config is read on every run, so a
// reload (polling tiers, approval loop settings, targets) applies to the
// next step without a restart.
type Deps struct {
	Store    *store.Store
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
	// RoundTrigger, shared by every Deps copy of a process, schedules a
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

// now is d's clock (Deps.Now).
func (d Deps) now() time.Time {
	if d.Now == nil {
		return time.Now()
	}
	return d.Now()
}

// renewalFlipped reports the end of a renewal that flip f records, if it
// records one (domain.RenewalEndOf). Every committed binding move passes
// through exactly one caller of it — the engine's commit hook for a
// step's own move (RegisterSteps), flipped for a confirmation, the
// approval callback for a decision — so a renewal's end is counted once,
// by the transaction that moved it, and never by a retried step or a
// duplicate callback, which move nothing.
func (d Deps) renewalFlipped(ctx context.Context, f store.Flip) {
	if o := domain.RenewalEndOf(f.From, f.To, f.EndedWithoutEffect, domain.StepStatus(f.ToStep)); o != "" {
		d.observer().RenewalEnded(ctx, f.OperationID, o)
	}
}

// flipped tells the observer of f's success: Revoked for a removal
// confirmed, Validated for a grant in effect.
func (d Deps) flipped(ctx context.Context, f store.Flip) {
	if f.To == domain.BindingRevoked {
		d.observer().Revoked(ctx, f)
		return
	}
	// A renewal in effect is a grant in effect too: both are counted.
	d.renewalFlipped(ctx, f)
	d.observer().Validated(ctx, f)
}

// revokedHook is the after-commit hook of an outcome that writes REVOKED.
func (d Deps) revokedHook() engine.FlipHook {
	return func(ctx context.Context, f store.Flip) { d.flipped(ctx, f) }
}

func (d Deps) logger() *slog.Logger {
	if d.Logger == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return d.Logger
}

func (d Deps) retryDelay() time.Duration {
	if d.RetryDelay <= 0 {
		return 5 * time.Second
	}
	return d.RetryDelay
}

func (d Deps) targetBranch() string {
	if d.TargetBranch == "" {
		return DefaultTargetBranch
	}
	return d.TargetBranch
}

// project is the GitLab :id of op's config repo: the project stored on
// the operation at submission, else the first gitlab.projects entry.
func (d Deps) project(op store.Operation) (string, error) {
	if op.ProjectID > 0 {
		return strconv.FormatInt(op.ProjectID, 10), nil
	}
	if ps, _ := d.Config().List(config.KeyGitLabProjects); len(ps) > 0 && ps[0] != "" {
		return ps[0], nil
	}
	return "", fmt.Errorf("operation %s has no project and gitlab.projects is empty", op.OperationID)
}

// projectID is the numeric project id for the deploy callback match and
// batch admission (0 when the project is configured by path only).
func (d Deps) projectID(op store.Operation) int64 {
	if op.ProjectID > 0 {
		return op.ProjectID
	}
	p, err := d.project(op)
	if err != nil {
		return 0
	}
	id, _ := strconv.ParseInt(p, 10, 64)
	return id
}

// transient says err is worth a RetryAfter: no answer (the outcome may be
// unknown — the next run reads before it writes), 429, 5xx, open breaker.
func transient(err error) bool {
	return gitlab.IsTransient(err) || gitlab.OutcomeUnknown(err) || gitlab.IsBreakerOpen(err)
}

// retryLater is the RetryAfter of a transient remote failure. A call its
// client's breaker refused was never made: the retry is unattempted, so
// the time a breaker stays open (breaker.openFor, 30 s) does not spend the
// action's retry budget (workflow.maxRetries × the retry delay, 10 × 5 s)
// — under load the breaker used to open once and every claim while it was
// open counted, and a request stopped in a failure state although GitLab
// had answered its last real call. Real attempts still count, so a
// dependency that stays down still ends in the declared failure state,
// one probe per open interval. Options.MaxClaims still bounds the claims.
func (d Deps) retryLater(err error, reason string) engine.Outcome {
	out := engine.RetryAfter(d.retryDelay(), reason)
	if gitlab.IsBreakerOpen(err) || approval.IsBreakerOpen(err) {
		return out.Unattempted()
	}
	return out
}

// Declarations of the business steps: the state the safety net
// leaves on an error or panic, and on a pool refusal.
var (
	createDecl = engine.Declaration{
		OnError:  engine.Failure{Step: domain.StepCreateFailed, Binding: domain.BindingCreateFailed},
		OnReject: engine.Failure{Step: domain.StepCreatePoolRejected, Binding: domain.BindingCreateFailed},
	}
	approvalDecl = engine.Declaration{
		OnError:  engine.Failure{Step: domain.StepCreateApprovalFailed, Binding: domain.BindingCreateFailed},
		OnReject: engine.Failure{Step: domain.StepCreatePoolRejected, Binding: domain.BindingCreateFailed},
	}
	approveDecl = engine.Declaration{
		OnError:  engine.Failure{Step: domain.StepHandleApproveFailed, Binding: domain.BindingHandleFailed},
		OnReject: engine.Failure{Step: domain.StepHandlePoolRejected, Binding: domain.BindingHandleFailed},
	}
	mergeDecl = engine.Declaration{
		OnError:  engine.Failure{Step: domain.StepHandleMergeFailed, Binding: domain.BindingHandleFailed},
		OnReject: engine.Failure{Step: domain.StepHandlePoolRejected, Binding: domain.BindingHandleFailed},
	}
	closeDecl = engine.Declaration{
		OnError: engine.Failure{Step: domain.StepCloseFailed},
	}
	// withdrawDecl: the upstream half of a withdrawal that kept failing
	// stops in CLOSE_FAILED with the action kept, for an operator's
	// retrigger; the binding stays where the withdrawal left it.
	withdrawDecl = engine.Declaration{
		OnError: engine.Failure{Step: domain.StepCloseFailed},
	}
)

// RegisterSteps registers every business step of the single-request MR
// lifecycle (both flows) on e.
func RegisterSteps(e *engine.Engine, d Deps) {
	e.Register(ActionCreateMR, engine.StepFunc{Decl: createDecl, Fn: d.createMR})
	e.Register(ActionPollPipeline, engine.StepFunc{Decl: createDecl, Fn: d.pollPipeline})
	e.Register(ActionSubmitApproval, engine.StepFunc{Decl: approvalDecl, Fn: d.submitApproval})
	e.Register(ActionPollApproval, engine.StepFunc{Decl: pollApprovalDecl, Fn: d.pollApproval})
	e.Register(ActionApprove, engine.StepFunc{Decl: approveDecl, Fn: d.approve})
	e.Register(ActionMerge, engine.StepFunc{Decl: mergeDecl, Fn: d.merge})
	e.Register(ActionPollRebase, engine.StepFunc{Decl: mergeDecl, Fn: d.pollRebase})
	e.Register(ActionCloseMR, engine.StepFunc{Decl: closeDecl, Fn: d.closeMR})
	e.Register(ActionRegenerate, engine.StepFunc{Decl: mergeDecl, Fn: d.regenerate})
	e.Register(ActionWithdraw, engine.StepFunc{Decl: withdrawDecl, Fn: d.withdraw})
	e.Register(ActionRebuild, engine.StepFunc{Decl: mergeDecl, Fn: d.rebuild})
	// A step's own binding move that ends a renewal without effect (a
	// polled rejection, its MR closed, a withdrawal); a renewal taking
	// effect is never a step's own move but its confirmation's, counted
	// in flipped — so no move is counted twice.
	e.OnCommit(func(ctx context.Context, c engine.Committed) {
		if c.Flip != nil && c.Flip.EndedWithoutEffect {
			d.renewalFlipped(ctx, *c.Flip)
		}
	})
}

// renewalsCut reports the renewals cut off in the revocations created: a
// candidate read with its renewal (store.ExpiredRenewals, or
// a give-back's while the renewal waited) whose revocation this call
// created had its renewal closed in the same transaction — EXPIRED for
// the expiry's cut (RENEW_EXPIRED), CLOSED for a give-back's or an
// operator's (RENEW_REVOKED: ended without effect; the access is being
// removed for another reason than its expiry). A revocation another
// caller created first is not in created, so each cut is counted once, by
// the transaction that made it.
func (d Deps) renewalsCut(ctx context.Context, cands []store.RevocationCandidate, created []store.RevocationCreated, reason domain.RevokeReason) {
	if len(created) == 0 {
		return
	}
	outcome := domain.RenewalExpired
	if reason != domain.RevokeExpired {
		outcome = domain.RenewalClosed
	}
	renewal := map[string]string{}
	for _, c := range cands {
		if c.Renewal != "" {
			renewal[c.GrantOperationID] = c.Renewal
		}
	}
	for _, c := range created {
		if r, ok := renewal[c.GrantOperationID]; ok {
			d.observer().RenewalEnded(ctx, r, outcome)
		}
	}
}
