// Package periodic is the lifecycle every background loop of changeflow
// shares — the engine's companions (reconciliation, the expiry scan, the
// batch rounds), the rate limiter's janitor and global quota, the
// idempotency cleanup — and the loop most of them run: do one pass every
// interval, the interval read again before every wait so a configuration
// reload applies without a restart.
//
// One lifecycle for all of them means serve starts and stops each the
// same way, and a shutdown's guarantees hold everywhere: Stop waits for
// the pass in progress (a scan is never cut between its chunks'
// transactions), and once a running service is stopped a later Start
// does nothing (a late Start during shutdown cannot leak a goroutine).
package periodic

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Service runs one loop in its own goroutine between Start and Stop. The
// zero value is a stopped service, ready to start.
type Service struct {
	mu      sync.Mutex
	started bool
	stopped bool
	cancel  context.CancelFunc
	done    chan struct{}
}

// Start runs loop with a context that Stop (or ctx) cancels. A second
// Start, or one after the service was stopped, does nothing.
func (s *Service) Start(ctx context.Context, loop func(context.Context)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.stopped {
		return
	}
	s.started = true
	runCtx, cancel := context.WithCancel(ctx)
	s.cancel, s.done = cancel, make(chan struct{})
	go func(done chan struct{}) {
		defer close(done)
		loop(runCtx)
	}(s.done)
}

// Stop cancels the loop and waits for it to return. Safe twice; before
// Start it does nothing (the service can still be started).
func (s *Service) Stop() {
	s.mu.Lock()
	if s.stopped || !s.started {
		s.mu.Unlock()
		return
	}
	s.stopped = true
	s.mu.Unlock()
	s.cancel()
	<-s.done
}

// Every is a loop that runs Pass once per interval until its context
// ends.
type Every struct {
	// Interval is read before every wait (nil, or a value ≤ 0, means
	// Fallback).
	Interval func() time.Duration
	// Fallback is the interval when Interval gives none (> 0).
	Fallback time.Duration
	// Now runs the first pass at once instead of after one interval.
	Now bool
	// Pass is one run; the next wait starts when it returns, so passes
	// never overlap and a slow one delays the next instead of piling up.
	Pass func(ctx context.Context)
}

// Loop runs e until ctx ends; it is the loop a Service starts.
func (e Every) Loop(ctx context.Context) {
	if e.Now {
		e.Pass(ctx)
	}
	for {
		t := time.NewTimer(e.interval())
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		e.Pass(ctx)
	}
}

func (e Every) interval() time.Duration {
	if e.Interval != nil {
		if d := e.Interval(); d > 0 {
			return d
		}
	}
	return e.Fallback
}

// LogPass logs a pass's outcome the way every loop does: a failure as a
// warning — unless ctx ended, since a shutdown that cuts a pass is no
// fault and the next start runs it again — else, when did (the pass
// changed something), done at info with args. A pass that found nothing
// to do logs nothing, so an idle loop stays quiet at every interval.
func LogPass(ctx context.Context, log *slog.Logger, err error, failed string, did bool, done string, args ...any) {
	switch {
	case err != nil && ctx.Err() == nil:
		log.Warn(failed, "err", err)
	case did:
		log.Info(done, args...)
	}
}
