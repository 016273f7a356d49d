package callbacks

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flow"
)

// ApprovalEvent is an approval callback as the workflow acts on it
// (docs/api.md, "Callbacks"), after the HTTP layer authenticated, parsed and recorded it once
// by its delivery id (the first layer of dedupe).
type ApprovalEvent struct {
	DeliveryKey string
	ApprovalID  string
	OperationID string
	// Result is APPROVED, REJECTED or WITHDRAWN.
	Result string
	// MRID is ext.mrId; non-empty only on legacy-flow approvals.
	MRID string
	// verified: the decision was read from the approval system itself
	// (poll_approval), so approval.verifyDecisions needs no second read.
	// Unexported: nothing arriving over HTTP can claim it.
	verified bool
	// DecidedBy and Comment are who decided and their comment, as the
	// delivery reports them (optional fields of the callback; the read of
	// poll_approval). A decision confirmed by reading the approval system
	// (approval.verifyDecisions) takes the system's answer instead.
	DecidedBy, Comment string
}

// DeployEvent is a deploy callback: the deployment of an MR's merge.
type DeployEvent struct {
	// RowID is the callback's inbox row (0: none, nothing is noted).
	RowID       int64
	DeliveryKey string
	ProjectID   int64
	MRIID       int64
	Status      string
}

// Result is what acting on a callback did.
type Result int

// Callback results.
const (
	// Applied: the callback moved its request(s) on.
	Applied Result = iota + 1
	// Stale: not for the current owner, or not waiting for it, or
	// refused by the approval guard: answered 2xx IGNORED_STALE, nothing
	// changed.
	Stale
	// Deferred: recorded but not applied yet — the decision could
	// not be confirmed now (no approval id recorded yet; with
	// approval.verifyDecisions, the read-back failed or says PENDING).
	// Answered 202 ACCEPTED; the inbox replay and poll_approval act on it
	// later.
	Deferred
)

// approvalWaiting is the callback guard's waiting set: SENDING is
// in it because the decision can arrive before SENT is written.
var approvalWaiting = []domain.BindingStatus{domain.BindingApprovalSending, domain.BindingApprovalSent}

// Callbacks acts on callbacks: the workflow side of the HTTP layer's
// CallbackSink (httpapi.WorkflowSink adapts it).
type Callbacks struct {
	d Applier
	e *engine.Engine
}

// New returns the callback handler over env and st. e, when non-nil, is woken
// after a callback scheduled work, so it starts at once.
func New(env flow.Env, st Store, e *engine.Engine) *Callbacks {
	return &Callbacks{d: Applier{Env: env, Store: st}, e: e}
}

// Approval applies an approval decision to its request, in one
// transaction with the work it schedules (store.WorkCallbackApply):
// ownership by operationId (a re-applied binding has a newer one), the
// waiting set {APPROVAL_SENDING, APPROVAL_SENT}, then by payload shape
// — ext.mrId present = legacy, so approvals sent before a
// switch of workflow.approveFirst finish on the flow they began:
//
//   - APPROVED, legacy → HANDLE_STARTED, MERGING, approve;
//   - APPROVED, approve-first, target without batching → CREATE_STARTED,
//     MR_CREATING, create_mr; with batching → CREATE_ADMITTED,
//     MR_CREATING and admitted to the batch waiting set (store
//     BatchAdmitTx) for a batch round to claim (the batch issue);
//   - REJECTED / WITHDRAWN → CLOSE_REJECTED / CLOSE_WITHDRAWN, REJECTED;
//     legacy also schedules close_mr.
func (c *Callbacks) Approval(ctx context.Context, ev ApprovalEvent) (Result, error) {
	res, next, err := c.d.applyApproval(ctx, ev)
	if err == nil && next != "" && c.e != nil {
		c.e.Wake()
	}
	return res, err
}

// ReplayApproval applies operationID's latest recorded approval decision
// (the callback inbox) again — an operator's replay, or the workflow's
// own look at the inbox after submit_approval wrote APPROVAL_SENT. The
// guard is the same as for a delivery, so a decision already acted on is
// stale. The inbox keeps no ext.mrId; the flow is read from what the
// database holds instead, which is equivalent while the request waits for
// its approval: a legacy request has its MR then, an approve-first one
// has none yet.
func (c *Callbacks) ReplayApproval(ctx context.Context, operationID string) (Result, error) {
	res, next, err := c.d.Replay(ctx, operationID)
	if err == nil && next != "" && c.e != nil {
		c.e.Wake()
	}
	return res, err
}

