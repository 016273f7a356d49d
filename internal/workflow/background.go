package workflow

import (
	"context"
	"sync"
)

// background is the lifecycle the engine's companion loops share (the
// reconciler, the expiry scan): started once, stopped once, and Stop waits
// for the run in progress so a shutdown never cuts a scan between its
// chunks' transactions. A Start after Stop does nothing, so a late Start
// during shutdown cannot leak a goroutine.
type background struct {
	mu      sync.Mutex
	started bool
	stopped bool
	cancel  context.CancelFunc
	done    chan struct{}
}

// start runs loop in its own goroutine with a context that stop cancels;
// a second start, or one after stop, does nothing.
func (b *background) start(ctx context.Context, loop func(context.Context)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.started || b.stopped {
		return
	}
	b.started = true
	runCtx, cancel := context.WithCancel(ctx)
	b.cancel = cancel
	b.done = make(chan struct{})
	go func() {
		defer close(b.done)
		loop(runCtx)
	}()
}

// stop cancels the loop and waits for it to return. Safe twice, and
// before start.
func (b *background) stop() {
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return
	}
	b.stopped = true
	started := b.started
	b.mu.Unlock()
	if !started {
		return
	}
	b.cancel()
	<-b.done
}
