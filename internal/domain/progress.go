package domain

// The step bar (docs/api.md, "The step bar"): the few steps a person
// follows a request by, each done, current, failed, skipped or not
// reached yet. It is decided here, once, from what the request really went
// through — its flow, its kind, the status the API shows and its step
// history — so the request page and the console cannot disagree, and a
// request that never asked for its approval never shows the approval
// done. The web app puts its words on the keys.

// Flows as operation.flow stores them (CHECK constraint): the legacy flow
// opens the MR first and asks for the approval once its checks pass; the
// approve-first flow asks for the approval first (docs/workflow.md).
const (
	FlowLegacy       = "LEGACY"
	FlowApproveFirst = "APPROVE_FIRST"
)

// ProgressKey names one step of the bar.
type ProgressKey string

// Step bar keys.
const (
	// ProgressApproval: the approvers decide (a grant or renewal; a
	// revocation asks nobody).
	ProgressApproval ProgressKey = "APPROVAL"
	// ProgressProposed: the change — or the removal — is written on a
	// branch and proposed as a merge request (alone or in a batch).
	ProgressProposed ProgressKey = "PROPOSED"
	// ProgressChecks: the merge request's check pipeline.
	ProgressChecks ProgressKey = "CHECKS"
	// ProgressMerged: bot approvals, rebase and merge.
	ProgressMerged ProgressKey = "MERGED"
	// ProgressDeployed: the deployment reported the change in effect. Not
	// "in effect": once the access went on (removed, renewed, expired) the
	// step stays done, and a page must not read "in effect" then.
	ProgressDeployed ProgressKey = "DEPLOYED"
	// ProgressRemoved: the access's entry is removed and the removal
	// deployed — a revocation's last step, and the step a grant gains
	// once its access is being removed.
	ProgressRemoved ProgressKey = "REMOVED"
	// ProgressRenewed: a later renewal carries the access on.
	ProgressRenewed ProgressKey = "RENEWED"
	// ProgressExpired: the access lapsed at its expiry (CLOSE_EXPIRED).
	ProgressExpired ProgressKey = "EXPIRED"
)

// ProgressKeys lists every key (the web app's words must name each).
var ProgressKeys = []ProgressKey{ProgressApproval, ProgressProposed, ProgressChecks, ProgressMerged, ProgressDeployed,
	ProgressRemoved, ProgressRenewed, ProgressExpired}

// ProgressState is where one step of the bar stands.
type ProgressState string

// Step bar states.
const (
	// ProgressDone: the request went through the step.
	ProgressDone ProgressState = "DONE"
	// ProgressCurrent: the step under way or waited for now (a stop on an
	// unknown outcome too: nothing failed yet).
	ProgressCurrent ProgressState = "CURRENT"
	// ProgressFailed: where the request stopped on a failure, or where the
	// approvers said no.
	ProgressFailed ProgressState = "FAILED"
	// ProgressSkipped: a step that will never happen — the request ended
	// before it (withdrawn, cancelled, rejected, cut off), or there was
	// nothing for it to do (a removal with nothing left to remove).
	ProgressSkipped ProgressState = "SKIPPED"
	// ProgressTodo: not reached yet, still ahead.
	ProgressTodo ProgressState = "TODO"
)

// ProgressStates lists every state.
var ProgressStates = []ProgressState{ProgressDone, ProgressCurrent, ProgressFailed, ProgressSkipped, ProgressTodo}

// ProgressStep is one step of the bar.
type ProgressStep struct {
	Key   ProgressKey   `json:"key"`
	State ProgressState `json:"state"`
}

// ProgressInput is what the bar is decided from.
type ProgressInput struct {
	// Flow is FlowLegacy or FlowApproveFirst; anything else reads as
	// legacy (the flow every row had before approve-first existed).
	Flow string
	Kind OperationKind
	// Status is the status the API shows for the request: a renewal's in
	// the grant's vocabulary, a grant's whose access is being removed the
	// revocation's (REVOKING, REVOKED, REVOKE_FAILED).
	Status BindingStatus
	// Step is the request's current step.
	Step StepStatus
	// History is the to-steps of its step history, oldest first. Needed
	// only when ProgressNeedsHistory(Step); nil otherwise is fine.
	History []StepStatus
	// Renewed: a later renewal in effect carries the access.
	Renewed bool
}

