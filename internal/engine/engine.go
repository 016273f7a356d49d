package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/store"
)

// Clock is the engine's source of "now" for step timing (Work.Now,
// WaitUntil). Due times are stored relative to the DB clock, so an
// injected clock only shifts what steps see, never the claim order.
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// SystemClock is the wall clock.
func SystemClock() Clock { return systemClock{} }

// Options configure an Engine. Workers, QueueSize and Lease come from
// config.Snapshot.Workflow() at start; a reload does not resize a running
// pool.
type Options struct {
	// Store is the database the engine claims from and writes to.
	Store Store
	// Owner is this instance's id (config Instance().ID); leases name it.
	Owner string
	// Workers is the pool size (workflow.workers); QueueSize the bounded
	// queue for Submit (workflow.queueSize).
	Workers   int
	QueueSize int
	// Lease is how long a claim holds a row (workflow.leaseDuration). A
	// step's context ends a tenth of it earlier, so its outcome can still
	// be written under the lease; steps must finish within that (long
	// waits are WaitUntil, not a long Run).
	Lease time.Duration
	// PollInterval is how often the poller looks for due work when idle
	// (workflow.pollInterval); default one second. Wake polls at once.
	PollInterval time.Duration
	// PollIntervalSource, when set, is read before every idle wait instead
	// of PollInterval, so a config reload applies from the next wait; a
	// non-positive answer falls back to PollInterval. A wait already
	// running keeps its old length unless Wake ends it (serve wakes the
	// engine when the setting changes).
	PollIntervalSource func() time.Duration
	// LeaseSource, when set, is read at every claim instead of Lease
	// (workflow.leaseDuration applies at once on a config reload).
	LeaseSource func() time.Duration
	// MaxRetries bounds RetryAfter per action; beyond it the declared
	// failure is written. Default 10.
	MaxRetries int
	// MaxClaims bounds how often one action is claimed (polls, retries and
	// expired leases together). A claim beyond it writes the declared
	// failure without running the step: a step that kills its process
	// every time (kill -9 loop, OOM) or a poll without a timeout still
	// ends in an explicit state (I8). Default 500, above the default
	// polling tiers' ~130 attempts.
	MaxClaims int
	Clock     Clock
	Logger    *slog.Logger
}

// Committed is what an after-commit hook sees: one outcome the engine
// wrote. Flip is non-nil only when this write flipped the binding (I9).
type Committed struct {
	OperationID string
	Action      string
	Kind        OutcomeKind
	FromStep    domain.StepStatus
	ToStep      domain.StepStatus
	Flip        *store.Flip
	// SafetyNet is true when the state came from the declared failure
	// (an error, a panic, an exhausted retry, a pool refusal).
	SafetyNet bool
	Reason    string
}

// Engine runs registered steps on due operations. Start and Stop may be
// called in any order and more than once.
type Engine struct {
	o     Options
	log   *slog.Logger
	steps map[string]Step
	decl  map[string]Declaration
	hooks []func(ctx context.Context, c Committed)

	mu      sync.Mutex
	started bool
	stopped bool
	cancel  context.CancelFunc
	runCtx  context.Context
	pool    *pool
	done    chan struct{}
	wake    chan struct{}
}

// New returns an engine; register steps and hooks before Start.
func New(o Options) (*Engine, error) {
	switch {
	case o.Store == nil:
		return nil, errors.New("workflow: a store is required")
	case o.Owner == "":
		return nil, errors.New("workflow: an owner (instance id) is required")
	case o.Workers <= 0 || o.QueueSize < 0 || o.Lease <= 0:
		return nil, fmt.Errorf("workflow: workers %d, queue %d, lease %v", o.Workers, o.QueueSize, o.Lease)
	}
	if o.PollInterval <= 0 {
		o.PollInterval = time.Second
	}
	if o.MaxRetries <= 0 {
		o.MaxRetries = 10
	}
	if o.MaxClaims <= 0 {
		o.MaxClaims = 500
	}
	if o.Clock == nil {
		o.Clock = SystemClock()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Engine{o: o, log: o.Logger, steps: map[string]Step{}, decl: map[string]Declaration{},
		wake: make(chan struct{}, 1)}, nil
}

// Register makes s the step of action. Action names are stored in
// operation.next_action (≤ 64 characters): a rename needs a migration of
// in-flight rows. It panics on a duplicate or a step without a declared
// failure, like http.Handle: both are programming errors at wiring time.
func (e *Engine) Register(action string, s Step) {
	e.mu.Lock()
	defer e.mu.Unlock()
	d := s.Declare()
	switch {
	case action == "" || len(action) > 64:
		panic(fmt.Sprintf("workflow: bad action name %q", action))
	case e.steps[action] != nil:
		panic("workflow: action " + action + " registered twice")
	case !d.OnError.Step.Valid():
		panic("workflow: action " + action + " declares no failure step")
	}
	if d.OnReject == (Failure{}) {
		d.OnReject = d.OnError
	}
	e.steps[action], e.decl[action] = s, d
}

// OnCommit adds a hook run after every outcome the engine committed, on
// the worker's goroutine. Metrics and notifications go here and look at
// Committed.Flip.
func (e *Engine) OnCommit(h func(ctx context.Context, c Committed)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.hooks = append(e.hooks, h)
}

// Start starts the pool and the poller. A second Start, or one after
// Stop, does nothing.
func (e *Engine) Start(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.started || e.stopped {
		return nil
	}
	e.started = true
	e.runCtx, e.cancel = context.WithCancel(context.WithoutCancel(ctx))
	e.pool = newPool(e.o.Workers, e.o.QueueSize)
	e.done = make(chan struct{})
	go e.poll(ctx)
	return nil
}

// Stop stops claiming, cancels running steps (their rows are released for
// any instance, not failed) and waits for the workers. Safe twice.
func (e *Engine) Stop() {
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return
	}
	e.stopped = true
	started := e.started
	e.mu.Unlock()
	if !started {
		return
	}
	e.cancel()
	<-e.done
	e.pool.close()
}

