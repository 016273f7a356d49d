package flow

import (
	"context"

	"changeflow/internal/domain"
	"changeflow/internal/store"
)

// Observer is told what the flows' commits changed, each event once and
// only after the transaction that made it committed (I9): a retried step,
// a duplicate callback or a rolled-back write moves nothing and tells
// nothing. The composition root implements it with the business metrics;
// tests count with it. Its methods run on the goroutine that committed (a
// worker, an HTTP handler, a scan) and must not block for long.
type Observer interface {
	// Validated: a binding moved MERGED → VALIDATED (a deploy callback
	// or reconciliation confirmed a grant or a renewal in effect).
	Validated(ctx context.Context, f store.Flip)
	// Withdrawn: a request its requester withdrew, when the withdrawal
	// moved its binding to CLOSED (a renewal's: back to its grant); place
	// is where it stood.
	Withdrawn(ctx context.Context, place store.WithdrawPlace)
	// Revoked: a binding moved to REVOKED (the removal confirmed by a
	// deploy callback or reconciliation, or nothing left to remove).
	Revoked(ctx context.Context, f store.Flip)
	// RevocationCreated: a revocation was created (the expiry scan, a
	// give-back, an operator), for reason.
	RevocationCreated(ctx context.Context, r store.RevocationCreated, reason domain.RevokeReason)
	// RenewalEnded: a renewal ended — in effect, rejected, closed, or cut
	// off by the expiry — in the transaction that moved it there.
	RenewalEnded(ctx context.Context, operationID string, outcome domain.RenewalOutcome)
	// SecurityEvent: a security event was recorded (a foreign head,
	// branch or MR; kind is one of SecurityEventKinds), after its audit
	// record.
	SecurityEvent(ctx context.Context, kind string)
}

// NopObserver observes nothing. Embed it to implement only the events
// one cares about; an Env without an Observer uses it.
type NopObserver struct{}

// Validated does nothing.
func (NopObserver) Validated(context.Context, store.Flip) {}

// Withdrawn does nothing.
func (NopObserver) Withdrawn(context.Context, store.WithdrawPlace) {}

// Revoked does nothing.
func (NopObserver) Revoked(context.Context, store.Flip) {}

// RevocationCreated does nothing.
func (NopObserver) RevocationCreated(context.Context, store.RevocationCreated, domain.RevokeReason) {}

// RenewalEnded does nothing.
func (NopObserver) RenewalEnded(context.Context, string, domain.RenewalOutcome) {}

// SecurityEvent does nothing.
func (NopObserver) SecurityEvent(context.Context, string) {}