// progressPlaces is, for every step that says by itself where a request
// stands, the key it stands at. A step missing here (a generic failure, a
// closing step) stands where the last step before it in the history stood.
var progressPlaces = map[StepStatus]ProgressKey{
	StepNone:                     "", // the bar's first step (placeOf)
	StepCreateStarted:            ProgressProposed,
	StepCreateBranchCreated:      ProgressProposed,
	StepCreateCommitted:          ProgressProposed,
	StepCreateAdmitted:           ProgressProposed,
	StepRevokeStarted:            ProgressProposed,
	StepCreateMRCreated:          ProgressChecks,
	StepCreatePipelineRunning:    ProgressChecks,
	StepCreatePipelineFailed:     ProgressChecks,
	StepCreatePipelinePending:    ProgressChecks,
	StepCreateApprovalSubmitting: ProgressApproval,
	StepCreateApprovalSubmitted:  ProgressApproval,
	StepCreateApprovalFailed:     ProgressApproval,
	StepCloseRejected:            ProgressApproval,
	StepCloseWithdrawn:           ProgressApproval,
	StepHandleStarted:            ProgressMerged,
	StepHandleApproved:           ProgressMerged,
	StepHandleApproveFailed:      ProgressMerged,
	StepHandleApproveForbidden:   ProgressMerged,
	StepHandleRebaseConflict:     ProgressMerged,
	StepHandleRebasing:           ProgressMerged,
	StepHandleMergeFailed:        ProgressMerged,
	StepHandlePipelineRunning:    ProgressMerged,
	StepHandlePipelineFailed:     ProgressMerged,
	StepHandlePoolRejected:       ProgressMerged,
	StepHandlePipelinePending:    ProgressMerged,
	StepHandleMergeUnknown:       ProgressMerged,
	StepHandleRebasePending:      ProgressMerged,
}

// progressEnds are the steps that end a request with its change in effect
// (or its access ended after being in effect): the bar is decided by them
// alone.
var progressEnds = map[StepStatus]bool{
	StepCreateSucceeded: true, // placed after the checks (placeOf)
	StepHandleMerged:    true,
	StepCalledBack:      true, StepReconciled: true,
	StepRevokeCalledBack: true, StepRevokeReconciled: true, StepRevokeAbsent: true,
	StepCloseExpired: true,
}

// ProgressNeedsHistory reports whether the bar of a request at step s
// depends on its step history: s is a generic failure or a closing step,
// which does not say where the request stood. Every step a request waits
// at in normal work says it by itself, so the status read costs no read
// more for them.
func ProgressNeedsHistory(s StepStatus) bool {
	_, placed := progressPlaces[s]
	return !placed && !progressEnds[s]
}

// progressOrder is the bar's steps for a kind in a flow.
func progressOrder(flow string, kind OperationKind) []ProgressKey {
	switch {
	case kind == OperationRevoke:
		// A removal asks no approval, in either flow.
		return []ProgressKey{ProgressProposed, ProgressChecks, ProgressMerged, ProgressRemoved}
	case flow == FlowApproveFirst:
		return []ProgressKey{ProgressApproval, ProgressProposed, ProgressChecks, ProgressMerged, ProgressDeployed}
	}
	return []ProgressKey{ProgressProposed, ProgressChecks, ProgressApproval, ProgressMerged, ProgressDeployed}
}

// Progress decides the step bar of a request (docs/api.md, "The step bar").
// The first rule that applies decides: what became of the access after it
// was in effect, then a step that ends the request, then where its
// history places it.
func Progress(in ProgressInput) []ProgressStep {
	order := progressOrder(in.Flow, in.Kind)
	if out, ok := progressAfterEffect(in, order); ok {
		return out
	}
	if out, ok := progressOfEnd(in.Step, order); ok {
		return out
	}
	return progressOfHistory(in, order)
}

// progressAll is the bar with every step of order in state st.
func progressAll(order []ProgressKey, st ProgressState) []ProgressStep {
	out := make([]ProgressStep, len(order))
	for i, k := range order {
		out[i] = ProgressStep{k, st}
	}
	return out
}

