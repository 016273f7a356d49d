package domain

// Reason names which refusal of its code an answer is, where one code
// covers several situations a client words differently: a give-back
// refused because the renewal has its own change under way, or because it
// stopped on a failure, are both REQUEST_IN_PROGRESS. It is sent as the
// envelope's data.reason, so a client chooses its words from it and never
// from the message, which is for people and may be reworded. Names are
// stable snake_case; docs/api.md ("Refusal reasons") says what each means
// and docs/openapi.yaml lists them (a test holds both to Reasons).
type Reason string

// Refusal reasons, grouped by the answers that carry them.
const (
	// ReasonRenewalHasChange: giving back an access whose renewal has its
	// own merge request under way; withdraw the renewal first.
	ReasonRenewalHasChange Reason = "renewal_has_change"
	// ReasonRenewalMerging: giving back an access whose renewal is being
	// merged (claimed into a batch, or its MR merging); give back the
	// renewal once it is in effect.
	ReasonRenewalMerging Reason = "renewal_merging"
	// ReasonRenewalStopped: giving back an access whose renewal stopped on
	// a failure and waits for an operator.
	ReasonRenewalStopped Reason = "renewal_stopped"
	// ReasonRenewalExpired: giving back an access that expired while its
	// renewal is being closed; the expiry scan removes it.
	ReasonRenewalExpired Reason = "renewal_expired"

	// ReasonNotInEffect: giving back a request whose access is not in
	// effect (still being granted, rejected, closed, failed).
	ReasonNotInEffect Reason = "not_in_effect"
	// ReasonRenewed: giving back a request whose access a renewal carries
	// now (data.operationId); give that one back.
	ReasonRenewed Reason = "renewed"
	// ReasonRemoved: giving back a request whose access is being removed,
	// or was, by a revocation (data.operationId).
	ReasonRemoved Reason = "removed"

	// ReasonInProgress: a submission for a target whose binding is in
	// flight or awaiting recovery.
	ReasonInProgress Reason = "in_progress"
	// ReasonExpiredBeingRemoved: a submission while the caller's expired
	// access is still being removed; ask again once it is.
	ReasonExpiredBeingRemoved Reason = "expired_being_removed"
	// ReasonInEffect: the access is in effect: a submission for it, or a
	// withdrawal or close of a request that already took effect.
	ReasonInEffect Reason = "in_effect"
	// ReasonMergedFirst: the merge won the race with a withdrawal or a
	// close; the request takes effect.
	ReasonMergedFirst Reason = "merged_first"

	// ReasonClaimedByBatch: a withdrawal or close of a request a batch
	// round took in, whose merge request is under way.
	ReasonClaimedByBatch Reason = "claimed_by_batch"
	// ReasonMerging: a withdrawal of a request being merged.
	ReasonMerging Reason = "merging"
	// ReasonStoppedOnFailure: a withdrawal of a request that stopped on a
	// failure and waits for an operator.
	ReasonStoppedOnFailure Reason = "stopped_on_failure"
	// ReasonCloseFailed: the withdrawal or close is recorded, but closing
	// the merge request failed; an operator retries it.
	ReasonCloseFailed Reason = "close_failed"
	// ReasonIsRevocation: a withdrawal or an operator's close of a removal
	// of access (a revocation, the owner's own give-back too).
	ReasonIsRevocation Reason = "is_revocation"
	// ReasonStoppedWhileMerging: an operator's close of a request that
	// stopped while being merged; retrigger it instead.
	ReasonStoppedWhileMerging Reason = "stopped_while_merging"
	// ReasonNotStopped: an operator's close or retrigger of a request that
	// is not stopped (waiting for its next step, running, or finished).
	ReasonNotStopped Reason = "not_stopped"
	// ReasonPipelineNotRetried: an operator's retrigger whose failed
	// pipeline GitLab refused to re-run.
	ReasonPipelineNotRetried Reason = "pipeline_not_retried"
	// ReasonNotRetriggerable: an operator's retrigger from a step that has
	// no retry.
	ReasonNotRetriggerable Reason = "not_retriggerable"
	// ReasonMRWontClose: an operator's settlement of a batch whose merge
	// request does not close.
	ReasonMRWontClose Reason = "mr_wont_close"

	// ReasonTargetClosed: a submission for a target whose access mode is
	// CLOSED.
	ReasonTargetClosed Reason = "target_closed"
	// ReasonOutsideWindow: a submission for a test-window target outside
	// its window (or whose window is misconfigured, which counts as
	// outside).
	ReasonOutsideWindow Reason = "outside_window"

	// ReasonOwnAccess: a review decision on the caller's own access;
	// another owner or an operator decides it.
	ReasonOwnAccess Reason = "own_access"
	// ReasonNotReviewer: a review decision by someone who is neither an
	// owner of the target nor an operator.
	ReasonNotReviewer Reason = "not_reviewer"
	// ReasonAlreadyDecided: a review item decided already.
	ReasonAlreadyDecided Reason = "already_decided"
	// ReasonReviewClosed: a decision on an item of a closed campaign.
	ReasonReviewClosed Reason = "review_closed"
	// ReasonReviewOpen: opening a campaign for a target that has an open
	// one.
	ReasonReviewOpen Reason = "review_open"
)

// Reasons is every refusal reason, in the order docs/api.md lists them.
func Reasons() []Reason {
	return []Reason{
		ReasonRenewalHasChange, ReasonRenewalMerging, ReasonRenewalStopped, ReasonRenewalExpired,
		ReasonNotInEffect, ReasonRenewed, ReasonRemoved,
		ReasonInProgress, ReasonExpiredBeingRemoved, ReasonInEffect, ReasonMergedFirst,
		ReasonClaimedByBatch, ReasonMerging, ReasonStoppedOnFailure, ReasonCloseFailed,
		ReasonIsRevocation, ReasonStoppedWhileMerging, ReasonNotStopped, ReasonPipelineNotRetried,
		ReasonNotRetriggerable, ReasonMRWontClose,
		ReasonTargetClosed, ReasonOutsideWindow,
		ReasonOwnAccess, ReasonNotReviewer, ReasonAlreadyDecided, ReasonReviewClosed, ReasonReviewOpen,
	}
}

// RefusalData is the data of a refusal that refers to nothing but its
// reason.
type RefusalData struct {
	Reason Reason `json:"reason"`
}

// Refusef is Errorf for a refusal with a reason: data is {"reason": r}.
func Refusef(code Code, r Reason, msg, format string, args ...any) *Error {
	e := Errorf(code, msg, format, args...)
	e.Data = RefusalData{Reason: r}
	return e
}