// Wake makes the poller look for due work now (after a submission).
func (e *Engine) Wake() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// poll claims due work until Stop or ctx ends.
func (e *Engine) poll(ctx context.Context) {
	defer close(e.done)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-e.runCtx.Done():
			return
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-e.wake:
		}
		n, err := e.RunDue(e.runCtx)
		if err != nil && e.runCtx.Err() == nil {
			e.log.Warn("workflow: claim due work", "err", err)
		}
		next := e.pollInterval()
		if n > 0 {
			next = 0 // there may be more
		}
		timer.Reset(next)
	}
}

// RunDue claims at most as many due rows as the pool has idle workers and
// hands them to the pool; it returns how many it claimed. The poller
// calls it; tests may too.
func (e *Engine) RunDue(ctx context.Context) (int, error) {
	e.mu.Lock()
	p := e.pool
	e.mu.Unlock()
	if p == nil {
		return 0, errors.New("workflow: engine not started")
	}
	free := p.idle()
	if free == 0 {
		return 0, nil
	}
	items, err := e.o.Store.WorkClaimDue(ctx, e.o.Owner, e.lease(), free)
	if err != nil {
		return 0, err
	}
	for _, it := range items {
		e.dispatch(it)
	}
	return len(items), nil
}

// Submit runs operationID's due action now if the pool takes it (the
// async entry). A refusal is persisted as the action's declared
// rejection state before Submit returns, so a poller sees "failed", never
// "processing"; the error then wraps ErrPoolFull. A row that is not due
// or is held elsewhere returns ok false.
func (e *Engine) Submit(ctx context.Context, operationID string) (ok bool, err error) {
	it, ok, err := e.o.Store.WorkClaimOne(ctx, operationID, e.o.Owner, e.lease())
	if err != nil || !ok {
		return false, err
	}
	if !e.dispatch(it) {
		return true, fmt.Errorf("run %s: %w", operationID, ErrPoolFull)
	}
	return true, nil
}

// Claimant is who a caller claims work for when it wants this engine to
// run it at once (RunClaimed): the engine's owner and the lease it would
// take now. ok is false when the engine is not running.
func (e *Engine) Claimant() (owner string, lease time.Duration, ok bool) {
	e.mu.Lock()
	running := e.started && !e.stopped
	e.mu.Unlock()
	return e.o.Owner, e.lease(), running
}

// RunClaimed runs an item the caller claimed for Claimant's owner (in its
// own transaction: a caller that schedules an action claims it there, so
// no poller takes it in between) on the caller's goroutine, outside the
// pool, and returns once its outcome is recorded — exactly as a pooled
// run records it (lease, safety net, hooks). It is for a caller whose
// answer depends on the step's outcome: it can answer from what the step
// found. The step runs under the engine's context and the lease's
// deadline, not the caller's: a caller that gives up does not cut a
// remote write in half.
// When the engine stopped meanwhile, the item is released for any
// instance and false returned.
func (e *Engine) RunClaimed(it store.WorkItem) bool {
	e.mu.Lock()
	running := e.started && !e.stopped
	e.mu.Unlock()
	if !running {
		ctx, cancel := e.writeContext()
		defer cancel()
		e.release(ctx, it, "engine not running")
		return false
	}
	e.execute(it)
	return true
}

// pollInterval is the idle wait before the next look for due work.
func (e *Engine) pollInterval() time.Duration {
	if e.o.PollIntervalSource != nil {
		if d := e.o.PollIntervalSource(); d > 0 {
			return d
		}
	}
	return e.o.PollInterval
}

// PollInterval is the idle wait the poller would use now (for tests and
// diagnostics: it shows which setting reached the engine).
func (e *Engine) PollInterval() time.Duration { return e.pollInterval() }

// lease is the lease for the next claim.
func (e *Engine) lease() time.Duration {
	if e.o.LeaseSource != nil {
		if d := e.o.LeaseSource(); d > 0 {
			return d
		}
	}
	return e.o.Lease
}

// ErrPoolFull is the pool's refusal; the row already shows its failure.
var ErrPoolFull = errors.New("workflow: worker pool full")

// dispatch hands a claimed item to the pool, or persists the refusal.
func (e *Engine) dispatch(it store.WorkItem) bool {
	e.mu.Lock()
	p := e.pool
	e.mu.Unlock()
	if p != nil && p.trySubmit(func() { e.execute(it); e.Wake() }) {
		return true
	}
	e.reject(it)
	return false
}

// reject writes the declared rejection state of a refused item.
func (e *Engine) reject(it store.WorkItem) {
	action := it.Operation.NextAction
	d, ok := e.declaration(action)
	ctx, cancel := e.writeContext()
	defer cancel()
	if !ok {
		e.release(ctx, it, "no step registered for action "+action)
		return
	}
	res, err := e.o.Store.WorkReject(ctx, it.Operation.OperationID, it.Lease,
		int(d.OnReject.Step), d.OnReject.Binding, "worker pool full", e.o.Owner)
	if err != nil {
		e.log.Error("workflow: persist pool rejection", "operation", it.Operation.OperationID, "err", err)
		return
	}
	e.committed(ctx, it, OutcomeFail, res, true, "worker pool full", nil)
}

func (e *Engine) declaration(action string) (Declaration, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	d, ok := e.decl[action]
	return d, ok
}

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
