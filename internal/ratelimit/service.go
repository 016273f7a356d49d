package ratelimit

import (
	"context"
	"sync"
)

// service is the Start/Stop plumbing shared by the background loops of
// this package: Start runs one loop until its context ends or Stop is
// called; starting a running service and stopping a stopped one do
// nothing, so both are safe to call twice.
type service struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

func (s *service) start(ctx context.Context, loop func(ctx context.Context)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done != nil {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	s.cancel, s.done = cancel, done
	go func() {
		defer close(done)
		loop(ctx)
	}()
}

// stop cancels the loop and waits until it has returned.
func (s *service) stop() {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.cancel, s.done = nil, nil
	s.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}