// progressAfterEffect is the bar of a grant by what became of its access
// after it was in effect: the grant's own steps are all behind it,
// whatever its own step says. ok is false for a removal, or a binding in
// no such status.
func progressAfterEffect(in ProgressInput, order []ProgressKey) (_ []ProgressStep, ok bool) {
	if in.Kind == OperationRevoke {
		return nil, false
	}
	done := progressAll(order, ProgressDone)
	switch in.Status {
	case BindingRevoking:
		return append(done, ProgressStep{ProgressRemoved, ProgressCurrent}), true
	case BindingRevoked:
		return append(done, ProgressStep{ProgressRemoved, ProgressDone}), true
	case BindingRevokeFailed:
		return append(done, ProgressStep{ProgressRemoved, ProgressFailed}), true
	case BindingValidated:
		if in.Renewed {
			return append(done, ProgressStep{ProgressRenewed, ProgressDone}), true
		}
		return done, true
	}
	return nil, false
}

// progressOfEnd is the bar of a request whose step ended it; ok is false
// for any other step.
func progressOfEnd(step StepStatus, order []ProgressKey) (_ []ProgressStep, ok bool) {
	switch step {
	case StepCalledBack, StepReconciled, StepRevokeCalledBack, StepRevokeReconciled:
		return progressAll(order, ProgressDone), true
	case StepCloseExpired:
		return append(progressAll(order, ProgressDone), ProgressStep{ProgressExpired, ProgressDone}), true
	case StepRevokeAbsent:
		// Nothing was left to remove: no MR was needed.
		out := progressAll(order, ProgressSkipped)
		out[len(out)-1].State = ProgressDone
		return out, true
	}
	return nil, false
}

// progressOfHistory is the bar of a request still under way, or stopped
// on its way: the last step of its history that says where it stands,
// marked failed or skipped by what followed it.
func progressOfHistory(in ProgressInput, order []ProgressKey) []ProgressStep {
	seq := in.History
	if n := len(seq); n == 0 || seq[n-1] != in.Step {
		seq = append(seq[:n:n], in.Step)
	}
	p := lastPlaced(seq)
	if p < 0 {
		// Nothing says where it stood (no history was read): claim nothing.
		return progressAll(order, ProgressTodo)
	}
	failed, closed := failedOrClosed(seq[p:])
	rest, state := ProgressTodo, ProgressCurrent
	if closed {
		rest, state = ProgressSkipped, ProgressSkipped
	}
	if failed {
		state = ProgressFailed
	}
	return at(order, placeOf(order, seq[p]), state, rest)
}

// lastPlaced is the index of the last step of seq that says where the
// request stands (placed); -1 for none.
func lastPlaced(seq []StepStatus) int {
	for i := len(seq) - 1; i >= 0; i-- {
		if placed(seq[i]) {
			return i
		}
	}
	return -1
}

// failedOrClosed reports what happened from the placing step seq[0] on:
// did it fail (a rejected close, or a failure other than failing to
// close the MR of a request already ended), was it closed?
func failedOrClosed(seq []StepStatus) (failed, closed bool) {
	failed = seq[0] == StepCloseRejected
	for _, s := range seq {
		if s.Kind() == KindFailed && s != StepCloseFailed {
			failed = true
		}
		if s.Kind() == KindClosed {
			closed = true
		}
	}
	return failed, closed
}

// placed reports whether step s says by itself where a request stands.
func placed(s StepStatus) bool {
	_, ok := progressPlaces[s]
	return ok || s == StepCreateSucceeded || s == StepHandleMerged
}

// placeOf is the index in order of where step s stands: its place, the
// step after the checks for CREATE_SUCCEEDED, the last step for
// HANDLE_MERGED (merged, the deployment is waited for), the bar's first
// step for none (or a place this kind's bar does not have).
func placeOf(order []ProgressKey, s StepStatus) int {
	switch s {
	case StepCreateSucceeded:
		return indexOf(order, ProgressChecks) + 1
	case StepHandleMerged:
		return len(order) - 1
	}
	if i := indexOf(order, progressPlaces[s]); i >= 0 {
		return i
	}
	return 0
}

// at is order with every step before i done, step i in state, and every
// step after it in rest.
func at(order []ProgressKey, i int, state, rest ProgressState) []ProgressStep {
	out := make([]ProgressStep, len(order))
	for j, k := range order {
		switch {
		case j < i:
			out[j] = ProgressStep{k, ProgressDone}
		case j == i:
			out[j] = ProgressStep{k, state}
		default:
			out[j] = ProgressStep{k, rest}
		}
	}
	return out
}

func indexOf(order []ProgressKey, k ProgressKey) int {
	for i, x := range order {
		if x == k {
			return i
		}
	}
	return -1
}
