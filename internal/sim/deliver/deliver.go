// Package deliver sends the simulators' callbacks and webhooks to the
// service under test: asynchronously, to a list of base URLs in turn
// (skipping ones that fail, as a load balancer would), retried with capped
// exponential backoff until a 2xx, with faults that can be switched on at
// run time (drop, duplicate, delay, pause and release in reverse order).
package deliver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// ErrDropped is the outcome of a delivery that a fault dropped on purpose.
var ErrDropped = errors.New("delivery dropped by fault")

// ErrClosed is the outcome of a delivery abandoned because the Deliverer
// was closed before a target answered 2xx.
var ErrClosed = errors.New("deliverer closed")

// Options configures a Deliverer. Zero values take the documented defaults.
type Options struct {
	// Targets are base URLs (scheme://host[:port][/prefix]); a delivery for
	// path p goes to target+p. At least one is required.
	Targets []string
	// Client sends the requests; default: a client with AttemptTimeout.
	Client *http.Client
	// AttemptTimeout bounds one HTTP attempt (default 10 s).
	AttemptTimeout time.Duration
	// BackoffMin and BackoffMax bound the wait after every target failed
	// once in a row (defaults 100 ms and 5 s); the wait doubles per round.
	BackoffMin, BackoffMax time.Duration
	// MaxInFlight bounds the deliveries accepted but not finished (default
	// 1024); Deliver blocks while the bound is reached.
	MaxInFlight int
	// LogSize is how many deliveries the log keeps, newest last (default 1000).
	LogSize int
	// Logger receives one line per failed attempt and per outcome.
	Logger *slog.Logger
}

// Deliverer delivers requests asynchronously. Create it with New; it is
// safe for concurrent use; Close stops it.
type Deliverer struct {
	opts    Options
	targets []string
	client  *http.Client
	logger  *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	slots  chan struct{}

	mu       sync.Mutex
	rr       int // next round-robin start
	seq      uint64
	faults   Faults
	held     []*item
	inflight int
	idle     chan struct{} // closed while inflight == 0
	log      []*entry
	closed   bool
}

// New validates opts and returns a running Deliverer.
func New(opts Options) (*Deliverer, error) {
	if len(opts.Targets) == 0 {
		return nil, errors.New("deliver: at least one target URL is required")
	}
	targets := make([]string, 0, len(opts.Targets))
	for _, t := range opts.Targets {
		u, err := url.Parse(t)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("deliver: target %q is not an http(s) base URL", t)
		}
		targets = append(targets, strings.TrimRight(t, "/"))
	}
	if opts.AttemptTimeout <= 0 {
		opts.AttemptTimeout = 10 * time.Second
	}
	if opts.BackoffMin <= 0 {
		opts.BackoffMin = 100 * time.Millisecond
	}
	if opts.BackoffMax < opts.BackoffMin {
		opts.BackoffMax = max(5*time.Second, opts.BackoffMin)
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = 1024
	}
	if opts.LogSize <= 0 {
		opts.LogSize = 1000
	}
	client := opts.Client
	if client == nil {
		client = &http.Client{Timeout: opts.AttemptTimeout}
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	idle := make(chan struct{})
	close(idle)
	return &Deliverer{
		opts: opts, targets: targets, client: client, logger: logger,
		ctx: ctx, cancel: cancel,
		slots: make(chan struct{}, opts.MaxInFlight),
		idle:  idle,
	}, nil
}

// Targets returns the base URLs deliveries go to.
func (d *Deliverer) Targets() []string { return append([]string(nil), d.targets...) }

// Deliver queues a POST of body to every-target-in-turn + path and returns
// at once. It implements the simulators' callback port. ctx bounds only
// the wait for room in the queue: a delivery outlives the request that
// caused it, as a real upstream's outbox does.
func (d *Deliverer) Deliver(ctx context.Context, path string, header http.Header, body []byte) {
	d.Submit(ctx, path, header, body)
}

