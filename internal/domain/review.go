package domain

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Access reviews (docs/reviews.md): a campaign per target holds one item per
// entry in effect when it opens; the target's owners decide keep or revoke,
// and at the due date every undecided item takes the campaign's default.
// The rules live here, as pure functions, so the store only records what
// was decided and the routes only ask.

// ReviewDecision is an item's decision, stored by name
// (review_item.decision, review_campaign.default_decision).
type ReviewDecision string

// Review decisions.
const (
	ReviewKeep   ReviewDecision = "keep"
	ReviewRevoke ReviewDecision = "revoke"
)

// ParseReviewDecision reads a decision as a client or the configuration
// writes it (any case, surrounding blanks ignored); ok is false for
// anything else.
func ParseReviewDecision(s string) (ReviewDecision, bool) {
	switch d := ReviewDecision(strings.ToLower(strings.TrimSpace(s))); d {
	case ReviewKeep, ReviewRevoke:
		return d, true
	}
	return "", false
}

// Campaign statuses (review_campaign.status).
const (
	ReviewOpen   = "open"
	ReviewClosed = "closed"
)

// ReviewActor is the step-history actor of a removal the campaign's
// default decided (no person did): "review:<id>".
func ReviewActor(campaignID int64) string { return fmt.Sprintf("review:%d", campaignID) }

// ReviewRevokeText is the reason text of a review's removal: it names the
// campaign and who decided, and appears in the removal MR's description
// (the review is the removal's authorization).
func ReviewRevokeText(campaignID int64, target, decidedBy string, byDefault bool, comment string) string {
	s := fmt.Sprintf("access review %d of %s: revoked by %s", campaignID, target, decidedBy)
	if byDefault {
		s = fmt.Sprintf("access review %d of %s: not decided by its due date, revoked by the campaign's default", campaignID, target)
	}
	if c := strings.TrimSpace(comment); c != "" {
		s += " (" + c + ")"
	}
	return s
}

// Reviewer is who asks to decide or see review items: their account, and
// whether they hold ops.write (an operator may act for the owners).
type Reviewer struct {
	Account  string
	Operator bool
}

// ReviewRefusal says why a reviewer may not decide an item; ReviewAllowed
// (the zero value) means they may.
type ReviewRefusal int

// Review refusals.
const (
	ReviewAllowed ReviewRefusal = iota
	// ReviewOwnAccess: the item is the reviewer's own access. Nobody
	// reviews their own access, whatever else they are: it goes to
	// another owner or an operator.
	ReviewOwnAccess
	// ReviewNotReviewer: neither an owner of the target nor an operator.
	ReviewNotReviewer
)

// Message is the refusal in words for the reviewer.
func (r ReviewRefusal) Message() string {
	switch r {
	case ReviewOwnAccess:
		return "This is your own access: nobody reviews their own access. Another owner of the target or an operator decides it."
	case ReviewNotReviewer:
		return "You are not an owner of this target, so you cannot decide its review items."
	}
	return ""
}

// Reason is the refusal's data.reason.
func (r ReviewRefusal) Reason() Reason {
	if r == ReviewOwnAccess {
		return ReasonOwnAccess
	}
	return ReasonNotReviewer
}

// MayDecide decides whether rv may decide the review item of subject on a
// target owned by owners (targets.KEY.owners). The own-access rule comes
// first: an owner or an operator is refused their own item. A target
// without owners is decided by operators only.
func MayDecide(rv Reviewer, owners []string, subject string) ReviewRefusal {
	switch {
	case rv.Account == "" || strings.EqualFold(rv.Account, subject):
		return ReviewOwnAccess
	case rv.Operator || slices.ContainsFunc(owners, func(o string) bool { return strings.EqualFold(o, rv.Account) }):
		return ReviewAllowed
	}
	return ReviewNotReviewer
}

// ReviewOpenProblem checks a campaign's opening at now: dueAt must lie in
// the future. It returns "" when it does, else the problem in words.
func ReviewOpenProblem(now, dueAt time.Time) string {
	switch {
	case dueAt.IsZero():
		return "is required (RFC 3339, in the future)"
	case !dueAt.After(now):
		return "must be in the future"
	}
	return ""
}

// ReviewItemState is what the due-date rule needs of an item.
type ReviewItemState struct {
	// Decision is "" while undecided.
	Decision ReviewDecision
}

// ReviewAtDue is what happens to an item at its campaign's due date:
// an undecided item takes the campaign's default (byDefault true); a
// decided one keeps its decision.
func ReviewAtDue(item ReviewItemState, def ReviewDecision) (d ReviewDecision, byDefault bool) {
	if item.Decision != "" {
		return item.Decision, false
	}
	return def, true
}

// ReviewScheduleDue reports whether a target reviewed every every needs a
// new scheduled campaign at now: never when every is 0 (no schedule) or a
// campaign of the target is open; at once when none was ever opened;
// otherwise once the last one opened at least every ago.
func ReviewScheduleDue(every time.Duration, lastOpenedAt time.Time, anyOpen bool, now time.Time) bool {
	switch {
	case every <= 0 || anyOpen:
		return false
	case lastOpenedAt.IsZero():
		return true
	}
	return !now.Before(lastOpenedAt.Add(every))
}
