package single

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/gitlab"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flow"
	"changeflow/internal/workflow/flowtest"
)

// fakeRetriggerStore is a RetriggerStore in memory: it records every call
// and answers what the test scripted. It decides nothing — the guarded
// write and the table's check are store.WorkCallbackApply's and
// store.BatchResume's, proven on both databases by the store's
// conformance suite; these tests prove what a retrigger asks of the store
// for each request and answers for each of its replies. flowtest.Store
// answers the operations, the bindings by operation, BatchGet and
// WorkCallbackApply; the batch's members, queue and resume are its own.
type fakeRetriggerStore struct {
	flowtest.Store

	members  []store.BatchMember
	queue    store.QueuePosition
	queueErr error

	resumeErr error
	resumed   []string
}

func (f *fakeRetriggerStore) BatchMembers(_ context.Context, id int64) ([]store.BatchMember, error) {
	f.Call("BatchMembers %d", id)
	return f.members, nil
}

func (f *fakeRetriggerStore) BatchQueuePosition(_ context.Context, id string) (store.QueuePosition, error) {
	f.Call("BatchQueuePosition %s", id)
	return f.queue, f.queueErr
}

func (f *fakeRetriggerStore) BatchResume(_ context.Context, id, version int64) (int64, error) {
	f.Call("BatchResume %d", id)
	f.resumed = append(f.resumed, fmt.Sprintf("%d v%d", id, version))
	return version + 1, f.resumeErr
}

