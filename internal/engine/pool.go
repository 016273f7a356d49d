package engine

import (
	"sync"
)

// pool is a fixed set of workers with a bounded queue. trySubmit never
// blocks: a full pool refuses, and the caller
// persists the refusal. Running work on the caller's goroutine
// (CallerRunsPolicy) or an unbounded queue would hide overload.
type pool struct {
	jobs   chan func()
	wg     sync.WaitGroup
	mu     sync.Mutex
	closed bool
	// busy counts accepted jobs, running or queued.
	busy     int
	workers  int
	capacity int
}

func newPool(workers, queue int) *pool {
	// The channel holds every accepted job (running ones have left it), so
	// a send under the capacity check never blocks.
	p := &pool{jobs: make(chan func(), workers+queue), workers: workers, capacity: workers + queue}
	p.wg.Add(workers)
	for range workers {
		go func() {
			defer p.wg.Done()
			for job := range p.jobs {
				job()
				p.mu.Lock()
				p.busy--
				p.mu.Unlock()
			}
		}()
	}
	return p
}

// trySubmit queues job, or returns false when the queue is full or the
// pool is closed.
func (p *pool) trySubmit(job func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.busy >= p.capacity {
		return false
	}
	p.busy++
	p.jobs <- job
	return true
}

// idle is how many workers have nothing running or queued for them: the
// poller claims at most this many rows, so what it claims starts at once
// and no claimed row waits in the queue behind a long step.
func (p *pool) idle() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return max(0, p.workers-p.busy)
}

// close stops accepting work and waits for queued and running jobs.
func (p *pool) close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.jobs)
	}
	p.mu.Unlock()
	p.wg.Wait()
}
