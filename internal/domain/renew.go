package domain

import (
	"slices"
	"time"
)

// RenewWindow is when a grant in effect may be renewed: during the last
// Percent % of its duration before its expiry, but never less than Min
// (configuration items expiry.renewWindow and expiry.renewWindowMin,
// docs/flows/lifecycle.md "Renewal").
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
	// RenewalExpired: cut off by the expiry scan (RENEW_EXPIRED) — with
	// no MR yet (waiting for its approval, or in the batch set), by the
	// grant's revocation; with an MR of its own (either flow, running or
	// stopped), once its MR is closed and the row goes back to the expired
	// grant; the access is being removed.
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

// ExpiryCut is what the expiry scan does to a renewal whose grant's
// expiry has passed before the renewal took effect (docs/flows/lifecycle.md,
// "Renewal": expiry wins in every flow). Decided by ExpiryCutOf from where
// the renewal is, before anything is written; the store applies it with
// guarded writes.
type ExpiryCut int

// Expiry cuts.
const (
	// ExpiryCutNone: nothing to cut — the renewal has merged (it follows
	// its merge to "in effect": merged wins) or has ended already.
	ExpiryCutNone ExpiryCut = iota
	// ExpiryCutWithRevocation: the renewal has no MR (waiting for its
	// approval on the approve-first flow, or approved and waiting in the
	// batch set): it is cut in the very transaction that creates the
	// grant's revocation, which takes the row at once.
	ExpiryCutWithRevocation
	// ExpiryCutWithdraw: the renewal has, or may be creating, an MR of its
	// own (the legacy flow's MR waiting for its approval, an approved
	// renewal's MR being built, checked, approved or merged, or a stop on
	// a failure): RENEW_EXPIRED with the withdraw action due, pre-empting
	// any step still running; the action withdraws its approval, closes
	// the MR and hands the row back to the grant, which the next scan
	// revokes — or finds the MR merged and follows it (merged wins).
	ExpiryCutWithdraw
	// ExpiryCutLeftToBatch: a batch round has claimed the renewal; its
	// batch's MR carries the other members' edits too and cannot lose one
	// without being rebuilt. The batch finishes: merged, the renewal is in
	// effect (merged wins); otherwise settlement puts it back in the batch
	// set (or stops it), where a later scan cuts it.
	ExpiryCutLeftToBatch
)

// String names the cut (logs, test names).
func (c ExpiryCut) String() string {
	switch c {
	case ExpiryCutWithRevocation:
		return "with-revocation"
	case ExpiryCutWithdraw:
		return "withdraw"
	case ExpiryCutLeftToBatch:
		return "left-to-batch"
	}
	return "none"
}

// RenewalPlace is where a renewal is, as the expiry scan read it.
type RenewalPlace struct {
	Step StepStatus
	// HasMR: an MR of the renewal's own is recorded.
	HasMR bool
	// InSet: it has a waiting-set row no round has claimed.
	InSet bool
	// Claimed: a batch round claimed it (its batch, or a claimed waiting
	// row).
	Claimed bool
}

// ExpiryCutOf decides what the expiry scan does to a renewal at p whose
// grant has expired. Pure: the store reads the place, the caller decides,
// the store's guarded writes apply (a renewal that moved in between
// misses the guard and is decided again by the next scan). The steps the
// transition table lets move to RENEW_EXPIRED are the ones a cut may
// leave from: a step added there is covered here.
func ExpiryCutOf(p RenewalPlace) ExpiryCut {
	switch {
	case !slices.Contains(StepNext(p.Step), StepRenewExpired):
		return ExpiryCutNone // merged, ended, or cut already
	case p.Claimed:
		return ExpiryCutLeftToBatch
	case p.Step == StepCreateAdmitted && p.InSet:
		return ExpiryCutWithRevocation
	case p.Step == StepCreateAdmitted:
		// Neither in the set nor claimed: a round's claim in flight as it
		// was read; the next scan sees where it went.
		return ExpiryCutLeftToBatch
	case (p.Step == StepCreateApprovalSubmitting || p.Step == StepCreateApprovalSubmitted) && !p.HasMR:
		return ExpiryCutWithRevocation
	}
	return ExpiryCutWithdraw
}

// ExpiryCutSteps are the steps from which ExpiryCutOf cuts a renewal that
// no round has claimed (the scan's read narrows to them).
func ExpiryCutSteps() []StepStatus {
	var out []StepStatus
	for _, s := range Steps() {
		if slices.Contains(StepNext(s), StepRenewExpired) {
			out = append(out, s)
		}
	}
	return out
}

// RenewalExpiry is the expiry a renewal of days days gets when it is
// asked for at now on a grant ending at current: the later of now and
// current, plus days, but never later than now plus maxDays (the
// target's longest access), so renewing early does not lose the days
// still left and renewing repeatedly cannot stretch access past the
// target's maximum. A maxDays ≤ 0 (unknown) puts no cap. The result is
// UTC, truncated to the second as every stored time is.
func RenewalExpiry(now, current time.Time, days, maxDays int) time.Time {
	const day = 24 * time.Hour
	from := now
	if current.After(now) {
		from = current
	}
	exp := from.Add(time.Duration(days) * day)
	if maxDays > 0 {
		if limit := now.Add(time.Duration(maxDays) * day); exp.After(limit) {
			exp = limit
		}
	}
	return exp.UTC().Truncate(time.Second)
}
