package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/store"
)

// writeContext bounds an outcome write. It does not derive from the run
// context: an outcome reached as the engine stops is still recorded.
func (e *Engine) writeContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// execute runs one claimed item through its step and the safety net.
func (e *Engine) execute(it store.WorkItem) {
	op := it.Operation
	e.mu.Lock()
	step := e.steps[op.NextAction]
	decl := e.decl[op.NextAction]
	e.mu.Unlock()
	wctx, wcancel := e.writeContext()
	defer wcancel()
	if step == nil {
		// An instance without this action (an older binary in a rolling
		// deploy) gives the row back for one that has it.
		e.release(wctx, it, "no step registered for action "+op.NextAction)
		return
	}
	// The lease the claim took: its expiry minus its start, both DB clock.
	lease := op.LeaseExpiresAt.Sub(op.UpdatedAt)
	if lease <= 0 || lease > e.lease() {
		lease = e.lease()
	}
	deadline := time.Now().Add(lease - lease/10)
	ctx, cancel := context.WithDeadline(e.runCtx, deadline)
	defer cancel()
	w := Work{Operation: op, Action: op.NextAction, Attempt: op.Attempts, Now: e.o.Clock.Now(), Deadline: deadline}
	w.progress = func(ctx context.Context, t Transition) error {
		_, err := e.o.Store.WorkComplete(ctx, store.WorkCompleteParams{
			OperationID: op.OperationID, Lease: it.Lease, Step: int(t.Step), Binding: t.Binding,
			KeepLease: true, Fields: t.Fields, Actor: e.o.Owner, Note: t.Note,
		})
		return err
	}

	out, safety, ok := e.outcome(ctx, step, decl, w)
	if !ok {
		// Stopping: the step was cancelled, not failed. Give it back.
		e.release(wctx, it, "instance stopped")
		return
	}
	e.record(wctx, deadline, it, decl, out, safety)
}

// outcome runs w's step, unless the action was claimed too often, and
// says what the run comes to: the step's own outcome, a retry for a run
// cut short by its deadline or a busy database, or (safety true) the
// declared failure or the step's answer to its exhausted retries. ok is
// false when the engine is stopping and cancelled the step: nothing is
// to be recorded.
func (e *Engine) outcome(ctx context.Context, step Step, decl Declaration, w Work) (out Outcome, safety, ok bool) {
	var err error
	exhausted := ""
	if w.Operation.Attempts > e.o.MaxClaims {
		exhausted = fmt.Sprintf("gave up after %d claims of %s (crash loop or endless poll)", w.Operation.Attempts, w.Action)
	} else {
		out, err = run(ctx, step, w)
	}
	if err != nil && e.runCtx.Err() != nil {
		return Outcome{}, false, false
	}
	if err != nil && errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		// The step ran out of its lease's deadline while waiting on a
		// dependency (a remote system queueing its writes, a busy
		// connection pool): that says nothing about the operation, so it
		// is a retry — the same thing a crash and another instance's
		// resume would do, only sooner — and steps look before they write,
		// so the rerun is safe. The retry bound below still applies.
		out, err = RetryAfter(0, "step ran out of its lease deadline: "+err.Error()), nil
	}
	if err != nil && errors.Is(err, domain.ErrBusy) {
		// The database was busy or unavailable while the step ran — a
		// lock wait, a Galera node lost mid-step (1047, a cut connection:
		// store.translate's ErrBusy): that says nothing about the
		// operation either, so it is a retry, bounded like any other. It
		// used to be the declared failure, which a step cannot always take
		// from where its row stands (the transition table refuses it): the
		// row then stopped with what it held still held (seen when a
		// Galera node was killed). A second's pause lets a failover finish
		// before the rerun.
		out, err = RetryAfter(time.Second, "database busy: "+err.Error()), nil
	}
	if err != nil {
		if d, ok := waitFor(err); ok {
			// A dependency asked to be called later (a rate limit: GitLab's
			// 429) and did nothing with the call: that is a wait, not the
			// declared failure, and like a breaker's refusal it spends no
			// retry budget — whichever path of the step let it through.
			out, err = RetryAfter(d, "waiting out a rate limit: "+err.Error()).Unattempted(), nil
		}
	}
	if exhausted == "" && err == nil && out.kind == OutcomeRetry && !out.unattempted && w.Attempt > e.o.MaxRetries {
		exhausted = fmt.Sprintf("gave up after %d attempts: %s", w.Attempt, out.reason)
	}
	if exhausted != "" {
		out, safety = e.exhausted(ctx, decl, w, exhausted)
	} else if err != nil {
		out, safety = Fail(decl.OnError.Step, decl.OnError.Binding, err.Error()), true
	} else if out.kind == 0 {
		out, safety = Fail(decl.OnError.Step, decl.OnError.Binding, "step returned no outcome"), true
	}
	return out, safety, true
}

