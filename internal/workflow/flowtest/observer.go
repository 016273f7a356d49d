package flowtest

import (
	"context"
	"fmt"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flow"
)

// Observer records every event the flows tell it, one line each in
// Events, in order: a test compares the lines with what the commits it
// scripted must tell, so an event told twice, or one too many, fails it.
type Observer struct {
	Events []string
}

var _ flow.Observer = (*Observer)(nil)

func (o *Observer) add(format string, args ...any) {
	o.Events = append(o.Events, fmt.Sprintf(format, args...))
}

// Validated records "validated <operation>".
func (o *Observer) Validated(_ context.Context, f store.Flip) { o.add("validated %s", f.OperationID) }

// Withdrawn records "withdrawn from <place>".
func (o *Observer) Withdrawn(_ context.Context, place store.WithdrawPlace) {
	o.add("withdrawn from %s", place)
}

// Revoked records "revoked <operation>".
func (o *Observer) Revoked(_ context.Context, f store.Flip) { o.add("revoked %s", f.OperationID) }

// RevocationCreated records "revocation created <operation> <reason>".
func (o *Observer) RevocationCreated(_ context.Context, r store.RevocationCreated, reason domain.RevokeReason) {
	o.add("revocation created %s %s", r.OperationID, reason)
}

// RenewalEnded records "renewal ended <operation> <outcome>".
func (o *Observer) RenewalEnded(_ context.Context, id string, outcome domain.RenewalOutcome) {
	o.add("renewal ended %s %s", id, outcome)
}

// SecurityEvent records "security event <kind>".
func (o *Observer) SecurityEvent(_ context.Context, kind string) { o.add("security event %s", kind) }
