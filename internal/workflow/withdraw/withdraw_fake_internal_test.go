package withdraw

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/approval"
	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/gitlab"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flow"
	"changeflow/internal/workflow/flowtest"
)

// TestWithdrawStep: the withdraw action's every branch upstream, for the
// plan each place gives — the approval withdrawn (or found, or waited
// for once), the MR found by its branch, closed, found merged — and the
// outcome it returns, run as the engine runs it on a Work, against fakes.
func TestWithdrawStep(t *testing.T) {
	branch := flow.SingleBranch(store.Operation{OperationID: "w"}) // create_mr's branch for the request
	approvalPlace := func(op *store.Operation) {}                  // binding CLOSED, approve-first: the approval only
	legacy := func(op *store.Operation) { op.Flow, op.MRIID = flow.FlowLegacy, 3 }
	noApproval := func(op *store.Operation) { op.ApprovalID = "" }
	waited := func(op *store.Operation) { op.LastError = noneYet + ": before" }
	noMR := func(op *store.Operation) { op.MRIID = 0 }
	opened := gitlab.MR{IID: 4, State: gitlab.MRStateOpened, WebURL: "u/4"}
	closed := gitlab.MR{IID: 4, State: gitlab.MRStateClosed, WebURL: "u/4"}
	merged := gitlab.MR{IID: 4, State: gitlab.MRStateMerged, WebURL: "u/4", MergeCommitSHA: "abc"}
	for _, c := range []struct {
		name    string
		binding domain.BindingStatus // "" for none
		op      []func(*store.Operation)
		st      fakeStore
		gl      flowtest.GitLab
		ap      *flowtest.Approval // nil: no approval client
		// want: the outcome's kind, step and binding written; note and
		// reason: a part of each; err: a part of the error.
		kind              engine.OutcomeKind
		step              domain.StepStatus
		bind              domain.BindingStatus
		note, reason, err string
		fields            store.WorkFields
		glCalls, apCalls  []string
		// stCalls, when set, is every call the store saw.
		stCalls []string
	}{
		// The approval place: withdraw the approval, and on the legacy
		// flow close the MR too.
		{
			name: "approval: no client configured", binding: domain.BindingClosed, op: []func(*store.Operation){approvalPlace},
			err: "no approval system client configured",
		},
		{
			name: "approval: withdrawn", binding: domain.BindingClosed,
			ap:   &flowtest.Approval{Withdrawn: approval.Approval{Status: approval.Withdrawn}},
			kind: engine.OutcomeDone, step: domain.StepCloseRequesterWithdrawn, note: "approval ap withdrawn (WITHDRAWN)",
			apCalls: []string{"Withdraw ap"},
		},
		{
			name: "approval: decided before the withdrawal reached it", binding: domain.BindingClosed,
			ap:   &flowtest.Approval{WithdrawErr: flowtest.ApprovalError(409)},
			kind: engine.OutcomeDone, step: domain.StepCloseRequesterWithdrawn, note: "approval ap was decided before the withdrawal reached it",
			apCalls: []string{"Withdraw ap"},
		},
		{
			name: "approval: unknown upstream", binding: domain.BindingClosed,
			ap:   &flowtest.Approval{WithdrawErr: flowtest.ApprovalError(404)},
			kind: engine.OutcomeDone, step: domain.StepCloseRequesterWithdrawn, note: "approval ap is unknown to the approval system",
			apCalls: []string{"Withdraw ap"},
		},
		{
			name: "approval: the system fails transiently", binding: domain.BindingClosed,
			ap:   &flowtest.Approval{WithdrawErr: flowtest.ApprovalError(503)},
			kind: engine.OutcomeRetry, reason: "withdraw approval ap:", apCalls: []string{"Withdraw ap"},
		},
		{
			name: "approval: the system refuses", binding: domain.BindingClosed,
			ap:  &flowtest.Approval{WithdrawErr: flowtest.ApprovalError(400)},
			err: "withdraw approval ap:", apCalls: []string{"Withdraw ap"},
		},
		{
			name: "approval: none recorded, found by the operationId", binding: domain.BindingClosed, op: []func(*store.Operation){noApproval},
			ap:   &flowtest.Approval{ByOp: map[string]approval.Approval{"w": {ApprovalID: "ap-found"}}, Withdrawn: approval.Approval{Status: approval.Withdrawn}},
			kind: engine.OutcomeDone, step: domain.StepCloseRequesterWithdrawn, note: "approval ap-found withdrawn",
			apCalls: []string{"FindByOperationID w", "Withdraw ap-found"},
		},
		{
			name: "approval: none found yet, wait once", binding: domain.BindingClosed, op: []func(*store.Operation){noApproval},
			ap:   &flowtest.Approval{},
			kind: engine.OutcomeRetry, reason: noneYet + ": no approval for the request", apCalls: []string{"FindByOperationID w"},
		},
		{
			name: "approval: none found after the wait: none was submitted", binding: domain.BindingClosed, op: []func(*store.Operation){noApproval, waited},
			ap:   &flowtest.Approval{},
			kind: engine.OutcomeDone, step: domain.StepCloseRequesterWithdrawn, note: "no approval was submitted", apCalls: []string{"FindByOperationID w"},
		},
		{
			name: "approval: the look-up fails transiently", binding: domain.BindingClosed, op: []func(*store.Operation){noApproval},
			ap:   &flowtest.Approval{FindErr: flowtest.ApprovalError(502)},
			kind: engine.OutcomeRetry, reason: "look up the approval:", apCalls: []string{"FindByOperationID w"},
		},
		{
			name: "approval, legacy: its MR is closed too", binding: domain.BindingClosed, op: []func(*store.Operation){legacy},
			ap:   &flowtest.Approval{Withdrawn: approval.Approval{Status: approval.Withdrawn}},
			gl:   flowtest.GitLab{MR: gitlab.MR{IID: 3, State: gitlab.MRStateOpened}, Closed: gitlab.MR{IID: 3, State: gitlab.MRStateClosed}},
			kind: engine.OutcomeDone, step: domain.StepCloseRequesterWithdrawn, note: "approval ap withdrawn (WITHDRAWN); MR !3 closed",
			apCalls: []string{"Withdraw ap"}, glCalls: []string{"GetMR 1 !3", "CloseMR 1 !3"},
		},
		{
			name: "approval, legacy: an MR merged before its approval is a failure", binding: domain.BindingClosed, op: []func(*store.Operation){legacy},
			ap:   &flowtest.Approval{Withdrawn: approval.Approval{Status: approval.Withdrawn}},
			gl:   flowtest.GitLab{MR: gitlab.MR{IID: 3, State: gitlab.MRStateMerged}},
			kind: engine.OutcomeFail, step: domain.StepCloseFailed, reason: "MR !3 is merged although the request was withdrawn before its approval",
			apCalls: []string{"Withdraw ap"}, glCalls: []string{"GetMR 1 !3"},
		},
		// The MR place: close the MR, then write CLOSED; merged wins.
		{
			name: "MR: closed", binding: domain.BindingMRCreated,
			gl:   flowtest.GitLab{MR: opened, Closed: closed},
			kind: engine.OutcomeDone, step: domain.StepCloseRequesterWithdrawn, bind: domain.BindingClosed, note: "MR !4 closed",
			glCalls: []string{"GetMR 1 !4", "CloseMR 1 !4"},
		},
		{
			name: "MR: closed already, not closed again", binding: domain.BindingMRCreated,
			gl:   flowtest.GitLab{MR: closed},
			kind: engine.OutcomeDone, step: domain.StepCloseRequesterWithdrawn, bind: domain.BindingClosed, note: "MR !4 closed",
			glCalls: []string{"GetMR 1 !4"},
		},
		{
			name: "MR: merged wins, the request follows its merge", binding: domain.BindingMRCreated,
			gl:   flowtest.GitLab{MR: merged},
			kind: engine.OutcomeDone, step: domain.StepHandleMerged, bind: domain.BindingMerged, note: "withdrawal came too late: MR !4 was merged (abc)",
			fields:  store.WorkFields{MergeSHA: "abc"},
			glCalls: []string{"GetMR 1 !4"},
		},
		{
			name: "MR: neither closed nor merged yet, read again later", binding: domain.BindingMRCreated,
			gl:   flowtest.GitLab{MR: opened, Closed: opened},
			kind: engine.OutcomeRetry, reason: "MR !4 is opened", glCalls: []string{"GetMR 1 !4", "CloseMR 1 !4"},
		},
		{
			name: "MR: the read fails transiently", binding: domain.BindingMRCreated,
			gl:   flowtest.GitLab{GetErr: flowtest.GitLabError(503)},
			kind: engine.OutcomeRetry, reason: "read MR:", glCalls: []string{"GetMR 1 !4"},
		},
		{
			name: "MR: the read is refused", binding: domain.BindingMRCreated,
			gl:  flowtest.GitLab{GetErr: flowtest.GitLabError(403)},
			err: "read MR:", glCalls: []string{"GetMR 1 !4"},
		},
		{
			name: "MR: the close fails transiently", binding: domain.BindingMRCreated,
			gl:   flowtest.GitLab{MR: opened, CloseErr: flowtest.GitLabError(500)},
			kind: engine.OutcomeRetry, reason: "close MR:", glCalls: []string{"GetMR 1 !4", "CloseMR 1 !4"},
		},
		{
			name: "MR: none recorded, found by its branch and recorded", binding: domain.BindingMRCreated, op: []func(*store.Operation){noMR},
			gl:   flowtest.GitLab{BySource: map[string]gitlab.MR{branch: opened}, MR: opened, Closed: closed},
			kind: engine.OutcomeDone, step: domain.StepCloseRequesterWithdrawn, bind: domain.BindingClosed, note: "MR !4 closed",
			fields:  store.WorkFields{MRIID: 4, MRURL: "u/4"},
			glCalls: []string{"FindMRBySourceBranch 1 " + branch, "GetMR 1 !4", "CloseMR 1 !4"},
		},
		{
			name: "MR: none recorded, found merged: merged wins and is recorded", binding: domain.BindingMRCreated, op: []func(*store.Operation){noMR},
			gl:   flowtest.GitLab{BySource: map[string]gitlab.MR{branch: merged}, MR: merged},
			kind: engine.OutcomeDone, step: domain.StepHandleMerged, bind: domain.BindingMerged, note: "withdrawal came too late",
			fields:  store.WorkFields{MRIID: 4, MRURL: "u/4", MergeSHA: "abc"},
			glCalls: []string{"FindMRBySourceBranch 1 " + branch, "GetMR 1 !4"},
		},
		{
			name: "MR: none found yet, wait once", binding: domain.BindingMRCreated, op: []func(*store.Operation){noMR},
			kind: engine.OutcomeRetry, reason: noneYet + ": no MR for the request", glCalls: []string{"FindMRBySourceBranch 1 " + branch},
		},
		{
			name: "MR: none found after the wait: none was opened", binding: domain.BindingMRCreated, op: []func(*store.Operation){noMR, waited},
			kind: engine.OutcomeDone, step: domain.StepCloseRequesterWithdrawn, bind: domain.BindingClosed, note: "no MR was opened",
			glCalls: []string{"FindMRBySourceBranch 1 " + branch},
		},
		{
			name: "MR: the look-up fails transiently", binding: domain.BindingMRCreated, op: []func(*store.Operation){noMR},
			gl:   flowtest.GitLab{FindErr: flowtest.GitLabError(429)},
			kind: engine.OutcomeRetry, reason: "look up the MR:", glCalls: []string{"FindMRBySourceBranch 1 " + branch},
		},
		{
			name: "MR: an operator's close withdraws the approval too, and ends where it began", binding: domain.BindingMRCreated,
			op:   []func(*store.Operation){func(op *store.Operation) { op.Step = int(domain.StepCloseCancelled) }},
			ap:   &flowtest.Approval{Withdrawn: approval.Approval{Status: approval.Withdrawn}},
			gl:   flowtest.GitLab{MR: opened, Closed: closed},
			kind: engine.OutcomeDone, step: domain.StepCloseCancelled, bind: domain.BindingClosed, note: "approval ap withdrawn (WITHDRAWN); MR !4 closed",
			apCalls: []string{"Withdraw ap"}, glCalls: []string{"GetMR 1 !4", "CloseMR 1 !4"},
		},
		{
			name: "MR: a close retriggered after it failed reads its history", binding: domain.BindingMRCreated,
			op:   []func(*store.Operation){func(op *store.Operation) { op.Step, op.ApprovalID = int(domain.StepCloseFailed), "" }},
			st:   fakeStore{history: []store.OperationStep{{ToStep: int(domain.StepCreatePipelineRunning)}, {ToStep: int(domain.StepCloseCancelled)}}},
			gl:   flowtest.GitLab{MR: opened, Closed: closed},
			kind: engine.OutcomeDone, step: domain.StepCloseCancelled, bind: domain.BindingClosed,
			glCalls: []string{"GetMR 1 !4", "CloseMR 1 !4"},
		},
		{
			name: "MR: the history cannot be read", binding: domain.BindingMRCreated,
			op:  []func(*store.Operation){func(op *store.Operation) { op.Step = int(domain.StepCloseFailed) }},
			st:  fakeStore{histErr: errors.New("database down")},
			err: "read step history",
		},
		{
			name: "MR: a member of an ended batch needs nothing from it", binding: domain.BindingMRCreated,
			op: []func(*store.Operation){func(op *store.Operation) { op.BatchID = 8 }},
			st: fakeStore{Store: flowtest.Store{Batch: store.Batch{ID: 8, Status: domain.BatchFailed}}},
			// Read once: no settlement is started for it.
			stCalls: []string{"BindingGetByOperation w", "BatchGet 8"},
			gl:      flowtest.GitLab{MR: opened, Closed: closed},
			kind:    engine.OutcomeDone, step: domain.StepCloseRequesterWithdrawn, bind: domain.BindingClosed, note: "MR !4 closed",
			glCalls: []string{"GetMR 1 !4", "CloseMR 1 !4"},
		},
		{
			name: "MR: the batch cannot be read", binding: domain.BindingMRCreated,
			op:  []func(*store.Operation){func(op *store.Operation) { op.BatchID = 8 }},
			st:  fakeStore{Store: flowtest.Store{BatchErr: errors.New("database down")}},
			err: "read batch",
		},
		{
			name: "the binding cannot be read", binding: domain.BindingMRCreated,
			st:  fakeStore{Store: flowtest.Store{ByOperationErr: errors.New("database down")}},
			err: "read binding",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			op := store.Operation{
				OperationID: "w", Subject: "u", TargetKey: "t", ProjectID: 1, Flow: flow.FlowApproveFirst,
				Step: int(domain.StepCloseRequesterWithdrawn), ApprovalID: "ap", MRIID: 4, NextAction: flow.ActionWithdraw,
			}
			if c.binding == domain.BindingClosed {
				op.MRIID = 0 // the approval place: approve-first has no MR yet
			}
			for _, f := range c.op {
				f(&op)
			}
			st := c.st
			st.ByOperation = map[string]store.Binding{"w": {OperationID: "w", Status: c.binding}}
			gl := c.gl
			env := flow.Env{GitLab: &gl, Config: testConfig(t), RetryDelay: time.Millisecond}
			if c.ap != nil {
				env.Approval = c.ap
			}
			d := Flow{Env: env, Store: &st}
			out, err := d.withdraw(t.Context(), engine.Work{Operation: op, Action: flow.ActionWithdraw, Attempt: 1})
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
			} else {
				require.NoError(t, err)
				require.Equal(t, c.kind, out.Kind(), "outcome %v: %s", out.Kind(), out.Reason())
				tr := out.Transition()
				require.Equal(t, c.step, tr.Step)
				require.Equal(t, c.bind, tr.Binding)
				require.Contains(t, tr.Note, c.note)
				require.Contains(t, out.Reason(), c.reason)
				require.Equal(t, c.fields, tr.Fields)
				require.Empty(t, out.Next(), "the withdrawal schedules nothing after it")
			}
			require.Equal(t, c.glCalls, gl.Calls)
			if c.stCalls != nil {
				require.Equal(t, c.stCalls, st.Calls)
			}
			if c.ap != nil {
				require.Equal(t, c.apCalls, c.ap.Calls)
			}
		})
	}
}

