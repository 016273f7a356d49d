package httpapi

import (
	"changeflow/internal/periodic"
	"context"
	"log/slog"
	"time"
)

// IdempotencyExpirer deletes expired idempotency records in chunks;
// *store.Store implements it (an index range read per chunk, then a
// delete by primary key).
type IdempotencyExpirer interface {
	IdempotencyDeleteExpired(ctx context.Context, limit int) (int, error)
}

// Cleanup bounds: one chunk is a statement's worth; one run deletes at
// most cleanupChunks chunks and leaves the rest to the next tick, so a
// backlog never holds the database for long.
const (
	cleanupChunk     = 500
	cleanupChunks    = 20
	defaultCleanupIn = 10 * time.Minute
)

// IdempotencyCleanup is the service that removes expired idempotency
// records every idempotency.cleanupInterval, read from the
// configuration before each wait so a reload applies from the next run.
// Every instance may run it: the deletes re-check expiry by the DB clock
// and touch disjoint or already-deleted rows, so overlapping runs are
// harmless.
type IdempotencyCleanup struct {
	store  IdempotencyExpirer
	config ConfigSource
	logger *slog.Logger
	// onRun, when set, receives each run's count (tests).
	onRun func(deleted int, err error)

	svc periodic.Service
}

// NewIdempotencyCleanup returns a stopped cleanup service. config may be
// nil (then the interval is defaultCleanupIn); logger nil discards.
func NewIdempotencyCleanup(st IdempotencyExpirer, config ConfigSource, logger *slog.Logger) *IdempotencyCleanup {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &IdempotencyCleanup{store: st, config: config, logger: logger}
}

// Start runs the loop until ctx ends or Stop is called; the first run is
// one interval after Start. Starting a running service does nothing.
func (c *IdempotencyCleanup) Start(ctx context.Context) error {
	c.svc.Start(ctx, periodic.Every{Interval: c.interval, Fallback: defaultCleanupIn, Pass: c.pass}.Loop)
	return nil
}

// Stop ends the loop and waits for a run in progress; safe to call twice
// and before Start.
func (c *IdempotencyCleanup) Stop() { c.svc.Stop() }

func (c *IdempotencyCleanup) pass(ctx context.Context) {
	n, err := c.RunOnce(ctx)
	if c.onRun != nil {
		c.onRun(n, err)
	}
}

// RunOnce deletes expired records, up to cleanupChunks chunks, and
// returns how many it deleted. A failure is logged and returned; the next
// tick tries again.
func (c *IdempotencyCleanup) RunOnce(ctx context.Context) (int, error) {
	total := 0
	for range cleanupChunks {
		n, err := c.store.IdempotencyDeleteExpired(ctx, cleanupChunk)
		total += n
		if err != nil {
			if ctx.Err() == nil {
				c.logger.Error("idempotency cleanup failed; retrying next interval", "deleted", total, "err", err)
			}
			return total, err
		}
		if n < cleanupChunk {
			break
		}
	}
	if total > 0 {
		c.logger.Info("idempotency cleanup", "deleted", total)
	}
	return total, nil
}

func (c *IdempotencyCleanup) interval() time.Duration {
	if c.config != nil {
		if d := c.config.Current().Idempotency().CleanupInterval; d > 0 {
			return d
		}
	}
	return defaultCleanupIn
}
