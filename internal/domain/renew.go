package domain

import "time"

// RenewWindow is when a grant in effect may be renewed: during the last
// Percent % of its duration before its expiry, but never less than Min
// (configuration items expiry.renewWindow and expiry.renewWindowMin,
// docs/workflow.md "Renewal").
//
// A share of the duration, not a fixed time: a 90-day grant opens for
// renewal weeks ahead, a one-day grant hours ahead. The minimum keeps a
// short grant's window long enough to get an approval in; for a grant
// shorter than Min the window is the whole grant.
type RenewWindow struct {
	Percent int
	Min     time.Duration
}

// From is the time from which a grant lasting duration and ending at
// expiresAt may be renewed; zero for a grant without expiry (it never
// needs renewing). A duration ≤ 0 (unknown) counts as Min alone.
func (w RenewWindow) From(expiresAt time.Time, duration time.Duration) time.Time {
	if expiresAt.IsZero() {
		return time.Time{}
	}
	pct := min(max(w.Percent, 0), 100)
	window := max(time.Duration(0), duration) / 100 * time.Duration(pct)
	window = max(window, w.Min)
	return expiresAt.Add(-window).UTC().Truncate(time.Second)
}

// RenewalOutcome is how a renewal ended: the label of the renewal metric
// (docs/api.md, "Metrics"), a closed set.
type RenewalOutcome string

// Renewal outcomes.
const (
	// RenewalInEffect: merged and deployed, the access's expiry moved to
	// the renewal's (RENEWING → VALIDATED, deploy callback or
	// reconciliation).
	RenewalInEffect RenewalOutcome = "IN_EFFECT"
	// RenewalRejected: the approver said no, or withdrew the approval
	// (CLOSE_REJECTED, CLOSE_WITHDRAWN); the access is unchanged.
	RenewalRejected RenewalOutcome = "REJECTED"
	// RenewalClosed: ended without effect otherwise (its MR closed, a
	// failure closed, withdrawn by its requester — the access unchanged —
	// or cut off by a give-back or an operator's revocation, RENEW_REVOKED,
	// the access being removed).
	RenewalClosed RenewalOutcome = "CLOSED"
	// RenewalExpired: cut off by the expiry scan (RENEW_EXPIRED) — while
	// it still waited for its approval, or, stopped on a failure, once its
	// MR is closed and the row goes back to the expired grant; the access
	// is being removed.
	RenewalExpired RenewalOutcome = "EXPIRED"
)

// RenewalOutcomes lists the outcomes in a fixed order.
func RenewalOutcomes() []RenewalOutcome {
	return []RenewalOutcome{RenewalInEffect, RenewalRejected, RenewalClosed, RenewalExpired}
}

// RenewalEndOf is the outcome a renewal's binding move records: from
// RENEWING to VALIDATED in effect; a move that ended it without effect
// (endedWithoutEffect: the row went back to the grant it renews) by the
// step it ended at. "" when the move ends no renewal. The expiry's cut
// (RenewalExpired) is no such move — the revocation takes the row — and is
// reported by whoever creates the revocation.
func RenewalEndOf(from, to BindingStatus, endedWithoutEffect bool, step StepStatus) RenewalOutcome {
	switch {
	case endedWithoutEffect && (step == StepCloseRejected || step == StepCloseWithdrawn):
		return RenewalRejected
	case endedWithoutEffect && step == StepRenewExpired:
		// A renewal stopped on a failure that the expiry scan withdrew:
		// the row goes back to its expired grant when its MR is closed.
		return RenewalExpired
	case endedWithoutEffect:
		return RenewalClosed
	case from == BindingRenewing && to == BindingValidated:
		return RenewalInEffect
	}
	return ""
}
