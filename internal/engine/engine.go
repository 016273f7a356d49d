package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
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
