package batch

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"changeflow/internal/config"
)

// Start runs triggered rounds when they are due (Env.RoundTrigger: an
// admission batch.gatherWindow after the first of a burst, a settled
// batch at once), and rounds and the timeout sweep every batch.interval
// (read at every pass) for every gitlab.projects entry with a numeric id,
// until Stop or ctx ends. Safe to call twice; a no-op after Stop.
func (r *Rounds) Start(ctx context.Context) error {
	r.svc.Start(ctx, r.loop)
	return nil
}

// Stop ends the loop and waits for a running round. Safe twice.
func (r *Rounds) Stop() { r.svc.Stop() }

// loop runs triggered rounds when they are due (RoundTrigger) and a full
// Tick every batch.interval. The interval is measured from the last Tick,
// not from the last triggered round, so a steady stream of admissions
// never postpones the safety net (the timeout sweep, the resumption of a
// batch whose round died).
func (r *Rounds) loop(ctx context.Context) {
	trig := r.d.RoundTrigger
	clock := trig.Clock()
	lastTick := clock.Now()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		interval := r.d.Config().Batch().Interval
		if interval <= 0 {
			interval = 10 * time.Second
		}
		now := clock.Now()
		wait := lastTick.Add(interval).Sub(now)
		if next := trig.Next(); !next.IsZero() {
			wait = min(wait, next.Sub(now))
		}
		t.Reset(max(wait, 0))
		select {
		case <-ctx.Done():
			return
		case <-trig.Woken():
			// A new schedule: recompute the wait. (Since Go 1.23 Reset
			// discards a value the timer may have sent meanwhile.)
			continue
		case <-t.C:
		}
		now = clock.Now()
		if !now.Before(lastTick.Add(interval)) {
			lastTick = now
			r.Tick(ctx)
			// A trigger due now as well runs at the next pass; its round
			// then finds what the Tick left (usually nothing: a few reads).
			continue
		}
		r.RunTriggered(ctx, now)
	}
}

// Tick runs one round per configured project and one timeout sweep, and
// the stray sweep when batch.strayInterval has passed since this
// process's last one.
func (r *Rounds) Tick(ctx context.Context) {
	if _, err := r.Sweep(ctx); err != nil && ctx.Err() == nil {
		r.d.Log().Warn("batch sweep", "err", err)
	}
	if r.straysDue() {
		if _, err := r.SweepStrays(ctx); err != nil && ctx.Err() == nil {
			r.d.Log().Warn("stray sweep", "err", err)
		}
	}
	for _, id := range r.Projects() {
		if _, err := r.RunRound(ctx, id); err != nil && ctx.Err() == nil {
			r.d.Log().Warn("batch round", "project", id, "err", err)
		}
	}
}

// straysDue reports whether the stray sweep is due, and if so marks it
// run now. The time is this process's own: nothing is shared, so several
// instances each run it every interval (overlapping runs are safe).
func (r *Rounds) straysDue() bool {
	now := r.d.RoundTrigger.Clock().Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.lastStrays.IsZero() && now.Before(r.lastStrays.Add(r.d.Config().Batch().StrayInterval)) {
		return false
	}
	r.lastStrays = now
	return true
}

// SweepStrays runs the stray sweep (Flow.SweepStrayMRs) for every
// configured project and returns how many MRs it closed.
func (r *Rounds) SweepStrays(ctx context.Context) (int, error) {
	n := 0
	var errs []error
	for _, id := range r.Projects() {
		res, err := r.d.SweepStrayMRs(ctx, id)
		n += res.Closed
		if err != nil {
			errs = append(errs, fmt.Errorf("project %d: %w", id, err))
		}
	}
	return n, errors.Join(errs...)
}

// Projects are the numeric ids of gitlab.projects.
func (r *Rounds) Projects() []int64 {
	ps, _ := r.d.Config().List(config.KeyGitLabProjects)
	var out []int64
	for _, p := range ps {
		if id, err := strconv.ParseInt(p, 10, 64); err == nil && id > 0 {
			out = append(out, id)
		}
	}
	return out
}

// RunTriggered runs the round of every project whose trigger is due at
// now (the loop passes the clock's now; tests pass chosen times) and
// returns what each did, in project order. An error is logged and leaves
// the project to its next trigger or the batch.interval safety net.
func (r *Rounds) RunTriggered(ctx context.Context, now time.Time) []RoundResult {
	due, _ := r.d.RoundTrigger.Take(now)
	out := make([]RoundResult, 0, len(due))
	for _, p := range due {
		res, err := r.RunRound(ctx, p)
		if err != nil && ctx.Err() == nil {
			r.d.Log().Warn("triggered batch round", "project", p, "err", err)
		}
		out = append(out, res)
	}
	return out
}