// record writes a run's outcome under its lease and, once committed, runs
// the hooks. An outcome the table refuses is replaced by the declared
// failure; one whose lease is gone is dropped.
func (e *Engine) record(wctx context.Context, deadline time.Time, it store.WorkItem, decl Declaration, out Outcome, safety bool) {
	op := it.Operation
	res, err := e.complete(wctx, deadline, e.params(it, out, safety))
	if errors.Is(err, domain.ErrIllegalTransition) && !safety {
		// The step asked for a move the table refuses: a bug in the step.
		// Its declared failure is written instead.
		reason := err.Error()
		out, safety = Fail(decl.OnError.Step, decl.OnError.Binding, reason), true
		res, err = e.o.Store.WorkComplete(wctx, e.params(it, out, safety))
	}
	switch {
	case errors.Is(err, domain.ErrPreempted):
		e.log.Info("workflow: outcome dropped, lease lost", "operation", op.OperationID, "action", op.NextAction)
		return
	case errors.Is(err, domain.ErrIllegalTransition):
		// Even the declared failure is illegal from where the row is now
		// (another writer moved it): stop the action, keep the state.
		res, err = e.o.Store.WorkComplete(wctx, store.WorkCompleteParams{
			OperationID: op.OperationID, Lease: it.Lease, KeepAction: true, LastError: err.Error(), Actor: e.o.Owner,
		})
	}
	if err != nil {
		// The database is unreachable: the lease expires and the action
		// runs again (steps are safe to run twice).
		e.log.Error("workflow: record outcome", "operation", op.OperationID, "action", op.NextAction, "err", err)
		return
	}
	e.committed(wctx, it, out.kind, res, safety, out.reason, out.hooks)
}

// Pauses between writes of one outcome that the database answered busy.
const (
	completeBusyPause    = 50 * time.Millisecond
	completeBusyPauseMax = time.Second
)

// complete writes a run's outcome (store.WorkComplete), again while the
// database answers busy (ErrBusy: SQLite's write lock still held after its
// busy_timeout, a MariaDB lock wait timeout, a cut connection) and the
// lease's deadline has not passed. Dropping the write instead, as before,
// left the row leased until the lease expired and then ran the step again:
// a step that had done its work ran twice (safe — steps look before they
// write — but seen as TestTwoEnginesRunEachOperationExactlyOnce failing
// under a load of 20, where 200 commits of two engines queue for SQLite's
// one write lock), and the operation waited a whole lease for nothing. The
// write is guarded by the lease, so a retry after a commit that did land
// but answered an error finds the lease gone (ErrPreempted: the outcome is
// dropped, as it would have been), and past the deadline another instance
// may hold the row: the last error is returned, as before.
func (e *Engine) complete(ctx context.Context, deadline time.Time, p store.WorkCompleteParams) (store.WorkResult, error) {
	pause := completeBusyPause
	for {
		res, err := e.o.Store.WorkComplete(ctx, p)
		if !errors.Is(err, domain.ErrBusy) || time.Now().Add(pause).After(deadline) {
			return res, err
		}
		e.log.Warn("workflow: recording the outcome found the database busy; writing it again",
			"operation", p.OperationID, "pause", pause, "err", err)
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return res, err
		case <-t.C:
		}
		pause = min(2*pause, completeBusyPauseMax)
	}
}