// TestWithdrawnHook: a withdrawal is counted once its binding's flip to
// CLOSED (a renewal's: back to its grant, ended without effect) commits,
// and not for any other flip.
func TestWithdrawnHook(t *testing.T) {
	for _, c := range []struct {
		name string
		flip store.Flip
		want []string
	}{
		{"closed", store.Flip{To: domain.BindingClosed}, []string{"withdrawn from mr"}},
		{"a renewal back to its grant", store.Flip{To: domain.BindingValidated, EndedWithoutEffect: true}, []string{"withdrawn from mr"}},
		{"merged instead", store.Flip{To: domain.BindingMerged}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			obs := &flowtest.Observer{}
			Flow{Env: flow.Env{Observer: obs}}.withdrawnHook(store.WithdrawFromMR)(t.Context(), c.flip)
			require.Equal(t, c.want, obs.Events)
		})
	}
}

// TestWithdrawerAnswers: the Withdrawer counts a requester's withdrawal
// (not an operator's close) once the guarded write flipped it, and its
// answer reads the request after the call: merged, still pending
// upstream, or stopped.
func TestWithdrawerAnswers(t *testing.T) {
	closedFlip := &store.Flip{OperationID: "w", From: domain.BindingApprovalSent, To: domain.BindingClosed}
	due := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name    string
		cancel  bool
		res     store.WithdrawResult
		op      store.Operation
		binding *store.Binding
		bindErr error
		want    [3]bool // Merged, Pending, Stopped
		events  []string
		err     string
	}{
		{
			name:    "withdrawn from its approval, the upstream half due",
			res:     store.WithdrawResult{Outcome: store.WithdrawApplied, Place: store.WithdrawFromApproval, Flip: closedFlip},
			op:      store.Operation{OperationID: "w", Step: int(domain.StepCloseRequesterWithdrawn), NextAction: flow.ActionWithdraw, DueAt: due},
			binding: &store.Binding{OperationID: "w", Status: domain.BindingClosed},
			want:    [3]bool{false, true, false}, events: []string{"withdrawn from approval"},
		},
		{
			name: "an operator's close is not counted as a requester's", cancel: true,
			res:     store.WithdrawResult{Outcome: store.WithdrawApplied, Place: store.WithdrawFromMR, Flip: closedFlip},
			op:      store.Operation{OperationID: "w", Step: int(domain.StepCloseCancelled), NextAction: flow.ActionWithdraw, LeaseOwner: "me"},
			binding: &store.Binding{OperationID: "w", Status: domain.BindingClosed},
			want:    [3]bool{false, true, false},
		},
		{
			name: "a renewal withdrawn ends once",
			res: store.WithdrawResult{Outcome: store.WithdrawApplied, Place: store.WithdrawFromApproval, Flip: &store.Flip{
				OperationID: "w", From: domain.BindingRenewing, To: domain.BindingValidated, EndedWithoutEffect: true, ToStep: int(domain.StepCloseRequesterWithdrawn)}},
			op:     store.Operation{OperationID: "w", Kind: domain.OperationRenew, Step: int(domain.StepCloseRequesterWithdrawn)},
			events: []string{"withdrawn from approval", "renewal ended w CLOSED"},
		},
		{
			name:    "too late: it merged",
			res:     store.WithdrawResult{Outcome: store.WithdrawAlready, Place: store.WithdrawFromMR},
			op:      store.Operation{OperationID: "w", Step: int(domain.StepHandleMerged)},
			binding: &store.Binding{OperationID: "w", Status: domain.BindingMerged},
			want:    [3]bool{true, false, false},
		},
		{
			name:    "the upstream half gave up",
			res:     store.WithdrawResult{Outcome: store.WithdrawAlready, Place: store.WithdrawFromMR},
			op:      store.Operation{OperationID: "w", Step: int(domain.StepCloseFailed), NextAction: flow.ActionWithdraw},
			binding: &store.Binding{OperationID: "w", Status: domain.BindingMRCreated},
			want:    [3]bool{false, false, true},
		},
		{
			name:    "refused: nothing counted",
			res:     store.WithdrawResult{Outcome: store.WithdrawRefused},
			op:      store.Operation{OperationID: "w", Step: int(domain.StepHandleMerged)},
			binding: &store.Binding{OperationID: "w", Status: domain.BindingMerged},
		},
		{
			name: "the binding cannot be read",
			res:  store.WithdrawResult{Outcome: store.WithdrawRefused},
			op:   store.Operation{OperationID: "w"}, bindErr: errors.New("database down"), err: "database down",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := &fakeStore{Store: flowtest.Store{Ops: map[string]store.Operation{"w": c.op}, ByOperation: map[string]store.Binding{}, ByOperationErr: c.bindErr},
				withdraw: c.res}
			if c.binding != nil {
				st.ByOperation["w"] = *c.binding
			}
			obs := &flowtest.Observer{}
			wd := Withdrawer{Flow: Flow{Env: flow.Env{Observer: obs}, Store: st}}
			var (
				ans Answer
				err error
			)
			if c.cancel {
				ans, err = wd.Close(t.Context(), "w", "op", "stuck")
			} else {
				ans, err = wd.Withdraw(t.Context(), "w", "u")
			}
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, [3]bool{ans.Merged, ans.Pending, ans.Stopped})
			require.Equal(t, c.events, obs.Events)
			require.Equal(t, c.res, ans.Result)
			require.Len(t, st.withdrawals, 1)
			p := st.withdrawals[0]
			require.Equal(t, flow.ActionWithdraw, p.Action)
			require.Equal(t, c.cancel, p.Cancel)
			if c.cancel {
				require.Equal(t, "closed by an operator: stuck", p.Note)
			} else {
				require.Equal(t, "withdrawn by the requester", p.Note)
			}
		})
	}
	t.Run("the guarded write fails", func(t *testing.T) {
		st := &fakeStore{withdrawErr: errors.New("database down")}
		_, err := Withdrawer{Flow: Flow{Store: st}}.Withdraw(context.Background(), "w", "u")
		require.ErrorIs(t, err, st.withdrawErr)
		require.Equal(t, []string{"OperationWithdraw w"}, st.Calls, "nothing is read after a failed write")
	})
}