// Replay applies operationID's latest recorded approval decision again,
// through the same guard as a delivery, and returns the action it
// scheduled ("" for none): the operator's replay (Callbacks.ReplayApproval),
// submit_approval's look at the inbox and reconciliation's inbox pass.
func (d Applier) Replay(ctx context.Context, operationID string) (Result, string, error) {
	rec, ok, err := d.Store.ApprovalCallbackLatest(ctx, operationID)
	if err != nil || !ok {
		return Stale, "", err
	}
	op, err := d.Store.OperationGet(ctx, operationID)
	if err != nil {
		return 0, "", err
	}
	ev := ApprovalEvent{DeliveryKey: rec.DeliveryKey, ApprovalID: rec.ApprovalID, OperationID: operationID, Result: rec.Result,
		DecidedBy: rec.DecidedBy, Comment: rec.Comment}
	switch {
	case rec.MRIDRecorded:
		// The claim the delivery made is checked again, as on its first
		// run: replaying it with the request's own MR let a callback
		// naming another MR through when its replay ran before (or
		// instead of) that first check — a process dying between
		// recording and applying, or the SENT hook or the reconciler's
		// inbox pass racing the HTTP handler (seen in
		// TestApprovalCallbackAttacks; TestReplayKeepsTheClaimedMR).
		ev.MRID = rec.MRID
	case op.MRIID != 0:
		// A polled decision claims no MR, and a row recorded before the
		// inbox kept claims has none to check: the request's own MR.
		ev.MRID = strconv.FormatInt(op.MRIID, 10)
	}
	return d.applyApproval(ctx, ev)
}

// ApplyRecordedDecision is submit_approval's after-commit hook: a
// decision recorded while the request was not yet waiting for it, or
// whose sink call failed, is applied now.
func (d Applier) ApplyRecordedDecision(ctx context.Context, f store.Flip) {
	if res, _, err := d.Replay(ctx, f.OperationID); err != nil {
		d.Log().Warn("apply a recorded approval decision", "operation", f.OperationID, "err", err)
	} else if res == Applied {
		d.Log().Info("applied an approval decision from the callback inbox", "operation", f.OperationID)
	}
}

// recordApproval is the whole path of an approval callback — what the
// HTTP layer and the sink do with a delivery — for a decision the workflow
// found itself (poll_approval): record it in the callback inbox under its
// delivery key (store.ApprovalCallbackInsert, the same unique key that
// dedupes deliveries), then apply it through the same guard
// (applyApproval). A key already recorded is the callback's own delivery;
// it is applied all the same: if the callback's sink call moved the
// request the guard finds it stale, and if that call failed (the inbox
// kept the decision) this applies it. actor goes to the step history.
func (d Applier) recordApproval(ctx context.Context, ev ApprovalEvent, actor string) (Result, string, error) {
	if _, err := d.Store.ApprovalCallbackInsert(ctx, store.ApprovalCallbackParams{
		DeliveryKey: ev.DeliveryKey, OperationID: ev.OperationID, ApprovalID: ev.ApprovalID, Result: strings.ToUpper(ev.Result),
		Source: store.InboxSourcePoll, DecidedBy: ev.DecidedBy, Comment: ev.Comment,
	}); err != nil {
		return 0, "", fmt.Errorf("record approval decision of %s: %w", ev.OperationID, err)
	}
	return d.applyApprovalAs(ctx, ev, actor)
}

// applyApproval is Approval's transition; it returns the action it
// scheduled ("" for none).
func (d Applier) applyApproval(ctx context.Context, ev ApprovalEvent) (Result, string, error) {
	return d.applyApprovalAs(ctx, ev, "approval-callback")
}