// exhausted is the outcome of a run whose retries ran out (reason says
// which bound): the step's OnExhausted answer when it declares one and
// that answer ends the retrying, else the declared failure (safety true).
// The hook runs under the step's context; a context already spent makes
// its reads fail, and a hook must answer that too (keep its row's state
// and schedule the repair, say).
func (e *Engine) exhausted(ctx context.Context, decl Declaration, w Work, reason string) (Outcome, bool) {
	declared := Fail(decl.OnError.Step, decl.OnError.Binding, reason)
	if decl.OnExhausted == nil {
		return declared, true
	}
	out, err := RunRecovered(ctx, w, func(ctx context.Context, w Work) (Outcome, error) {
		return decl.OnExhausted(ctx, w, reason)
	})
	switch {
	case err != nil:
		e.log.Warn("workflow: answering exhausted retries failed; the declared failure stands",
			"operation", w.Operation.OperationID, "action", w.Action, "err", err)
		return Fail(decl.OnError.Step, decl.OnError.Binding, reason+"; answering it: "+err.Error()), true
	case out.kind == OutcomeRetry || out.kind == OutcomeWait || out.kind == 0:
		return declared, true
	}
	e.log.Warn("workflow: retries exhausted, answered by the step", "operation", w.Operation.OperationID,
		"action", w.Action, "outcome", out.kind.String(), "reason", reason)
	if out.reason == "" {
		out.reason = reason
	}
	return out, false
}

// run calls the step, turning a panic into an error (the safety net).
func run(ctx context.Context, s Step, w Work) (Outcome, error) {
	return RunRecovered(ctx, w, s.Run)
}

// RunRecovered calls fn, turning a panic into an error, as the engine
// does around every step. A step that calls another step's function
// itself uses it, so that a panic there is answered by the caller, which
// can still act on it, rather than by the engine's declared failure.
func RunRecovered(ctx context.Context, w Work, fn func(context.Context, Work) (Outcome, error)) (out Outcome, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = Outcome{}, fmt.Errorf("step panicked: %v\n%s", r, debug.Stack())
		}
	}()
	return fn(ctx, w)
}

// params turns an outcome into the store write.
func (e *Engine) params(it store.WorkItem, out Outcome, safety bool) store.WorkCompleteParams {
	p := store.WorkCompleteParams{
		OperationID: it.Operation.OperationID, Lease: it.Lease,
		Step: int(out.t.Step), Binding: out.t.Binding, Fields: out.t.Fields,
		Actor: e.o.Owner, Note: out.t.Note, LastError: out.reason,
	}
	if p.Note == "" {
		p.Note = it.Operation.NextAction + ": " + out.kind.String()
	}
	switch out.kind {
	case OutcomeDone:
		p.NextAction = out.next
	case OutcomeWait:
		p.NextAction, p.Delay = it.Operation.NextAction, max(0, out.at.Sub(e.o.Clock.Now()))
	case OutcomeRetry:
		p.NextAction, p.Delay = it.Operation.NextAction, out.delay
		p.Unattempted = out.unattempted
	case OutcomeFail, OutcomeTimedOut:
		p.KeepAction = true
		p.UnlessStopped = safety
	}
	return p
}

// release gives an item back, due again at once, noting why.
func (e *Engine) release(ctx context.Context, it store.WorkItem, why string) {
	e.log.Warn("workflow: release", "operation", it.Operation.OperationID, "action", it.Operation.NextAction, "why", why)
	delay := time.Duration(0)
	if e.runCtx.Err() == nil {
		delay = e.o.Lease // not this instance again at once
	}
	if err := e.o.Store.WorkRelease(ctx, it.Operation.OperationID, it.Lease, delay); err != nil && !errors.Is(err, domain.ErrPreempted) {
		e.log.Error("workflow: release", "operation", it.Operation.OperationID, "err", err)
	}
}

// committed runs the outcome's flip hooks and the engine's hooks, after
// the commit.
func (e *Engine) committed(ctx context.Context, it store.WorkItem, kind OutcomeKind, res store.WorkResult, safety bool, reason string, hooks []FlipHook) {
	if res.Flip != nil {
		for _, h := range hooks {
			h(ctx, *res.Flip)
		}
	}
	e.mu.Lock()
	all := e.hooks
	e.mu.Unlock()
	c := Committed{
		OperationID: it.Operation.OperationID, Action: it.Operation.NextAction, Kind: kind,
		FromStep: domain.StepStatus(res.FromStep), ToStep: domain.StepStatus(res.Operation.Step),
		Flip: res.Flip, SafetyNet: safety, Reason: reason,
	}
	for _, h := range all {
		h(ctx, c)
	}
}
