package domain

import "time"

// SubmitRow is the relationship's binding row as a submission read it.
// The read takes no lock: the unique key on insert and the pinned writes
// of a reset or a renewal make a decision on a stale row fail its guard,
// and the store then reads and decides again.
type SubmitRow struct {
	Status BindingStatus
	// Owner is the request the row was last applied for.
	Owner string
	// ExpiresAt is when its access lapses; zero for none.
	ExpiresAt time.Time
	// Expired says whether ExpiresAt had passed by the database clock
	// when the row was read, never by the caller's clock.
	Expired bool
}

// InEffect reports whether the row's access is in effect: VALIDATED and
// not expired.
func (r SubmitRow) InEffect() bool { return r.Status == BindingValidated && !r.Expired }

// ExpiredAwaitingRemoval reports whether the row is VALIDATED past its
// expiry: the access has lapsed, its entry is still on the default branch
// until the expiry scan's revocation removes it.
func (r SubmitRow) ExpiredAwaitingRemoval() bool { return r.Status == BindingValidated && r.Expired }

// Refusal is the answer to a submission that row refuses, with the
// reason the API sends as data.reason: ALREADY_IN_EFFECT (in_effect) for
// an access in effect, else REQUEST_IN_PROGRESS — expired_being_removed
// for an expired access whose removal is due, in_progress for a row in
// flight or a failed row awaiting recovery, whose operationId must not be
// replaced.
func (r SubmitRow) Refusal() (Code, Reason) {
	switch {
	case r.InEffect():
		return CodeAlreadyInEffect, ReasonInEffect
	case r.ExpiredAwaitingRemoval():
		return CodeRequestInProgress, ReasonExpiredBeingRemoved
	}
	return CodeRequestInProgress, ReasonInProgress
}

// RenewalTerms set the expiry a renewal gets (RenewalExpiry): asked for
// at At, for Days, never past MaxDays from At.
type RenewalTerms struct {
	At      time.Time
	Days    int
	MaxDays int
}

// SubmitRequest is the new request a submission applies for its
// relationship.
type SubmitRequest struct {
	// Step is the request's first step (0 when only the binding is
	// applied, with no operation).
	Step StepStatus
	// Binding is the relationship's first state for it, e.g.
	// APPROVAL_SENDING; ExpiresAt its expiry (zero: none).
	Binding   BindingStatus
	ExpiresAt time.Time
	// Renew, when set, accepts the request as a renewal of an access in
	// effect whose renewal window is open; nil refuses an access in
	// effect, as before renewals existed.
	Renew *RenewWindow
	// Terms, when set, give an accepted renewal its expiry from the
	// grant's current one, so the days still left on it are kept; nil
	// keeps ExpiresAt.
	Terms *RenewalTerms
}

// SubmitView is what the store read that a submission is decided from.
// Two parts are read only when the decision needs them (NeedsGrant,
// NeedsWindow), so a submission reads no more than it did when the
// decision was made inside the transaction.
type SubmitView struct {
	Request SubmitRequest
	// Row is the relationship's binding row; nil when it has none.
	Row *SubmitRow
	// GrantFound and GrantDuration are the operation of the access in
	// effect (Row.Owner), read only when NeedsGrant: the renewal window
	// is a share of the grant's own duration. A row without its operation
	// (written by hand) has nothing to renew.
	GrantFound    bool
	GrantDuration time.Duration
	// WindowOpen says whether RenewFrom has passed by the database clock,
	// read only when NeedsWindow.
	WindowOpen bool
}

// NeedsGrant reports whether deciding v needs the grant in effect read:
// only a renewal of an access in effect asks for its window.
func (v SubmitView) NeedsGrant() bool {
	return v.Row != nil && !v.Row.Status.Reappliable() && v.Request.Renew != nil && v.Row.InEffect()
}

// RenewFrom is when the renewal window of the access in effect opens;
// zero when there is no window to test (not a renewal, no grant read, or
// an access without expiry, which never needs renewing).
func (v SubmitView) RenewFrom() time.Time {
	if !v.NeedsGrant() || !v.GrantFound {
		return time.Time{}
	}
	return v.Request.Renew.From(v.Row.ExpiresAt, v.GrantDuration)
}