// noteDisposition records in the callback inbox what became of ev's
// decision (the ops detail shows it). It is informational: a failure to
// note it is logged and changes nothing about the callback's outcome.
func (d Applier) noteDisposition(ctx context.Context, ev ApprovalEvent, disposition, reason string) {
	if ev.DeliveryKey == "" {
		return
	}
	if err := d.Store.ApprovalCallbackDisposition(ctx, ev.DeliveryKey, disposition, reason); err != nil {
		d.Log().Warn("note approval callback disposition", "operation", ev.OperationID, "delivery", ev.DeliveryKey, "err", err)
	}
}

// batching says whether the operation's target joins batch rounds; a
// target no longer configured counts as batching off (a single MR).
//
// It reads the operation the caller holds, not the database: it used to
// read the row again and answer "no" when that read failed, so an approval
// applied while the database was failing over (a Galera node lost) sent a
// batching target's request down the single-request path — seen as
// VALIDATED requests in no batch in TestServeThreeInstancesOnGaleraNodeKilled.
func (d Applier) batching(op store.Operation) bool {
	t, ok := d.Config().Target(op.TargetKey)
	return ok && t.Batching
}

// Deploy marks in effect (MERGED → VALIDATED) the requests of the MR the
// deployment reports, matched exactly by project and MR iid
// (not by a watermark). The flip (store.BindingMarkValidated) is
// the only path to the success side effect (Observer.Validated, I9): a
// duplicate, a race with reconciliation or a callback for a request not
// yet MERGED flips nothing and emits nothing. MERGED is written only by
// changeflow's own merge, so only MRs changeflow merged are validated. A
// callback that arrives before MERGED is written is picked up by the
// merge step (see validateIfDeployed).
//
// What became of the callback is noted on its inbox row (ev.RowID): see
// the store.Deploy* dispositions. The note is the first classification
// only (store.DeployCallbackClassify), so when the merge step or
// reconciliation acted on the row meanwhile their APPLIED stands.
func (c *Callbacks) Deploy(ctx context.Context, ev DeployEvent) (Result, error) {
	d := c.d
	mr := fmt.Sprintf("MR !%d of project %d", ev.MRIID, ev.ProjectID)
	if !strings.EqualFold(ev.Status, "SUCCESS") {
		d.classifyDeploy(ctx, ev, store.DeployIgnored, fmt.Sprintf("status %q is not SUCCESS: no evidence of a deployment", flow.Clip(ev.Status, 32)))
		return Stale, nil
	}
	ops, err := d.Store.OperationListByMR(ctx, ev.ProjectID, ev.MRIID)
	if err != nil {
		return 0, err
	}
	if len(ops) == 0 {
		d.Log().Warn("deploy callback for an MR no request of changeflow has", "project", ev.ProjectID, "mr", ev.MRIID, "delivery", ev.DeliveryKey)
		d.classifyDeploy(ctx, ev, store.DeployUnknownMR, "no request of changeflow has "+mr+"; nothing changes")
		return Stale, nil
	}
	flipped := 0
	for _, op := range ops {
		ok, err := d.MarkValidated(ctx, op.OperationID, "deploy-callback",
			fmt.Sprintf("deployed (delivery %s)", ev.DeliveryKey))
		if err != nil {
			return 0, err
		}
		if ok {
			flipped++
		}
	}
	if flipped > 0 {
		d.classifyDeploy(ctx, ev, store.DeployApplied, fmt.Sprintf("validated %d request(s) of %s", flipped, mr))
		return Applied, nil
	}
	st, err := d.Store.MRMergeStateGet(ctx, ev.ProjectID, ev.MRIID)
	if err != nil {
		return 0, err
	}
	switch {
	case st.Merged > 0:
		d.classifyDeploy(ctx, ev, store.DeployDuplicate, "changeflow merged "+mr+"; its requests were already validated")
	case st.Merging > 0:
		d.classifyDeploy(ctx, ev, store.DeployEarly, mr+" is being merged; applied when changeflow writes MERGED")
	default:
		d.Log().Warn("deploy callback for an MR changeflow did not merge", "project", ev.ProjectID, "mr", ev.MRIID, "delivery", ev.DeliveryKey)
		d.classifyDeploy(ctx, ev, store.DeployNotMerged, "changeflow has not merged "+mr+"; nothing changes unless it does")
	}
	return Stale, nil
}

