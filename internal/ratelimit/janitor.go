package ratelimit

import (
	"changeflow/internal/periodic"
	"context"
	"time"
)

// DefaultSweepInterval is how often a Janitor sweeps unless told
// otherwise: the default rate-limit window, so an idle key outlives its
// window by at most one more.
const DefaultSweepInterval = time.Minute

// Janitor sweeps a Limiter periodically. Allow already reclaims idle
// buckets as traffic flows, a few per call from the shard it touches;
// after a flood of one-off callers followed by quiet, that could take
// long, and the janitor bounds it. Sweep works one shard at a time in
// small chunks, so callers keep flowing while it runs.
type Janitor struct {
	l     *Limiter
	every time.Duration
	now   func() time.Time
	// onSweep, when set, receives each sweep's count (tests).
	onSweep func(removed int)
	svc     periodic.Service
}

// NewJanitor returns a stopped janitor for l that sweeps every interval
// (≤ 0 means DefaultSweepInterval) at the time now returns (nil means
// time.Now).
func NewJanitor(l *Limiter, every time.Duration, now func() time.Time) *Janitor {
	if every <= 0 {
		every = DefaultSweepInterval
	}
	if now == nil {
		now = time.Now
	}
	return &Janitor{l: l, every: every, now: now}
}

// Start sweeps every interval until ctx ends or Stop is called. Starting
// a running janitor does nothing.
func (j *Janitor) Start(ctx context.Context) error {
	j.svc.Start(ctx, periodic.Every{Fallback: j.every, Pass: j.sweep}.Loop)
	return nil
}

// Stop ends the loop and waits for it; safe to call twice.
func (j *Janitor) Stop() { j.svc.Stop() }

func (j *Janitor) sweep(context.Context) {
	n := j.l.Sweep(j.now())
	if j.onSweep != nil {
		j.onSweep(n)
	}
}
