package workflow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/store"
)

// Revocation (docs/workflow.md, "Revocation (access ends)"): the expiry
// scan, and giving access back. Both create revocations through
// store.RevocationCreate — exactly once per grant, whoever races — after
// which the removal runs the grant's own machinery: create_mr on a target
// without batching, the project's batch rounds otherwise.

// ExpiryResult counts one expiry scan.
type ExpiryResult struct {
	// Scanned is how many expired VALIDATED bindings the scan read.
	Scanned int `json:"scanned"`
	// Revoked is how many revocations this scan created (a binding another
	// instance's scan took first counts in Scanned only).
	Revoked int `json:"revoked"`
	// Chunks is how many chunks (transactions) the scan used.
	Chunks int `json:"chunks"`
}

// ExpiryActor is the step-history actor of the scan's revocations.
const ExpiryActor = "expiry-scan"

// Expiry runs the expiry scan every expiry.interval (read before each
// wait, so a reload applies) on every instance; scans of several
// instances, and a manual run, may overlap: each revocation is created
// once (store.RevocationCreate).
type Expiry struct {
	d Deps
	// Wake, when set, is called after a scan created revocations whose
	// create_mr is due, so the engine starts them at once.
	Wake func()

	bg background
}

// NewExpiry returns the expiry scan over d.
func NewExpiry(d Deps) *Expiry { return &Expiry{d: d} }

// ScanOnce revokes every VALIDATED binding whose expiresAt has passed by
// the database clock: chunks of expiry.chunkSize read in index order
// (store.RevocationCandidatesExpired), each revoked in one transaction of
// a fixed number of statements. A chunk that lost a race to another
// writer (domain.ErrPreempted) is skipped; its rows are read again by the
// next scan. Any other error stops the scan after the chunks before it.
func (x *Expiry) ScanOnce(ctx context.Context) (ExpiryResult, error) {
	size := x.d.Config().Expiry().ChunkSize
	var (
		res    ExpiryResult
		cursor store.ExpiredCursor
		wake   bool
	)
	defer func() {
		if wake && x.Wake != nil {
			x.Wake()
		}
	}()
	for {
		cands, next, err := x.d.Store.RevocationCandidatesExpired(ctx, cursor, size)
		if err != nil {
			return res, err
		}
		if len(cands) == 0 {
			// Then grants that expired while their renewal still waits for
			// its approval: expiry wins (docs/workflow.md, "Renewal").
			cands, err = x.d.Store.RevocationCandidatesRenewing(ctx, size)
			if err != nil || len(cands) == 0 {
				return res, err
			}
			res.Scanned += len(cands)
			res.Chunks++
			created, err := x.d.createRevocations(ctx, cands, domain.RevokeExpired, "expired", ExpiryActor)
			res.Revoked += len(created)
			for _, c := range created {
				wake = wake || !c.Batching
			}
			if err != nil && !errors.Is(err, domain.ErrPreempted) {
				return res, err
			}
			return res, nil
		}
		res.Scanned += len(cands)
		res.Chunks++
		created, err := x.d.createRevocations(ctx, cands, domain.RevokeExpired, "expired", ExpiryActor)
		res.Revoked += len(created)
		for _, c := range created {
			wake = wake || !c.Batching
		}
		if err != nil && !errors.Is(err, domain.ErrPreempted) {
			return res, err
		}
		cursor = next
	}
}

// createRevocations creates the revocations of cands for reason, each
// admitted to its project's batch set when its target batches (a target
// no longer configured takes the single-request path, whose create_mr
// then stops in REVOKE_FAILED naming it: a person decides), and counts
// each created one once, after its commit (I9).
func (d Deps) createRevocations(ctx context.Context, cands []store.RevocationCandidate, reason domain.RevokeReason, text, actor string) ([]store.RevocationCreated, error) {
	cfg := d.Config()
	rows := make([]store.RevocationRow, len(cands))
	for i, c := range cands {
		t, ok := cfg.Target(c.TargetKey)
		rows[i] = store.RevocationRow{RevocationCandidate: c, Batching: ok && t.Batching}
	}
	created, err := d.Store.RevocationCreate(ctx, store.RevocationCreateParams{
		Reason: reason, Text: text, Actor: actor, SingleAction: ActionCreateMR, Rows: rows,
	})
	if d.OnRevocation != nil {
		for _, c := range created {
			d.OnRevocation(ctx, c, reason)
		}
	}
	d.renewalsCut(ctx, cands, created)
	return created, err
}

