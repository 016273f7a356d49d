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
