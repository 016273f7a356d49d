package gitlab

import (
	"context"
	"sync"
	"time"
)

// scheduler runs functions after a delay on timers (never by sleeping) and
// can cancel every pending one: on reset (the world they refer to is gone)
// and on Close (which also waits for callbacks already running).
type scheduler struct {
	mu     sync.Mutex
	timers map[uint64]*time.Timer
	next   uint64
	closed bool
	wg     sync.WaitGroup
}

func newScheduler() *scheduler { return &scheduler{timers: map[uint64]*time.Timer{}} }

func (s *scheduler) after(d time.Duration, fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.next++
	id := s.next
	s.wg.Add(1)
	s.timers[id] = time.AfterFunc(d, func() {
		defer s.wg.Done()
		s.mu.Lock()
		_, ok := s.timers[id]
		delete(s.timers, id)
		s.mu.Unlock()
		if ok {
			fn()
		}
	})
}

// stop cancels every pending timer; closing also refuses new ones and waits
// for running callbacks.
func (s *scheduler) stop(closing bool) {
	s.mu.Lock()
	for id, t := range s.timers {
		if t.Stop() {
			s.wg.Done()
		}
		delete(s.timers, id)
	}
	if closing {
		s.closed = true
	}
	s.mu.Unlock()
	if closing {
		s.wg.Wait()
	}
}

// queue runs jobs one at a time, in submission order, on its own goroutine,
// so a slow Deliverer or merge subscriber never runs under a project lock
// and never reorders events.
type queue struct {
	ctx  context.Context
	mu   sync.Mutex
	jobs []func(context.Context)
	wake chan struct{}
	done chan struct{}
}

func newQueue(ctx context.Context) *queue {
	q := &queue{ctx: ctx, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go q.run()
	return q
}

func (q *queue) push(job func(context.Context)) {
	q.mu.Lock()
	q.jobs = append(q.jobs, job)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *queue) run() {
	defer close(q.done)
	for {
		q.mu.Lock()
		var job func(context.Context)
		if len(q.jobs) > 0 {
			job, q.jobs = q.jobs[0], q.jobs[1:]
		}
		q.mu.Unlock()
		if job != nil {
			job(q.ctx)
			continue
		}
		select {
		case <-q.ctx.Done():
			return
		case <-q.wake:
		}
	}
}

// wait returns when the worker has stopped (after the context ends).
func (q *queue) wait() { <-q.done }
