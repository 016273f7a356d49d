// Package auditlog runs the audit chain (docs/audit.md): the periodic
// chainer that copies new step-history and audit-log records into the
// chain, the retention job that removes old ones behind an anchor, and
// the export that streams a range of the chain with a signed manifest.
// The chain's format is package auditchain; its storage is the store's
// AuditChain* operations.
package auditlog

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"changeflow/internal/auditchain"
	"changeflow/internal/domain"
	"changeflow/internal/periodic"
	"changeflow/internal/store"
)

const (
	// Grace: a record is chained once it is this old by the database
	// clock, so the transaction that wrote it has committed (a record
	// written earlier but committed later would otherwise be passed over
	// by the look that follows it).
	Grace = 5 * time.Second
	// Lookback: each look for new records starts this long before the
	// newest record chained, so a record whose transaction committed up
	// to this long after it was written is chained late rather than lost.
	Lookback = 15 * time.Minute
	// chunk is the most records one chaining or retention transaction
	// handles.
	chunk = store.InChunkSize
	// retainEvery is how often retention runs; it removes records a year
	// old, so an hour more or less does not matter.
	retainEvery = time.Hour
	// preemptedRetries bounds how often ChainAll tries again after another
	// instance chained first (each time it waits preemptedWait).
	preemptedRetries = 200
	preemptedWait    = 25 * time.Millisecond
)

// Store is what the chain needs of the database (*store.Store).
type Store interface {
	AuditChainAppend(ctx context.Context, p store.AuditChainParams) (int, error)
	AuditChainRetain(ctx context.Context, retention time.Duration, limit int) (int, error)
	AuditChainState(ctx context.Context) (store.AuditChainState, error)
	AuditChainRange(ctx context.Context, from, to time.Time) (first, last int64, err error)
	AuditChainPage(ctx context.Context, fromSeq, toSeq int64, limit int) ([]auditchain.Entry, error)
}

// Settings are the chain's configuration, read before every pass.
type Settings struct {
	// SigningKey signs each export's manifest; nil refuses exports.
	SigningKey    ed25519.PrivateKey
	Retention     time.Duration
	ChainInterval time.Duration
}

// Options builds a Chain.
type Options struct {
	Store    Store
	Settings func() Settings
	Logger   *slog.Logger
	// Now is the clock of the manifest's exportedAt; nil means time.Now.
	Now func() time.Time
}

// Chain is the chainer and the retention job (two periodic services on
// every instance; the store's guarded writes let exactly one instance win
// each round) and the export.
type Chain struct {
	opts     Options
	chainSvc periodic.Service
	keepSvc  periodic.Service
}

// New returns a chain that is not running yet.
func New(opts Options) *Chain {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Chain{opts: opts}
}

// Start runs the chainer every audit.chainInterval (first pass at once)
// and retention every hour.
func (c *Chain) Start(ctx context.Context) error {
	c.chainSvc.Start(ctx, periodic.Every{
		Interval: func() time.Duration { return c.opts.Settings().ChainInterval },
		Fallback: 10 * time.Second, Now: true,
		Pass: func(ctx context.Context) { c.logPass(ctx, "chain", c.ChainAll) },
	}.Loop)
	c.keepSvc.Start(ctx, periodic.Every{Fallback: retainEvery, Now: true,
		Pass: func(ctx context.Context) { c.logPass(ctx, "retention", c.Retain) },
	}.Loop)
	return nil
}

// Stop stops both services, each after its pass in progress.
func (c *Chain) Stop() {
	c.keepSvc.Stop()
	c.chainSvc.Stop()
}

func (c *Chain) logPass(ctx context.Context, what string, pass func(context.Context) (int, error)) {
	n, err := pass(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		c.opts.Logger.Warn("audit chain: "+what+" failed; tried again next pass", "err", err, "done", n)
	case n > 0:
		c.opts.Logger.Debug("audit chain: "+what, "records", n)
	}
}

// ChainAll chains every record old enough (Grace) in chunks until none is
// left, and returns how many this call chained. When another instance
// chains at the same moment it waits a moment and looks again, since what
// the other instance chained may not be all: domain.ErrPreempted (the
// guarded head write missed), or domain.ErrBusy (on Galera the loser of
// the head row fails certification, and InTx's own retries may all meet
// the winner again).
func (c *Chain) ChainAll(ctx context.Context) (int, error) {
	total, lost := 0, 0
	for {
		n, err := c.opts.Store.AuditChainAppend(ctx, store.AuditChainParams{Grace: Grace, Lookback: Lookback, Limit: chunk})
		switch {
		case errors.Is(err, domain.ErrPreempted), errors.Is(err, domain.ErrBusy):
			if lost++; lost > preemptedRetries {
				return total, fmt.Errorf("audit chain: another instance kept chaining: %w", err)
			}
			if err := wait(ctx, preemptedWait); err != nil {
				return total, err
			}
			continue
		case err != nil:
			return total, err
		case n == 0:
			return total, nil
		}
		total += n
	}
}

// Retain removes records older than audit.retention, in chunks, moving
// the anchor.
func (c *Chain) Retain(ctx context.Context) (int, error) {
	retention := c.opts.Settings().Retention
	if retention <= 0 {
		return 0, nil
	}
	total := 0
	for {
		n, err := c.opts.Store.AuditChainRetain(ctx, retention, chunk)
		switch {
		case errors.Is(err, domain.ErrPreempted), errors.Is(err, domain.ErrBusy):
			return total, nil // another instance is removing them; the rest next hour
		case err != nil:
			return total, err
		case n == 0:
			return total, nil
		}
		total += n
	}
}

// wait sleeps d unless ctx ends first.
func wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
