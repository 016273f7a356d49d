package flow

import "changeflow/internal/domain"

// Action names stored in operation.next_action. Lower-case snake-case
// verbs naming what runs next; a rename needs a data migration of
// in-flight rows, so these are fixed here, once. The steps behind them are
// registered by the composition root.
const (
	// ActionCreateMR looks up, else creates, the deterministic branch, the
	// commit and the MR (legacy entry; approve-first after approval).
	ActionCreateMR = "create_mr"
	// ActionPollPipeline polls the MR's check pipeline in tiers.
	ActionPollPipeline = "poll_pipeline"
	// ActionSubmitApproval looks up, else submits, the approval for the
	// operationId (approve-first entry; legacy after the pipeline passed).
	ActionSubmitApproval = "submit_approval"
	// ActionPollApproval reads the approval while the request waits in
	// APPROVAL_SENT and applies a decision as its callback would (the
	// fallback for a lost callback).
	ActionPollApproval = "poll_approval"
	// ActionApprove runs the two bot approvals.
	ActionApprove = "approve"
	// ActionMerge reads the MR, merges, or requests a rebase.
	ActionMerge = "merge"
	// ActionPollRebase polls a requested rebase in tiers.
	ActionPollRebase = "poll_rebase"
	// ActionCloseMR reads the MR and closes it unless closed or merged.
	ActionCloseMR = "close_mr"
	// ActionRegenerate rewrites a single-request MR whose rebase conflicted
	// as one commit of the request's edit on the target's current head,
	// then polls that commit's pipeline and hands over to approve.
	ActionRegenerate = "regenerate"
	// ActionWithdraw is the upstream half of a requester's withdrawal
	// (withdraw.go): withdraw the approval, close the single-request MR
	// ("merged wins"), then write the withdrawn state.
	ActionWithdraw = "withdraw"
	// ActionRebuild builds a single request again from a fresh read on a
	// fresh branch of changeflow's own, with a new MR, after its MR's head
	// turned out to hold content changeflow did not write (the old MR is
	// closed first), then hands over to regenerate's pipeline poll.
	ActionRebuild = "rebuild"
)

// EntryState is a new request's first state and first action.
type EntryState struct {
	Flow    string
	Step    domain.StepStatus
	Binding domain.BindingStatus
	Action  string
}

// Entry returns the first state of a request submitted under the given
// workflow.approveFirst switch: legacy — CREATE_STARTED, MR_CREATING,
// create_mr; approve-first — CREATE_APPROVAL_SUBMITTING, APPROVAL_SENDING,
// submit_approval. The HTTP submit writes it with
// OperationCreateParams.NextAction = Action, which the store checks
// against the transition table's entry row.
func Entry(approveFirst bool) EntryState {
	if approveFirst {
		return EntryState{Flow: "APPROVE_FIRST", Step: domain.StepCreateApprovalSubmitting,
			Binding: domain.BindingApprovalSending, Action: ActionSubmitApproval}
	}
	return EntryState{Flow: "LEGACY", Step: domain.StepCreateStarted, Binding: domain.BindingMRCreating, Action: ActionCreateMR}
}

// Actions of the batch path (docs/flows/batch.md, "Batch rounds"). They run
// on the batch's driver — its first member in claim order — and reuse the
// single-request steps on the batch MR; every member's state follows the
// driver's in batched statements (store.BatchApply).
const (
	ActionBatchPollPipeline = "batch_poll_pipeline"
	ActionBatchApprove      = "batch_approve"
	ActionBatchMerge        = "batch_merge"
	ActionBatchPollRebase   = "batch_poll_rebase"
	// ActionBatchFinish aligns every member to MERGED and marks the batch
	// SUCCEEDED once the driver saw the MR merged.
	ActionBatchFinish = "batch_finish"
	// ActionBatchSettle settles a batch whose driver failed or timed out:
	// close the MR, re-read it, merged wins.
	ActionBatchSettle = "batch_settle"
)