// classifyDeploy notes ev's disposition on its inbox row. It is
// informational: a failure is logged and changes nothing.
func (d Applier) classifyDeploy(ctx context.Context, ev DeployEvent, disposition, reason string) {
	if ev.RowID == 0 {
		return
	}
	if err := d.Store.DeployCallbackClassify(ctx, ev.RowID, disposition, reason); err != nil {
		d.Log().Warn("note deploy callback disposition", "row", ev.RowID, "err", err)
	}
}

// MarkValidated flips operationID's binding MERGED → VALIDATED (a
// revocation's: REVOKING → REVOKED once merged) and runs the success hook
// after the commit, only when this call flipped it.
func (d Applier) MarkValidated(ctx context.Context, operationID, actor, note string) (bool, error) {
	flip, err := d.Store.BindingMarkValidated(ctx, store.BindingMarkValidatedParams{
		OperationID: operationID, CalledBackStep: int(domain.StepCalledBack), Actor: actor, Note: note,
	})
	if err != nil || flip == nil {
		return false, err
	}
	d.Flipped(ctx, *flip)
	return true, nil
}

// ValidateIfDeployed is the merged outcome's after-commit hook: a deploy
// callback recorded while the binding was still MERGING (the deployment
// was faster than our write) is acted on now.
func (d Applier) ValidateIfDeployed(projectID, mrIID int64) engine.FlipHook {
	return func(ctx context.Context, f store.Flip) {
		seen, err := d.Store.DeployCallbackSeen(ctx, projectID, mrIID)
		if err != nil || !seen {
			return
		}
		flipped, err := d.MarkValidated(ctx, f.OperationID, "deploy-callback", "deploy callback arrived before MERGED")
		if err != nil {
			d.Log().Warn("validate after merge", "operation", f.OperationID, "err", err)
			return
		}
		if flipped {
			d.DeployApplied(ctx, projectID, mrIID, "applied when changeflow wrote MERGED")
		}
	}
}

// DeployApplied marks MR (projectID, mrIID)'s waiting deploy callbacks
// APPLIED after their evidence validated its requests (informational).
func (d Applier) DeployApplied(ctx context.Context, projectID, mrIID int64, reason string) {
	if err := d.Store.DeployCallbackMarkApplied(ctx, projectID, mrIID, reason); err != nil {
		d.Log().Warn("note deploy callbacks applied", "project", projectID, "mr", mrIID, "err", err)
	}
}

// GitLab speeds up waiting on a pipeline or a rebase: a pipeline or merge
// request event for an MR makes its requests' waiting poll due now
// (store.WorkExpedite: never a step that is running, attempts kept for
// the tiers), instead of at the next tier time. Polling stays the
// fallback, so anything unexpected in the event is ignored (stale).
func (c *Callbacks) GitLab(ctx context.Context, kind string, body []byte) (Result, error) {
	var ev struct {
		Project struct {
			ID int64 `json:"id"`
		} `json:"project"`
		ObjectAttributes struct {
			IID int64 `json:"iid"`
		} `json:"object_attributes"`
		MergeRequest *struct {
			IID int64 `json:"iid"`
		} `json:"merge_request"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		return Stale, nil
	}
	iid := ev.ObjectAttributes.IID
	if kind == "pipeline" {
		if ev.MergeRequest == nil {
			return Stale, nil
		}
		iid = ev.MergeRequest.IID
	}
	if ev.Project.ID == 0 || iid == 0 {
		return Stale, nil
	}
	ops, err := c.d.Store.OperationListByMR(ctx, ev.Project.ID, iid)
	if err != nil {
		return 0, err
	}
	out := Stale
	for _, op := range ops {
		switch op.NextAction {
		case flow.ActionPollPipeline, flow.ActionPollRebase, flow.ActionMerge, flow.ActionBatchPollPipeline, flow.ActionBatchPollRebase, flow.ActionBatchMerge:
		default:
			continue
		}
		moved, err := c.d.Store.WorkExpedite(ctx, op.OperationID, op.NextAction)
		if err != nil {
			return 0, err
		}
		if moved {
			out = Applied
		}
	}
	if out == Applied && c.e != nil {
		c.e.Wake()
	}
	return out, nil
}