// TestRetriggerAnswers: a retrigger makes the kept action (or the one
// its waiting state implies) due from the state that action starts
// from, through the driver for a member of an active batch; anything not
// stopped, moved meanwhile, or with no way back is refused with the
// error that says so.
func TestRetriggerAnswers(t *testing.T) {
	stopped := func(id string, step domain.StepStatus, action string) store.Operation {
		return store.Operation{OperationID: id, Step: int(step), NextAction: action}
	}
	bound := func(id string, s domain.BindingStatus) map[string]store.Binding {
		return map[string]store.Binding{id: {OperationID: id, Status: s}}
	}
	due := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	errDB := errors.New("database down")
	for _, c := range []struct {
		name string
		op   store.Operation
		st   fakeRetriggerStore
		// want is the action scheduled; to the write asked (step,
		// binding, the binding status it must still be in).
		want    string
		to      [3]any
		err     error
		errText string
		resumed []string
	}{
		{name: "an unknown request", op: store.Operation{OperationID: "other"}, err: domain.ErrNotFound},
		{
			name: "due is not stopped", op: func() store.Operation {
				o := stopped("r", domain.StepCreateStarted, flow.ActionCreateMR)
				o.DueAt = due
				return o
			}(),
			err: ErrNotStopped, errText: `action "create_mr", at CREATE_STARTED`,
		},
		{
			name: "running is not stopped", op: func() store.Operation {
				o := stopped("r", domain.StepCreateStarted, flow.ActionCreateMR)
				o.LeaseOwner = "w1"
				return o
			}(),
			err: ErrNotStopped,
		},
		{
			name: "create_mr from its start", op: stopped("r", domain.StepCreateFailed, flow.ActionCreateMR),
			st:   fakeRetriggerStore{Store: flowtest.Store{ByOperation: bound("r", domain.BindingCreateFailed)}},
			want: flow.ActionCreateMR, to: [3]any{domain.StepCreateStarted, domain.BindingMRCreating, domain.BindingCreateFailed},
		},
		{
			name: "a stopped rebase poll resumes at merge", op: stopped("r", domain.StepHandleRebasePending, flow.ActionPollRebase),
			st:   fakeRetriggerStore{Store: flowtest.Store{ByOperation: bound("r", domain.BindingHandleFailed)}},
			want: flow.ActionMerge, to: [3]any{domain.StepHandleApproved, domain.BindingMerging, domain.BindingHandleFailed},
		},
		{
			name: "close_mr keeps its state", op: stopped("r", domain.StepCloseFailed, flow.ActionCloseMR),
			st:   fakeRetriggerStore{Store: flowtest.Store{ByOperation: bound("r", domain.BindingRejected)}},
			want: flow.ActionCloseMR, to: [3]any{domain.StepCloseFailed, domain.BindingRejected, domain.BindingRejected},
		},
		{
			name: "waiting for its approval with no action: its approval is polled", op: stopped("r", domain.StepCreateApprovalSubmitted, ""),
			st:   fakeRetriggerStore{Store: flowtest.Store{ByOperation: bound("r", domain.BindingApprovalSent)}},
			want: flow.ActionPollApproval, to: [3]any{domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent, domain.BindingApprovalSent},
		},
		{
			name: "a renewal waiting for its approval reads its row as the grant's view",
			op:   store.Operation{OperationID: "r", Kind: domain.OperationRenew, Step: int(domain.StepCreateApprovalSubmitted)},
			st:   fakeRetriggerStore{Store: flowtest.Store{ByOperation: bound("r", domain.BindingRenewing)}},
			want: flow.ActionPollApproval, to: [3]any{domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent, domain.BindingRenewing},
		},
		{
			name: "finished: not stopped", op: stopped("r", domain.StepCalledBack, ""),
			st:  fakeRetriggerStore{Store: flowtest.Store{ByOperation: bound("r", domain.BindingValidated)}},
			err: ErrNotStopped,
		},
		{
			name: "finished and its row re-applied: not stopped", op: stopped("r", domain.StepCalledBack, ""),
			err: ErrNotStopped,
		},
		{
			name: "a kept action whose binding is gone", op: stopped("r", domain.StepCreateFailed, flow.ActionCreateMR),
			err: domain.ErrNotFound, errText: "retrigger r",
		},
		{
			name: "the binding cannot be read", op: stopped("r", domain.StepCreateFailed, flow.ActionCreateMR),
			st:  fakeRetriggerStore{Store: flowtest.Store{ByOperationErr: errDB}},
			err: errDB,
		},
		{
			name: "the binding moved meanwhile", op: stopped("r", domain.StepCreateFailed, flow.ActionCreateMR),
			st:  fakeRetriggerStore{Store: flowtest.Store{ByOperation: bound("r", domain.BindingCreateFailed), Apply: store.WorkCallbackResult{}}},
			err: domain.ErrPreempted, errText: "the binding moved meanwhile",
			to: [3]any{domain.StepCreateStarted, domain.BindingMRCreating, domain.BindingCreateFailed},
		},
		{
			name: "the table has no way back", op: stopped("r", domain.StepCreateFailed, flow.ActionCreateMR),
			st:  fakeRetriggerStore{Store: flowtest.Store{ByOperation: bound("r", domain.BindingCreateFailed), ApplyErr: fmt.Errorf("no: %w", domain.ErrIllegalTransition)}},
			err: domain.ErrIllegalTransition, errText: "retrigger r",
			to: [3]any{domain.StepCreateStarted, domain.BindingMRCreating, domain.BindingCreateFailed},
		},
		{
			name: "claimed by a batch with no MR: settle it", op: stopped("r", domain.StepCreateAdmitted, ""),
			st:  fakeRetriggerStore{Store: flowtest.Store{Batch: store.Batch{ID: 5, Status: domain.BatchBlocked}}, queue: store.QueuePosition{BatchID: 5}},
			err: domain.ErrIllegalTransition, errText: "claimed by batch 5 (BLOCKED), which has no MR to drive",
		},
		// A member of an active batch: through its driver.
		{
			name: "a member of a running batch re-drives the driver",
			op:   func() store.Operation { o := stopped("m", domain.StepHandleStarted, ""); o.BatchID = 5; return o }(),
			st: fakeRetriggerStore{Store: flowtest.Store{Batch: store.Batch{ID: 5, Status: domain.BatchRunning, MRIID: 9, Version: 2}, ByOperation: bound("d", domain.BindingHandleFailed)},
				members: []store.BatchMember{{OperationID: "d"}, {OperationID: "m"}}},
			want: flow.ActionBatchMerge, to: [3]any{domain.StepHandleApproved, domain.BindingMerging, domain.BindingHandleFailed},
		},
		{
			name: "a blocked batch is resumed first",
			op:   func() store.Operation { o := stopped("m", domain.StepHandleStarted, ""); o.BatchID = 5; return o }(),
			st: fakeRetriggerStore{Store: flowtest.Store{Batch: store.Batch{ID: 5, Status: domain.BatchBlocked, MRIID: 9, Version: 2}, ByOperation: bound("d", domain.BindingHandleFailed)},
				members: []store.BatchMember{{OperationID: "d"}, {OperationID: "m"}}},
			want: flow.ActionBatchMerge, to: [3]any{domain.StepHandleApproved, domain.BindingMerging, domain.BindingHandleFailed},
			resumed: []string{"5 v2"},
		},
		{
			name: "the resume fails: the driver is not written",
			op:   func() store.Operation { o := stopped("m", domain.StepHandleStarted, ""); o.BatchID = 5; return o }(),
			st: fakeRetriggerStore{Store: flowtest.Store{Batch: store.Batch{ID: 5, Status: domain.BatchBlocked, MRIID: 9, Version: 2}, ByOperation: bound("d", domain.BindingHandleFailed)},
				members: []store.BatchMember{{OperationID: "d"}}, resumeErr: domain.ErrPreempted},
			err: domain.ErrPreempted, resumed: []string{"5 v2"},
		},
		{
			name: "the driver is running",
			op:   func() store.Operation { o := stopped("m", domain.StepHandleStarted, ""); o.BatchID = 5; return o }(),
			st: fakeRetriggerStore{Store: flowtest.Store{Batch: store.Batch{ID: 5, Status: domain.BatchRunning, MRIID: 9}},
				members: []store.BatchMember{{OperationID: "running"}}},
			err: ErrNotStopped, errText: "batch 5's driver running is due or running",
		},
		{
			name: "a batch with no MR has no step to re-run",
			op:   func() store.Operation { o := stopped("m", domain.StepCreateAdmitted, ""); o.BatchID = 5; return o }(),
			st: fakeRetriggerStore{Store: flowtest.Store{Batch: store.Batch{ID: 5, Status: domain.BatchBlocked}},
				members: []store.BatchMember{{OperationID: "d"}}},
			err: domain.ErrIllegalTransition, errText: "batch 5 has no MR to drive",
		},
		{
			name: "a driver stopped where no batch step resumes",
			op:   func() store.Operation { o := stopped("m", domain.StepHandleStarted, ""); o.BatchID = 5; return o }(),
			st: fakeRetriggerStore{Store: flowtest.Store{Batch: store.Batch{ID: 5, Status: domain.BatchRunning, MRIID: 9}},
				members: []store.BatchMember{{OperationID: "idle"}}},
			err: domain.ErrIllegalTransition, errText: "stopped at CALLED_BACK, which no batch step resumes",
		},
		{
			name: "a batch with no members",
			op:   func() store.Operation { o := stopped("m", domain.StepHandleStarted, ""); o.BatchID = 5; return o }(),
			st:   fakeRetriggerStore{Store: flowtest.Store{Batch: store.Batch{ID: 5, Status: domain.BatchRunning, MRIID: 9}}},
			err:  domain.ErrNotFound, errText: "batch 5 has no members",
		},
		{
			name: "a member of an ended batch is retriggered on its own",
			op: func() store.Operation {
				o := stopped("m", domain.StepCreateFailed, flow.ActionCreateMR)
				o.BatchID = 5
				return o
			}(),
			st:   fakeRetriggerStore{Store: flowtest.Store{Batch: store.Batch{ID: 5, Status: domain.BatchFailed}, ByOperation: bound("m", domain.BindingCreateFailed)}},
			want: flow.ActionCreateMR, to: [3]any{domain.StepCreateStarted, domain.BindingMRCreating, domain.BindingCreateFailed},
		},
		{
			name: "the batch cannot be read",
			op: func() store.Operation {
				o := stopped("m", domain.StepCreateFailed, flow.ActionCreateMR)
				o.BatchID = 5
				return o
			}(),
			st:  fakeRetriggerStore{Store: flowtest.Store{BatchErr: errDB}},
			err: errDB,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := c.st
			if st.Ops == nil {
				st.Ops = map[string]store.Operation{}
			}
			if c.op.OperationID != "other" {
				st.Ops[c.op.OperationID] = c.op
			}
			// The batch drivers: stopped at HANDLE_MERGE_FAILED with the
			// action kept by the safety net, or without one, or running.
			st.Ops["d"] = stopped("d", domain.StepHandleMergeFailed, flow.ActionBatchMerge)
			st.Ops["idle"] = stopped("idle", domain.StepCalledBack, "")
			st.Ops["running"] = store.Operation{OperationID: "running", LeaseOwner: "w1", NextAction: flow.ActionBatchMerge}
			if st.Apply == (store.WorkCallbackResult{}) && c.err == nil {
				st.Apply.Applied = true
			}
			id := c.op.OperationID
			got, err := Retrigger(t.Context(), &st, id, "ops")
			if c.err != nil {
				require.ErrorIs(t, err, c.err)
				require.ErrorContains(t, err, c.errText)
			} else {
				require.NoError(t, err)
				require.Equal(t, c.want, got)
			}
			require.Equal(t, c.resumed, st.resumed)
			if c.to == ([3]any{}) {
				require.Empty(t, st.Applied, "nothing is written")
				return
			}
			require.Len(t, st.Applied, 1)
			p := st.Applied[0]
			require.Equal(t, c.to, [3]any{domain.StepStatus(p.Step), p.Binding, p.Waiting[0]})
			require.Len(t, p.Waiting, 1, "guarded by the status read")
			require.Equal(t, "ops", p.Actor)
			if c.want != "" {
				require.Equal(t, c.want, p.NextAction)
				require.Contains(t, p.Note, retriggerNote+c.want+" from ")
			}
		})
	}
}