// NeedsWindow reports whether deciding v needs WindowOpen read (the
// database clock against RenewFrom).
func (v SubmitView) NeedsWindow() bool { return !v.RenewFrom().IsZero() }

// SubmitWrite is what a submission writes to its relationship's row.
type SubmitWrite int

// The writes of a submission.
const (
	// SubmitRefuse: the row may not be overwritten; nothing is written.
	SubmitRefuse SubmitWrite = iota
	// SubmitInsert: no row yet; insert one (version 1). A duplicate key
	// is a concurrent first application: a lost race.
	SubmitInsert
	// SubmitReset: a re-appliable row is reset in place for the request,
	// pinned to the status and version read.
	SubmitReset
	// SubmitRenew: the access in effect is renewed: VALIDATED → RENEWING,
	// the row handed to the request, its expiry left as it is until the
	// renewal is deployed; pinned to the status and version read and to
	// the expiry still ahead (database clock).
	SubmitRenew
)

// String names the write (test names, logs).
func (w SubmitWrite) String() string {
	switch w {
	case SubmitInsert:
		return "insert"
	case SubmitReset:
		return "reset"
	case SubmitRenew:
		return "renew"
	}
	return "refuse"
}

// SubmitPlan is exactly what a submission writes.
type SubmitPlan struct {
	Write SubmitWrite
	// Code and Reason are the refusal (SubmitRefuse only).
	Code   Code
	Reason Reason
	// Binding is the status the row gets (RENEWING for a renewal).
	Binding BindingStatus
	// Expiry is the request's expiry: what the binding history records
	// and the operation keeps — for a renewal, the one its terms give.
	Expiry time.Time
	// Renews is the grant a renewal renews (the row's owner as read); ""
	// when it is not a renewal. The operation then names it, which makes
	// it kind RENEW.
	Renews string
	// History is the request's first step-history row.
	History StepMove
}

// Submit decides what applying the request of v writes (I5):
//
//  1. no row: insert one;
//  2. an access in effect, with a renewal asked for, whose window is open
//     by the database clock: renew it (RENEWING, the row handed over, its
//     expiry the grant's until the renewal is deployed);
//  3. any other row that is not re-appliable — in flight, awaiting
//     recovery, an access in effect, an expired access whose removal is
//     due — is refused (SubmitRow.Refusal);
//  4. a re-appliable row (REJECTED, CLOSED, REVOKED) is reset in place.
//
// Its error wraps ErrIllegalTransition when the tables refuse the
// renewal's move.
func Submit(v SubmitView) (SubmitPlan, error) {
	rq := v.Request
	p := SubmitPlan{
		Binding: rq.Binding, Expiry: rq.ExpiresAt,
		History: StepMove{To: rq.Step, ToBinding: rq.Binding, Note: "submitted"},
	}
	switch {
	case v.Row == nil:
		p.Write = SubmitInsert
		return p, nil
	case v.NeedsGrant():
		if v.NeedsWindow() && v.WindowOpen {
			return renewal(v, p)
		}
	case v.Row.Status.Reappliable():
		p.Write = SubmitReset
		return p, nil
	}
	p = SubmitPlan{Write: SubmitRefuse}
	p.Code, p.Reason = v.Row.Refusal()
	return p, nil
}

// renewal is Submit's plan for a renewal of the access in effect on
// v.Row.
func renewal(v SubmitView, p SubmitPlan) (SubmitPlan, error) {
	if err := CheckBinding(BindingValidated, BindingRenewing); err != nil {
		return SubmitPlan{}, err
	}
	p.Write, p.Binding, p.Renews = SubmitRenew, BindingRenewing, v.Row.Owner
	if t := v.Request.Terms; t != nil {
		p.Expiry = RenewalExpiry(t.At, v.Row.ExpiresAt, t.Days, t.MaxDays)
	}
	p.History.FromBinding, p.History.ToBinding = BindingValidated, BindingRenewing
	p.History.Note = "submitted: renewal of " + v.Row.Owner
	return p, nil
}