// Submit is Deliver that also returns a Receipt, for callers that must know
// when the target has answered 2xx (callback-before-response, in-order
// deployments, tests).
func (d *Deliverer) Submit(ctx context.Context, path string, header http.Header, body []byte) *Receipt {
	rc := newReceipt()
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		rc.finish(ErrClosed)
		return rc
	}
	d.seq++
	it := &item{
		id: d.seq, path: path, header: header.Clone(), body: append([]byte(nil), body...),
		receipt: rc,
	}
	if it.header == nil {
		it.header = http.Header{}
	}
	if it.header.Get("Content-Type") == "" {
		it.header.Set("Content-Type", "application/json")
	}
	plan := d.faults.take()
	d.mu.Unlock()

	if plan.drop {
		e := d.record(it, false)
		d.finish(it, e, StateDropped, ErrDropped)
		return rc
	}
	copies := []*item{it}
	if plan.duplicate {
		dup := *it
		dup.receipt = newReceipt() // the caller waits for the original only
		copies = append(copies, &dup)
	}
	for i, c := range copies {
		c.delay = plan.delay
		if !d.acquire(ctx) {
			e := d.record(c, i > 0)
			d.finish(c, e, StateAbandoned, ErrClosed)
			continue
		}
		c.entry = d.record(c, i > 0)
		d.dispatch(c)
	}
	return rc
}

// acquire takes an in-flight slot, waiting while the bound is reached.
func (d *Deliverer) acquire(ctx context.Context) bool {
	// A free slot wins even over a done ctx: callers often pass a request
	// context that ends right after they return, and select would pick
	// between ready cases at random.
	select {
	case d.slots <- struct{}{}:
	default:
		select {
		case d.slots <- struct{}{}:
		case <-ctx.Done():
			return false
		case <-d.ctx.Done():
			return false
		}
	}
	d.mu.Lock()
	if d.inflight == 0 {
		d.idle = make(chan struct{})
	}
	d.inflight++
	d.mu.Unlock()
	return true
}

// dispatch holds the item when deliveries are paused, else starts it.
func (d *Deliverer) dispatch(it *item) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		d.finish(it, it.entry, StateAbandoned, ErrClosed)
		return
	}
	if d.faults.Paused {
		it.entry.setState(StateHeld)
		d.held = append(d.held, it)
		d.mu.Unlock()
		return
	}
	// Added under mu, which Close takes before Wait: no Add after Wait.
	d.wg.Add(1)
	d.mu.Unlock()
	go func() {
		defer d.wg.Done()
		d.run(it)
	}()
}

// Wait blocks until no delivery is in flight (held ones count as in flight:
// resume first) or ctx is done.
func (d *Deliverer) Wait(ctx context.Context) error {
	d.mu.Lock()
	idle := d.idle
	d.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close abandons undelivered items and waits for the delivery goroutines
// to stop. It is safe to call more than once.
func (d *Deliverer) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		d.wg.Wait()
		return nil
	}
	d.closed = true
	held := d.held
	d.held = nil
	d.mu.Unlock()
	d.cancel()
	for _, it := range held {
		d.finish(it, it.entry, StateAbandoned, ErrClosed)
	}
	d.wg.Wait()
	return nil
}

// finish records the outcome, releases the slot (when it had one) and
// completes the receipt.
func (d *Deliverer) finish(it *item, e *entry, state State, err error) {
	e.finish(state, err)
	if it.entry != nil { // had a slot
		<-d.slots
		d.mu.Lock()
		d.inflight--
		if d.inflight == 0 {
			close(d.idle)
		}
		d.mu.Unlock()
	}
	it.receipt.finish(err)
}

// item is one queued delivery.
type item struct {
	id      uint64
	path    string
	header  http.Header
	body    []byte
	delay   time.Duration
	receipt *Receipt
	entry   *entry
}

// Receipt tells when one delivery has finished.
type Receipt struct {
	done chan struct{}
	err  error
}

func newReceipt() *Receipt { return &Receipt{done: make(chan struct{})} }

func (r *Receipt) finish(err error) {
	r.err = err
	close(r.done)
}

// Done is closed when the delivery has finished.
func (r *Receipt) Done() <-chan struct{} { return r.done }

// Wait returns nil once a target answered 2xx, ErrDropped or ErrClosed for
// a delivery that never will, or ctx's error.
func (r *Receipt) Wait(ctx context.Context) error {
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}
