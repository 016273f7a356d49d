package domain

import "time"

// ApprovedExpiry is the expiry an approve-first grant of days days gets
// when its approval arrives at approvedAt (docs/flows/lifecycle.md, "When the
// access ends"): approvedAt + days, at most approvedAt + maxDays (the
// target's longest access; ≤ 0: no cap), so days spent waiting for the
// approver are not taken out of the access. UTC, truncated to the second
// as every stored time is.
//
// Only a grant's end moves with its approval. The legacy flow keeps the
// end fixed at submission: its MR, which writes the end into the file,
// exists before the approval. A renewal keeps the end its submission got
// (RenewalExpiry): it counts from the grant's current end, which is later
// than any approval that can still take effect — a grant that expires
// first cuts its renewal — so the approval's time would move only the
// cap, and the end date the form showed before submit stays exact.
func ApprovedExpiry(approvedAt time.Time, days, maxDays int) time.Time {
	return RenewalExpiry(approvedAt, time.Time{}, days, maxDays)
}

// AwaitsApproval reports whether a request at step s waits for its
// approval: the form being submitted, submitted, or its submission
// failed (a retrigger submits it again). An approve-first grant's end is
// not known then — its days count from the approval — so its status read
// shows no expiresAt (docs/api.md, "When the access ends").
func AwaitsApproval(s StepStatus) bool {
	switch s {
	case StepCreateApprovalSubmitting, StepCreateApprovalSubmitted, StepCreateApprovalFailed:
		return true
	}
	return false
}