// Start runs ScanOnce every expiry.interval until Stop or ctx ends. A
// second Start, or one after Stop, does nothing.
func (x *Expiry) Start(ctx context.Context) {
	x.bg.start(ctx, x.loop)
}

// Stop stops the loop and waits for a scan in progress. Safe twice, and
// before Start.
func (x *Expiry) Stop() { x.bg.stop() }

func (x *Expiry) loop(ctx context.Context) {
	for {
		interval := x.d.Config().Expiry().Interval
		if interval <= 0 {
			interval = time.Minute
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		res, err := x.ScanOnce(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			x.d.logger().Warn("expiry scan", "err", err)
		case res.Revoked > 0:
			x.d.logger().Info("revoked expired access", "scanned", res.Scanned, "revoked", res.Revoked, "chunks", res.Chunks)
		}
	}
}

// RevokeResult is the revocation of a grant: the one this call created,
// or the one that already existed (a give-back is idempotent).
type RevokeResult struct {
	// OperationID is the revocation's operationId.
	OperationID string
	// Created: this call created it.
	Created bool
	// Binding is the binding's status after the call (REVOKING at once;
	// later REVOKED or REVOKE_FAILED).
	Binding domain.BindingStatus
}

// ErrNotInEffect: the grant is not VALIDATED, so there is no access to
// give back (it is still being granted, failed, was rejected, or the
// binding belongs to a newer request).
var ErrNotInEffect = errors.New("the request is not in effect")

// Revoke gives grantOperationID's access back (reason GIVEN_BACK, the
// owner) or revokes it (OPERATOR, with the operator's text): the same path
// as the expiry scan, no approval. A second call — or one racing the scan
// — answers the existing revocation. A grant that is not in effect is
// ErrNotInEffect, with the binding's status in the message; an unknown
// one wraps domain.ErrNotFound.
func (d Deps) Revoke(ctx context.Context, grantOperationID string, reason domain.RevokeReason, text, actor string) (RevokeResult, error) {
	existing := func() (RevokeResult, bool, error) {
		rev := domain.RevocationID(grantOperationID)
		b, err := d.Store.BindingGetByOperation(ctx, rev)
		if errors.Is(err, domain.ErrNotFound) {
			return RevokeResult{}, false, nil
		}
		if err != nil {
			return RevokeResult{}, false, err
		}
		return RevokeResult{OperationID: rev, Binding: b.Status}, true, nil
	}
	c, status, err := d.Store.RevocationCandidateOf(ctx, grantOperationID)
	if errors.Is(err, domain.ErrNotFound) {
		if r, ok, err := existing(); ok || err != nil {
			return r, err
		}
		// A grant whose renewal owns the row is known, not missing: its
		// access cannot be given back while the renewal runs (the
		// renewal decides first; see docs/workflow.md, "Renewal").
		if op, gerr := d.Store.OperationGet(ctx, grantOperationID); gerr == nil {
			if b, berr := d.Store.BindingGet(ctx, op.Subject, op.TargetKey); berr == nil && b.Status == domain.BindingRenewing {
				return RevokeResult{}, fmt.Errorf("%s is being renewed by %s: %w", grantOperationID, b.OperationID, ErrNotInEffect)
			}
		}
		return RevokeResult{}, err
	}
	if err != nil {
		return RevokeResult{}, err
	}
	if status != domain.BindingValidated {
		return RevokeResult{}, fmt.Errorf("%s is %s: %w", grantOperationID, status, ErrNotInEffect)
	}
	created, err := d.createRevocations(ctx, []store.RevocationCandidate{c}, reason, text, actor)
	if err != nil && !errors.Is(err, domain.ErrPreempted) {
		return RevokeResult{}, err
	}
	if len(created) == 1 {
		return RevokeResult{OperationID: created[0].OperationID, Created: true, Binding: domain.BindingRevoking}, nil
	}
	// Lost the race: the scan (or a second call) revoked it first, or the
	// binding moved on.
	if r, ok, err := existing(); ok || err != nil {
		return r, err
	}
	return RevokeResult{}, fmt.Errorf("%s changed while revoking it: %w", grantOperationID, ErrNotInEffect)
}