// TestRetryFailedPipeline: only a single request stopped on its failed
// check pipeline has it re-run, and only while its newest pipeline is the
// failed (or canceled) one; GitLab's refusal is told apart from its
// failure.
func TestRetryFailedPipeline(t *testing.T) {
	snap := flowtest.Config(t, flowtest.Targets(nil))
	failedAt := func(step domain.StepStatus) store.Operation {
		return store.Operation{OperationID: "r", ProjectID: 1, MRIID: 3, Step: int(step)}
	}
	for _, c := range []struct {
		name  string
		op    store.Operation
		gl    flowtest.GitLab
		ok    bool
		err   error
		text  string
		calls []string
	}{
		{name: "another step", op: failedAt(domain.StepHandleMergeFailed)},
		{name: "a batch member", op: func() store.Operation { o := failedAt(domain.StepCreatePipelineFailed); o.BatchID = 2; return o }()},
		{name: "no MR", op: func() store.Operation { o := failedAt(domain.StepCreatePipelineFailed); o.MRIID = 0; return o }()},
		{
			name: "re-run", op: failedAt(domain.StepCreatePipelineFailed),
			gl: flowtest.GitLab{Pipelines: []gitlab.Pipeline{{ID: 7, Status: pipelineFailed}, {ID: 6, Status: pipelineFailed}}, Retried: gitlab.Pipeline{ID: 7, Status: "running"}},
			ok: true, calls: []string{"ListMRPipelines 1 !3", "RetryPipeline 1 7"},
		},
		{
			name: "a canceled one is re-run too", op: failedAt(domain.StepHandlePipelineFailed),
			gl: flowtest.GitLab{Pipelines: []gitlab.Pipeline{{ID: 7, Status: pipelineCanceled}}, Retried: gitlab.Pipeline{ID: 7}},
			ok: true, calls: []string{"ListMRPipelines 1 !3", "RetryPipeline 1 7"},
		},
		{
			name: "someone re-ran it already", op: failedAt(domain.StepCreatePipelineFailed),
			gl:    flowtest.GitLab{Pipelines: []gitlab.Pipeline{{ID: 8, Status: "running"}, {ID: 7, Status: pipelineFailed}}},
			calls: []string{"ListMRPipelines 1 !3"},
		},
		{
			name: "no pipeline", op: failedAt(domain.StepCreatePipelineFailed),
			calls: []string{"ListMRPipelines 1 !3"},
		},
		{
			name: "the list fails", op: failedAt(domain.StepCreatePipelineFailed),
			gl:   flowtest.GitLab{ListErr: &gitlab.Error{Op: "list", Status: http.StatusBadGateway}},
			text: "list the pipelines of MR !3", calls: []string{"ListMRPipelines 1 !3"},
		},
		{
			name: "GitLab refuses", op: failedAt(domain.StepCreatePipelineFailed),
			gl:  flowtest.GitLab{Pipelines: []gitlab.Pipeline{{ID: 7, Status: pipelineFailed}}, RetryErr: &gitlab.Error{Op: "retry", Status: http.StatusForbidden}},
			err: ErrPipelineNotRetried, text: "GitLab refused to re-run pipeline 7 of MR !3 (403)",
			calls: []string{"ListMRPipelines 1 !3", "RetryPipeline 1 7"},
		},
		{
			name: "GitLab's rate limit is a wait, not a refusal", op: failedAt(domain.StepHandlePipelineFailed),
			gl:  flowtest.GitLab{Pipelines: []gitlab.Pipeline{{ID: 7, Status: pipelineFailed}}, RetryErr: &gitlab.Error{Op: "retry", Status: http.StatusTooManyRequests}},
			err: ErrPipelineRateLimited, text: "re-run pipeline 7 of MR !3",
			calls: []string{"ListMRPipelines 1 !3", "RetryPipeline 1 7"},
		},
		{
			name: "GitLab fails", op: failedAt(domain.StepCreatePipelineFailed),
			gl:   flowtest.GitLab{Pipelines: []gitlab.Pipeline{{ID: 7, Status: pipelineFailed}}, RetryErr: &gitlab.Error{Op: "retry", Status: http.StatusInternalServerError}},
			text: "re-run pipeline 7 of MR !3", calls: []string{"ListMRPipelines 1 !3", "RetryPipeline 1 7"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			gl := c.gl
			env := flow.Env{GitLab: &gl, Config: snap}
			pl, ok, err := RetryFailedPipeline(t.Context(), env, c.op)
			switch {
			case c.text != "":
				require.ErrorContains(t, err, c.text)
				if c.err != nil {
					require.ErrorIs(t, err, c.err)
					if c.err == ErrPipelineRateLimited {
						require.NotErrorIs(t, err, ErrPipelineNotRetried, "a 429 is no refusal")
					}
				} else {
					require.NotErrorIs(t, err, ErrPipelineNotRetried)
				}
			default:
				require.NoError(t, err)
			}
			require.Equal(t, c.ok, ok)
			if ok {
				require.Equal(t, gl.Retried, pl)
			}
			require.Equal(t, c.calls, gl.Calls)
		})
	}
}
