package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/store"
)

// VersionReader is what the live-status feed reads: the change counters
// of the watched requests (store.OperationVersionsOf).
type VersionReader interface {
	OperationVersionsOf(ctx context.Context, ids []string) ([]store.OperationVersions, error)
}

// Errors of EventFeed.subscribe.
var (
	errFeedFull   = errors.New("live status: every stream of this instance is taken (events.maxStreams)")
	errFeedClosed = errors.New("live status: the instance is shutting down")
	// errCallerFull: this caller already holds events.maxStreamsPerCaller
	// streams on this instance.
	errCallerFull = errors.New("live status: the caller holds every stream allowed to one caller (events.maxStreamsPerCaller)")
)

// EventFeed tells this instance's open event streams (events.go) when
// their request changed. ONE poller per instance reads the versions of
// every watched request in one statement per events.pollInterval
// (store.OperationVersionsOf), whatever the number of streams: a hundred
// people watching ten requests cost one read per interval, not a hundred.
// Only the streams whose request changed then read it (its new steps and
// its view). The poller runs only while a stream is open, so an idle
// instance issues no statement for it. Because it reads the database, a
// change written by any instance reaches the streams of every instance.
//
// The trade-off against pushing changes from the writer: no cross-instance
// channel exists but the database, and a read per interval is cheap and
// bounded; the cost is up to one interval of delay.
type EventFeed struct {
	store  VersionReader
	config func() *config.Snapshot
	log    *slog.Logger

	mu      sync.Mutex
	watched map[string]*watchedRequest
	streams int
	// callers counts each caller's open streams (a key with no stream is
	// deleted, so the map holds only callers with a stream open).
	callers map[string]int
	running bool
	closed  bool
	// done is closed by Close: every stream ends, the poller stops.
	done chan struct{}
	// polls counts the poller's reads (tests: one read per interval for
	// every stream together).
	polls int64
}

// watchedRequest is one request some stream of this instance watches.
// ver and rev are its own versions and its revocation's: once a
// revocation has taken a grant's binding over, the grant's view shows
// that binding's state (requestView), which only the revocation's
// versions count.
type watchedRequest struct {
	seen bool
	ver  store.OperationVersions
	rev  store.OperationVersions
	subs map[*feedSub]struct{}
}

// feedSub is one stream's subscription: changed has room for one signal,
// so a slow stream coalesces several changes into one re-read.
type feedSub struct {
	changed chan struct{}
}

// NewEventFeed returns the feed over st; config gives events.* (read at
// every poll and subscription); logger may be nil.
func NewEventFeed(st VersionReader, cfg func() *config.Snapshot, logger *slog.Logger) *EventFeed {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &EventFeed{store: st, config: cfg, log: logger, watched: map[string]*watchedRequest{}, callers: map[string]int{}, done: make(chan struct{})}
}

// Close ends every stream (each handler returns, its connection goes idle,
// so http.Server.Shutdown need not wait for streams that never end) and
// refuses new ones. Safe twice.
func (f *EventFeed) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.closed {
		f.closed = true
		close(f.done)
	}
}

// callerStreams is how many streams caller holds open (tests).
func (f *EventFeed) callerStreams(caller string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.callers[caller]
}

// Polls is how many version reads the poller issued so far.
func (f *EventFeed) Polls() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.polls
}

// subscribe registers a stream of caller watching operationID; the
// returned func ends the subscription. It refuses after Close, beyond
// events.maxStreams on this instance and beyond
// events.maxStreamsPerCaller for caller. Both counts are taken and given
// back under the feed's one lock, together with the subscription itself,
// so concurrent openings cannot overshoot a bound and a stream that ends
// — its client gone, or Close at shutdown — frees its slot exactly once.
// The per-caller count is per instance: behind a load balancer a caller
// may hold that many on each, which the global bound of each still caps.
// Subscribe before reading the request's state: a change after that read
// is then signalled (the first poll of a request signals its subscribers
// once, because the feed has not seen it yet).
func (f *EventFeed) subscribe(operationID, caller string) (*feedSub, func(), error) {
	ev := f.config().Events()
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.closed:
		return nil, nil, errFeedClosed
	case f.callers[caller] >= ev.MaxStreamsPerCaller:
		// Checked before the global bound: a caller at their own limit
		// is told so (429, their doing) even when the instance is full.
		return nil, nil, errCallerFull
	case f.streams >= ev.MaxStreams:
		return nil, nil, errFeedFull
	}
	s := &feedSub{changed: make(chan struct{}, 1)}
	w := f.watched[operationID]
	if w == nil {
		w = &watchedRequest{subs: map[*feedSub]struct{}{}}
		f.watched[operationID] = w
	}
	w.subs[s] = struct{}{}
	f.streams++
	f.callers[caller]++
	if !f.running {
		f.running = true
		go f.poll()
	}
	var once sync.Once
	return s, func() {
		once.Do(func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			delete(w.subs, s)
			if len(w.subs) == 0 && f.watched[operationID] == w {
				delete(f.watched, operationID)
			}
			f.streams--
			if f.callers[caller]--; f.callers[caller] <= 0 {
				delete(f.callers, caller)
			}
		})
	}, nil
}

// poll reads the watched requests' versions every events.pollInterval
// until no stream is open or Close.
func (f *EventFeed) poll() {
	t := time.NewTimer(f.config().Events().PollInterval)
	defer t.Stop()
	for {
		select {
		case <-f.done:
			f.mu.Lock()
			f.running = false
			f.mu.Unlock()
			return
		case <-t.C:
		}
		f.mu.Lock()
		if len(f.watched) == 0 {
			f.running = false
			f.mu.Unlock()
			return
		}
		// Each request with its revocation's id: a given-back or expired
		// grant's page follows its removal (the revocation's binding),
		// at the cost of twice the ids in the one statement.
		ids := make([]string, 0, 2*len(f.watched))
		for id := range f.watched {
			ids = append(ids, id)
			if !domain.IsRevocationID(id) {
				ids = append(ids, domain.RevocationID(id))
			}
		}
		f.polls++
		f.mu.Unlock()

		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		vers, err := f.store.OperationVersionsOf(ctx, ids)
		cancel()
		if err != nil {
			// The streams stay open and the next poll tries again; their
			// clients see nothing new meanwhile (heartbeats go on).
			f.log.Warn("live status: read versions", "requests", len(ids), "err", err)
		} else {
			f.apply(vers)
		}
		t.Reset(f.config().Events().PollInterval)
	}
}

// apply signals the subscribers of every request whose versions — its
// own or its revocation's — changed since the last poll (or that this
// poll saw first).
func (f *EventFeed) apply(vers []store.OperationVersions) {
	byID := make(map[string]store.OperationVersions, len(vers))
	for _, v := range vers {
		byID[v.OperationID] = v
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, w := range f.watched {
		v, ok := byID[id]
		if !ok {
			continue
		}
		var rev store.OperationVersions
		if !domain.IsRevocationID(id) {
			rev = byID[domain.RevocationID(id)]
		}
		if w.seen && w.ver == v && w.rev == rev {
			continue
		}
		w.seen, w.ver, w.rev = true, v, rev
		for s := range w.subs {
			select {
			case s.changed <- struct{}{}:
			default:
			}
		}
	}
}
