package notify

// Per-person preferences: which kinds of message a person hears of on the
// channels addressed to people (e-mail). Webhooks and chat go to systems
// and rooms an operator configured, so preferences do not apply to them.

// PersonalKinds are the kinds a person may hear of about their own
// requests and reviews, in the order the preferences page lists them.
// The operators' kinds (batch.blocked, security.foreign_head) go to
// notify.operators and are not a person's to turn off.
var PersonalKinds = []Kind{
	KindRequestSubmitted, KindRequestApproved, KindRequestRejected,
	KindRequestInEffect, KindRequestFailed, KindRequestWithdrawn,
	KindRenewalInEffect, KindAccessExpiring, KindAccessRemoved,
	KindReviewAssigned,
}

// Safety reports whether k is a safety message: one that tells a person
// their access is about to end or has ended. It stays on unless the
// operator allows turning it off (notify.allowSafetyOptOut), because a
// person who did not hear of it learns of the loss when something fails.
func (k Kind) Safety() bool { return k == KindAccessExpiring || k == KindAccessRemoved }

// Personal reports whether k is one of PersonalKinds.
func (k Kind) Personal() bool {
	for _, p := range PersonalKinds {
		if p == k {
			return true
		}
	}
	return false
}

// Preference is one kind as a person's preferences page shows it.
type Preference struct {
	Kind Kind `json:"kind"`
	// Enabled: the person hears of this kind.
	Enabled bool `json:"enabled"`
	// Locked: the person cannot turn it off (a safety message, and the
	// operator does not allow opting out of those).
	Locked bool `json:"locked"`
}

// Allowed says whether a person whose explicit choices are set (kind →
// on; a kind not in set is on) hears of k. A safety kind is heard of
// whatever set says unless allowSafetyOptOut; a kind that is not
// personal is always allowed (it is not addressed by preference).
func Allowed(k Kind, set map[Kind]bool, allowSafetyOptOut bool) bool {
	if !k.Personal() || (k.Safety() && !allowSafetyOptOut) {
		return true
	}
	on, chosen := set[k]
	return !chosen || on
}

// Preferences is every personal kind with what Allowed makes of set.
func Preferences(set map[Kind]bool, allowSafetyOptOut bool) []Preference {
	out := make([]Preference, 0, len(PersonalKinds))
	for _, k := range PersonalKinds {
		out = append(out, Preference{Kind: k, Enabled: Allowed(k, set, allowSafetyOptOut), Locked: k.Safety() && !allowSafetyOptOut})
	}
	return out
}
