package gitlab

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"changeflow/internal/config"
)

// LoopSettings are approval.maxRetries and approval.backoffMs.
type LoopSettings struct {
	// MaxRetries is how many times a failed approve is retried; negative
	// is treated as 0 (one attempt).
	MaxRetries int
	// Backoff before retry n is Backoff << (n-1), each wait capped at
	// MaxBackoffWait.
	Backoff time.Duration
}

// LoopSettingsFromConfig reads approval.maxRetries and approval.backoffMs.
func LoopSettingsFromConfig(s *config.Snapshot) LoopSettings {
	a := s.Approval()
	return LoopSettings{MaxRetries: a.MaxRetries, Backoff: a.Backoff}
}

// MaxBackoffWait caps one wait of the approval loop, so a large
// approval.maxRetries cannot make a shift overflow or a wait outlive a
// lease.
const MaxBackoffWait = 30 * time.Second

// ApprovalReader reads an MR's approvals as a bot (GitLab has it).
type ApprovalReader interface {
	GetApprovals(ctx context.Context, bot Bot, project string, iid int64) (Approvals, error)
}

// ApproveAsBot gives bot's approval of the MR, safely re-runnable:
//
//   - Before every attempt it reads the approvals with bot's own token;
//     user_has_approved ends the loop with success and no approve call, so
//     an approve whose answer was lost is seen instead of answered by a
//     second, "duplicate" 401. The read fails open: an error is logged and
//     treated as "not approved yet", so the check never adds a failure.
//   - A 401 is ambiguous (duplicate approval, or a bot GitLab will not let
//     approve this MR) and is retried; only a read settles it.
//   - 403 (no approve permission), 400, 404, 409 (sha is no longer the
//     head: the caller must re-read the MR) and 422 (check items, already
//     self-healed once inside the Approver) are deterministic: retrying the
//     same call cannot change them, so the loop stops at once.
//   - No answer and 5xx are retried after Backoff << (attempt-1). A 429
//     ends the loop: the client already waited out what fitted before
//     the deadline, and the caller reschedules for the rest.
//   - After the last failure it reads once more and succeeds if the
//     approval exists; otherwise it returns the last approve error (a
//     *Error with the real status).
//
// Call it once per bot: the two approvals are separate calls, never
// retried as a pair, so a retry never re-approves the other bot.
//
// Waiting: this runs inside one durable workflow step holding a lease, so
// the backoff is a short ctx-aware timer wait here rather than a persisted
// "retry after" (the attempt count would otherwise have to be stored). The
// bound: the total wait is at most Backoff·(2^MaxRetries − 1), each wait
// capped at MaxBackoffWait (defaults: 0.5+1+2 = 3.5 s), and a wait that
// would end after ctx's deadline is not started — the loop goes straight
// to the final read. The caller passes a ctx whose deadline is the lease
// expiry, so the loop never outlives the lease.
func ApproveAsBot(ctx context.Context, r ApprovalReader, a Approver, s LoopSettings, bot Bot, project string, iid int64, sha string, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	log := logger.With("bot", bot, "project", project, "mr", iid)
	maxRetries := max(0, s.MaxRetries)
	var last error
	for attempt := 1; attempt <= maxRetries+1; attempt++ {
		if approvedBy(ctx, r, bot, project, iid, log) {
			if attempt > 1 {
				log.Info("approval found before retrying: an earlier attempt took effect", "attempt", attempt)
			}
			return nil
		}
		err := a.Approve(ctx, bot, project, iid, sha)
		if err == nil {
			return nil
		}
		last = err
		log.Warn("approve failed", "attempt", attempt, "status", StatusOf(err), "err", err)
		// A 429 left here is one the client could not wait out before
		// ctx's deadline (pacing.go): retrying at once would be refused
		// again, so it goes back to the workflow, which waits it out.
		if !retryable(err) || IsRateLimited(err) || attempt > maxRetries || ctx.Err() != nil {
			break
		}
		if !wait(ctx, backoff(s.Backoff, attempt)) {
			break
		}
	}
	// The last attempt has no next attempt to notice that it took effect
	// (or that a 401 was a duplicate): read once more.
	if approvedBy(context.WithoutCancel(ctx), r, bot, project, iid, log) {
		log.Info("approve failed but the approval exists: settled by the final read", "status", StatusOf(last))
		return nil
	}
	return last
}

// approvedBy reads user_has_approved as bot; any read failure is "no".
func approvedBy(ctx context.Context, r ApprovalReader, bot Bot, project string, iid int64, log *slog.Logger) bool {
	ap, err := r.GetApprovals(ctx, bot, project, iid)
	if err != nil {
		log.Warn("reading approvals failed; treating as not approved (fail open)", "err", err)
		return false
	}
	return ap.UserHasApproved
}

// retryable: no answer, 401 (ambiguous), 429, 5xx — and anything that is
// not a *Error.
func retryable(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return true
	}
	switch {
	case e.Status == 0, e.Status == http.StatusUnauthorized, e.Status == http.StatusTooManyRequests, e.Status >= 500:
		return true
	}
	return false
}

// backoff is base << (attempt-1), capped at MaxBackoffWait without
// overflowing.
func backoff(base time.Duration, attempt int) time.Duration {
	if base <= 0 {
		return 0
	}
	d := base
	for i := 1; i < attempt && d < MaxBackoffWait; i++ {
		d *= 2
	}
	return min(d, MaxBackoffWait)
}

// wait is the documented ctx-aware backoff of ApproveAsBot: a timer, not a
// sleep. It reports false, without waiting, when ctx would end first.
func wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
