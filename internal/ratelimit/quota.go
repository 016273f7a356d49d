package ratelimit

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"changeflow/internal/config"
	"changeflow/internal/periodic"
)

// Global quota. Without it, rate limiting is per
// instance, so the effective quota is "limit × instances". Without a shared
// cache, each instance heartbeats into the database and counts the live
// ones; a limit then becomes ceil(limit / live) per instance. The split is
// exact for callers whose requests the load balancer spreads evenly and
// generous (up to live-1 extra per window) for a caller pinned to one
// instance — the price of needing no shared counter.

// InstanceStore is the storage the quota needs; *store.Store implements
// it. Both operations use the database clock.
type InstanceStore interface {
	InstanceHeartbeat(ctx context.Context, id string) error
	InstanceCountLive(ctx context.Context, liveAfter time.Duration) (int, error)
	InstancePrune(ctx context.Context, olderThan time.Duration) (int64, error)
}

// ConfigSource reads the configuration in force; *config.Manager
// implements it.
type ConfigSource interface {
	Current() *config.Snapshot
}

const (
	// pruneEvery is how often an instance deletes long-dead heartbeat rows.
	pruneEvery = time.Hour
	// pruneAfterMin is the least silence before a row is deleted; far
	// above any sane liveAfter, so pruning never removes a live instance.
	pruneAfterMin = time.Hour
)

// QuotaOptions are NewQuota's dependencies.
type QuotaOptions struct {
	Store  InstanceStore
	Config ConfigSource
	// Logger receives heartbeat failures; nil discards.
	Logger *slog.Logger
	// Now is the clock that ages the cached count; nil means time.Now.
	Now func() time.Time
	// OnRefresh, when set, is called after every heartbeat round with its
	// outcome (tests wait on it instead of sleeping).
	OnRefresh func(live int, err error)
}

// Quota is the background service that heartbeats this instance and
// caches the number of live instances. It heartbeats whether or not
// ratelimit.global.enabled is on, so that turning the switch on (a hot
// reload) finds every instance already counted.
type Quota struct {
	opts QuotaOptions

	live      atomic.Int64 // last count, 0 before the first success
	liveAt    atomic.Int64 // Unix nanoseconds of that count
	liveAfter atomic.Int64 // the liveAfter it was counted with
	lastPrune atomic.Int64

	svc periodic.Service
}

// NewQuota returns a stopped service; Start starts it.
func NewQuota(o QuotaOptions) *Quota {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Quota{opts: o}
}

// Start beats once right away and then every instance.heartbeatInterval
// (re-read each time, so a reload applies) until ctx ends or Stop is
// called. Starting a running service does nothing.
func (q *Quota) Start(ctx context.Context) error {
	q.svc.Start(ctx, q.run)
	return nil
}

// Stop ends the loop and waits for it. Safe to call twice, or without
// Start. The instance's row stays and stops counting after liveAfter.
func (q *Quota) Stop() { q.svc.Stop() }

func (q *Quota) run(ctx context.Context) {
	for {
		interval := q.opts.Config.Current().Instance().HeartbeatInterval
		// One round may take at most one interval, so a hung database
		// delays the next beat instead of stopping the loop.
		rctx, cancel := context.WithTimeout(ctx, interval)
		live, err := q.Refresh(rctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			q.opts.Logger.Warn("instance heartbeat failed; global rate limits use the last count until it ages out", "err", err)
		}
		if q.opts.OnRefresh != nil {
			q.opts.OnRefresh(live, err)
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// Refresh beats once, recounts the live instances, caches the count and
// returns it; now and then it also prunes long-dead rows. The loop calls
// it; tests may call it directly.
func (q *Quota) Refresh(ctx context.Context) (int, error) {
	inst := q.opts.Config.Current().Instance()
	if err := q.opts.Store.InstanceHeartbeat(ctx, inst.ID); err != nil {
		return 0, fmt.Errorf("global quota: %w", err)
	}
	n, err := q.opts.Store.InstanceCountLive(ctx, inst.LiveAfter)
	if err != nil {
		return 0, fmt.Errorf("global quota: %w", err)
	}
	now := q.opts.Now()
	q.live.Store(int64(n))
	q.liveAfter.Store(int64(inst.LiveAfter))
	q.liveAt.Store(now.UnixNano())

	if last := q.lastPrune.Load(); now.UnixNano()-last >= int64(pruneEvery) && q.lastPrune.CompareAndSwap(last, now.UnixNano()) {
		if _, err := q.opts.Store.InstancePrune(ctx, max(pruneAfterMin, 10*inst.LiveAfter)); err != nil {
			// Only housekeeping: dead rows are not counted as live anyway.
			q.opts.Logger.Warn("prune instance heartbeats failed", "err", err)
		}
	}
	return n, nil
}

// Live returns the cached number of live instances, at least 1. A count
// older than the liveAfter it was taken with — the database has been
// unreachable that long — falls back to 1, i.e. per-instance limits: the
// behaviour without the quota and the failure direction of every rate-limit setting
// (never block legitimate traffic because a dependency failed).
func (q *Quota) Live() int {
	n := q.live.Load()
	age := q.opts.Now().UnixNano() - q.liveAt.Load()
	if n < 1 || age > q.liveAfter.Load() {
		return 1
	}
	return int(n)
}

// PerInstance returns this instance's share of a global limit.
func (q *Quota) PerInstance(limit int) int { return PerInstanceLimit(limit, q.Live()) }

// PerInstanceLimit is ceil(limit / live), live clamped to at least 1.
// Rounding up keeps every share ≥ 1 for a positive limit: a small limit on
// many instances must not turn into "nobody may call".
func PerInstanceLimit(limit, live int) int {
	if live < 1 {
		live = 1
	}
	if limit <= 0 {
		return limit
	}
	return (limit + live - 1) / live
}
