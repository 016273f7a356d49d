package single

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	"changeflow/internal/approval"
	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/workflow/callbacks"
)

// pollApprovalDecl: a poll that errors, panics or is refused by the pool
// stops polling and leaves the request where it is — waiting in
// APPROVAL_SENT, where the callback still applies — instead of failing
// it: not knowing the decision yet is no failure of the request. The kept
// action (poll_approval) lets a retrigger poll again.
var pollApprovalDecl = engine.Declaration{
	OnError: engine.Failure{Step: domain.StepCreateApprovalSubmitted, Binding: domain.BindingApprovalSent},
}

// pollApproval is poll_approval, the fallback for a lost approval
// callback: while the request waits in APPROVAL_SENT it reads its
// approval from the approval system on the polling.approval tier (a
// rescheduled step, never a sleep), and once the approval is decided it
// applies the decision through the callback's own path
// (callbacks.Applier.RecordPolled): recorded in the callback inbox under the
// decision's delivery key, then the same ownership and waiting-set guard.
// Whichever of the poll and the callback comes second changes nothing —
// a duplicate delivery or a stale guard.
//
//   - approval system unreachable, 5xx, breaker open, not found yet →
//     poll again at the next tier time (last_error says why); never a
//     failure, so a flaky approval system cannot fail a request;
//   - still PENDING → poll again;
//   - decided → applied: the guard's write schedules the decision's next
//     action and pre-empts this run's lease, so this run's own outcome is
//     dropped; stale (the request no longer waits for this approval) →
//     polling stops;
//   - the tier's timeout spent → polling stops with the action kept: the
//     request still waits in APPROVAL_SENT for its callback, and a
//     retrigger polls again. A person may take days to decide; the
//     timeout bounds the calls, not the request.
func (d Steps) pollApproval(ctx context.Context, w engine.Work) (engine.Outcome, error) {
	op := w.Operation
	tier := d.Config().Polling(config.PollingApproval)
	if domain.StepStatus(op.Step) != domain.StepCreateApprovalSubmitted {
		// A callback or a retrigger replaces this action when it moves
		// the request; a row elsewhere has nothing to poll for.
		return engine.Done("", engine.Transition{Note: "poll_approval: no longer waiting for an approval"}), nil
	}
	a, found, err := d.readApproval(ctx, op.OperationID, op.ApprovalID)
	switch {
	case err != nil:
		return pollApprovalAgain(tier, w, "read approval: "+err.Error()), nil
	case !found || !a.Status.Decided():
		return pollApprovalAgain(tier, w, ""), nil
	}
	key := polledDeliveryKey(a)
	res, _, err := d.applier().RecordPolled(ctx, op.OperationID, a, key, "approval-poll")
	if err != nil {
		// Nothing was applied (one transaction); the next poll tries again.
		return pollApprovalAgain(tier, w, "apply polled decision: "+err.Error()), nil
	}
	if res == callbacks.Applied {
		d.Log().Info("approval decision found by polling", "operation", op.OperationID,
			"approval", a.ApprovalID, "result", a.Status, "delivery", key)
		return engine.Done("", engine.Transition{Note: "approval " + a.ApprovalID + " " + string(a.Status) + " found by polling"}), nil
	}
	return engine.Done("", engine.Transition{Note: "poll_approval: the request no longer waits for approval " + a.ApprovalID}), nil
}

// readApproval reads operationID's approval: by its id when the submit
// recorded one, else (or when the system does not know that id) by the
// operationId. An approval of another operation is not ours.
func (d Steps) readApproval(ctx context.Context, operationID, approvalID string) (approval.Approval, bool, error) {
	if approvalID != "" {
		a, err := d.Approval.Get(ctx, approvalID)
		switch {
		case err == nil && a.OperationID == operationID:
			return a, true, nil
		case err != nil && !approval.IsNotFound(err):
			return approval.Approval{}, false, err
		}
	}
	return d.Approval.FindByOperationID(ctx, operationID)
}

// polledDeliveryKey is the inbox key of a decision found by polling: the
// delivery id of the decision's callback when the approval system reports
// it — so that callback, arriving later, is a duplicate delivery — else
// one derived from the approval id and the decision, so every poll of the
// same decision is one inbox row and the callback, under its own key,
// meets the guard as stale.
func polledDeliveryKey(a approval.Approval) string {
	if k := a.CallbackRequestID; k != "" && len(k) <= 128 {
		return k
	}
	k := "poll:" + a.ApprovalID + ":" + string(a.Status)
	if len(k) > 128 {
		sum := sha256.Sum256([]byte(a.ApprovalID + ":" + string(a.Status)))
		k = "poll:" + hex.EncodeToString(sum[:])
	}
	return k
}

// pollApprovalAgain schedules the next poll at the tier time, with
// lastError as the row's last_error ("" clears it), or stops polling once
// the tier's budget is spent — the request keeping its state (see
// pollApproval).
func pollApprovalAgain(tier config.PollingTier, w engine.Work, lastError string) engine.Outcome {
	wait, timedOut := engine.NextPoll(engine.PollTier(tier), w.Attempt)
	if timedOut {
		return engine.TimedOut(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent,
			"approval still undecided after polling.approval.timeout; waiting for its callback")
	}
	return engine.WaitUntil(w.Now.Add(wait), engine.Transition{}).WithReason(lastError)
}
