package single

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/gitlab"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flow"
)

// fakeRetriggerStore is a RetriggerStore in memory: it records every call
// and answers what the test scripted. It decides nothing — the guarded
// write and the table's check are store.WorkCallbackApply's and
// store.BatchResume's, proven on both databases by the store's
// conformance suite; these tests prove what a retrigger asks of the store
// for each request and answers for each of its replies.
type fakeRetriggerStore struct {
	calls []string

	ops      map[string]store.Operation
	bindings map[string]store.Binding
	bindErr  error
	batch    store.Batch
	batchErr error
	members  []store.BatchMember
	queue    store.QueuePosition
	queueErr error

	resumeErr error
	resumed   []string

	apply    store.WorkCallbackResult
	applyErr error
	applied  []store.WorkCallbackParams
}

func (f *fakeRetriggerStore) call(format string, args ...any) {
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
}

func (f *fakeRetriggerStore) OperationGet(_ context.Context, id string) (store.Operation, error) {
	f.call("OperationGet %s", id)
	op, ok := f.ops[id]
	if !ok {
		return store.Operation{}, fmt.Errorf("operation %s: %w", id, domain.ErrNotFound)
	}
	return op, nil
}

func (f *fakeRetriggerStore) BindingGetByOperation(_ context.Context, id string) (store.Binding, error) {
	f.call("BindingGetByOperation %s", id)
	if f.bindErr != nil {
		return store.Binding{}, f.bindErr
	}
	b, ok := f.bindings[id]
	if !ok {
		return store.Binding{}, fmt.Errorf("binding of %s: %w", id, domain.ErrNotFound)
	}
	return b, nil
}

func (f *fakeRetriggerStore) BatchGet(_ context.Context, id int64) (store.Batch, error) {
	f.call("BatchGet %d", id)
	return f.batch, f.batchErr
}

func (f *fakeRetriggerStore) BatchMembers(_ context.Context, id int64) ([]store.BatchMember, error) {
	f.call("BatchMembers %d", id)
	return f.members, nil
}

func (f *fakeRetriggerStore) BatchQueuePosition(_ context.Context, id string) (store.QueuePosition, error) {
	f.call("BatchQueuePosition %s", id)
	return f.queue, f.queueErr
}

func (f *fakeRetriggerStore) BatchResume(_ context.Context, id, version int64) (int64, error) {
	f.call("BatchResume %d", id)
	f.resumed = append(f.resumed, fmt.Sprintf("%d v%d", id, version))
	return version + 1, f.resumeErr
}

func (f *fakeRetriggerStore) WorkCallbackApply(_ context.Context, p store.WorkCallbackParams) (store.WorkCallbackResult, error) {
	f.call("WorkCallbackApply %s", p.OperationID)
	f.applied = append(f.applied, p)
	return f.apply, f.applyErr
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
			st:   fakeRetriggerStore{bindings: bound("r", domain.BindingCreateFailed)},
			want: flow.ActionCreateMR, to: [3]any{domain.StepCreateStarted, domain.BindingMRCreating, domain.BindingCreateFailed},
		},
		{
			name: "a stopped rebase poll resumes at merge", op: stopped("r", domain.StepHandleRebasePending, flow.ActionPollRebase),
			st:   fakeRetriggerStore{bindings: bound("r", domain.BindingHandleFailed)},
			want: flow.ActionMerge, to: [3]any{domain.StepHandleApproved, domain.BindingMerging, domain.BindingHandleFailed},
		},
		{
			name: "close_mr keeps its state", op: stopped("r", domain.StepCloseFailed, flow.ActionCloseMR),
			st:   fakeRetriggerStore{bindings: bound("r", domain.BindingRejected)},
			want: flow.ActionCloseMR, to: [3]any{domain.StepCloseFailed, domain.BindingRejected, domain.BindingRejected},
		},
		{
			name: "waiting for its approval with no action: its approval is polled", op: stopped("r", domain.StepCreateApprovalSubmitted, ""),
			st:   fakeRetriggerStore{bindings: bound("r", domain.BindingApprovalSent)},
			want: flow.ActionPollApproval, to: [3]any{domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent, domain.BindingApprovalSent},
		},
		{
			name: "a renewal waiting for its approval reads its row as the grant's view",
			op:   store.Operation{OperationID: "r", Kind: domain.OperationRenew, Step: int(domain.StepCreateApprovalSubmitted)},
			st:   fakeRetriggerStore{bindings: bound("r", domain.BindingRenewing)},
			want: flow.ActionPollApproval, to: [3]any{domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent, domain.BindingRenewing},
		},
		{
			name: "finished: not stopped", op: stopped("r", domain.StepCalledBack, ""),
			st:  fakeRetriggerStore{bindings: bound("r", domain.BindingValidated)},
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
			st:  fakeRetriggerStore{bindErr: errDB},
			err: errDB,
		},
		{
			name: "the binding moved meanwhile", op: stopped("r", domain.StepCreateFailed, flow.ActionCreateMR),
			st:  fakeRetriggerStore{bindings: bound("r", domain.BindingCreateFailed), apply: store.WorkCallbackResult{}},
			err: domain.ErrPreempted, errText: "the binding moved meanwhile",
			to: [3]any{domain.StepCreateStarted, domain.BindingMRCreating, domain.BindingCreateFailed},
		},
		{
			name: "the table has no way back", op: stopped("r", domain.StepCreateFailed, flow.ActionCreateMR),
			st: fakeRetriggerStore{bindings: bound("r", domain.BindingCreateFailed),
				applyErr: fmt.Errorf("no: %w", domain.ErrIllegalTransition)},
			err: domain.ErrIllegalTransition, errText: "retrigger r",
			to: [3]any{domain.StepCreateStarted, domain.BindingMRCreating, domain.BindingCreateFailed},
		},
		{
			name: "claimed by a batch with no MR: settle it", op: stopped("r", domain.StepCreateAdmitted, ""),
			st:  fakeRetriggerStore{queue: store.QueuePosition{BatchID: 5}, batch: store.Batch{ID: 5, Status: domain.BatchBlocked}},
			err: domain.ErrIllegalTransition, errText: "claimed by batch 5 (BLOCKED), which has no MR to drive",
		},
		// A member of an active batch: through its driver.
		{
			name: "a member of a running batch re-drives the driver",
			op:   func() store.Operation { o := stopped("m", domain.StepHandleStarted, ""); o.BatchID = 5; return o }(),
			st: fakeRetriggerStore{batch: store.Batch{ID: 5, Status: domain.BatchRunning, MRIID: 9, Version: 2},
				members: []store.BatchMember{{OperationID: "d"}, {OperationID: "m"}}, bindings: bound("d", domain.BindingHandleFailed)},
			want: flow.ActionBatchMerge, to: [3]any{domain.StepHandleApproved, domain.BindingMerging, domain.BindingHandleFailed},
		},
		{
			name: "a blocked batch is resumed first",
			op:   func() store.Operation { o := stopped("m", domain.StepHandleStarted, ""); o.BatchID = 5; return o }(),
			st: fakeRetriggerStore{batch: store.Batch{ID: 5, Status: domain.BatchBlocked, MRIID: 9, Version: 2},
				members: []store.BatchMember{{OperationID: "d"}, {OperationID: "m"}}, bindings: bound("d", domain.BindingHandleFailed)},
			want: flow.ActionBatchMerge, to: [3]any{domain.StepHandleApproved, domain.BindingMerging, domain.BindingHandleFailed},
			resumed: []string{"5 v2"},
		},
		{
			name: "the resume fails: the driver is not written",
			op:   func() store.Operation { o := stopped("m", domain.StepHandleStarted, ""); o.BatchID = 5; return o }(),
			st: fakeRetriggerStore{batch: store.Batch{ID: 5, Status: domain.BatchBlocked, MRIID: 9, Version: 2},
				members: []store.BatchMember{{OperationID: "d"}}, bindings: bound("d", domain.BindingHandleFailed), resumeErr: domain.ErrPreempted},
			err: domain.ErrPreempted, resumed: []string{"5 v2"},
		},
		{
			name: "the driver is running",
			op:   func() store.Operation { o := stopped("m", domain.StepHandleStarted, ""); o.BatchID = 5; return o }(),
			st: fakeRetriggerStore{batch: store.Batch{ID: 5, Status: domain.BatchRunning, MRIID: 9},
				members: []store.BatchMember{{OperationID: "running"}}},
			err: ErrNotStopped, errText: "batch 5's driver running is due or running",
		},
		{
			name: "a batch with no MR has no step to re-run",
			op:   func() store.Operation { o := stopped("m", domain.StepCreateAdmitted, ""); o.BatchID = 5; return o }(),
			st: fakeRetriggerStore{batch: store.Batch{ID: 5, Status: domain.BatchBlocked},
				members: []store.BatchMember{{OperationID: "d"}}},
			err: domain.ErrIllegalTransition, errText: "batch 5 has no MR to drive",
		},
		{
			name: "a driver stopped where no batch step resumes",
			op:   func() store.Operation { o := stopped("m", domain.StepHandleStarted, ""); o.BatchID = 5; return o }(),
			st: fakeRetriggerStore{batch: store.Batch{ID: 5, Status: domain.BatchRunning, MRIID: 9},
				members: []store.BatchMember{{OperationID: "idle"}}},
			err: domain.ErrIllegalTransition, errText: "stopped at CALLED_BACK, which no batch step resumes",
		},
		{
			name: "a batch with no members",
			op:   func() store.Operation { o := stopped("m", domain.StepHandleStarted, ""); o.BatchID = 5; return o }(),
			st:   fakeRetriggerStore{batch: store.Batch{ID: 5, Status: domain.BatchRunning, MRIID: 9}},
			err:  domain.ErrNotFound, errText: "batch 5 has no members",
		},
		{
			name: "a member of an ended batch is retriggered on its own",
			op: func() store.Operation {
				o := stopped("m", domain.StepCreateFailed, flow.ActionCreateMR)
				o.BatchID = 5
				return o
			}(),
			st:   fakeRetriggerStore{batch: store.Batch{ID: 5, Status: domain.BatchFailed}, bindings: bound("m", domain.BindingCreateFailed)},
			want: flow.ActionCreateMR, to: [3]any{domain.StepCreateStarted, domain.BindingMRCreating, domain.BindingCreateFailed},
		},
		{
			name: "the batch cannot be read",
			op: func() store.Operation {
				o := stopped("m", domain.StepCreateFailed, flow.ActionCreateMR)
				o.BatchID = 5
				return o
			}(),
			st:  fakeRetriggerStore{batchErr: errDB},
			err: errDB,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := c.st
			if st.ops == nil {
				st.ops = map[string]store.Operation{}
			}
			if c.op.OperationID != "other" {
				st.ops[c.op.OperationID] = c.op
			}
			// The batch drivers: stopped at HANDLE_MERGE_FAILED with the
			// action kept by the safety net, or without one, or running.
			st.ops["d"] = stopped("d", domain.StepHandleMergeFailed, flow.ActionBatchMerge)
			st.ops["idle"] = stopped("idle", domain.StepCalledBack, "")
			st.ops["running"] = store.Operation{OperationID: "running", LeaseOwner: "w1", NextAction: flow.ActionBatchMerge}
			if st.apply == (store.WorkCallbackResult{}) && c.err == nil {
				st.apply.Applied = true
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
				require.Empty(t, st.applied, "nothing is written")
				return
			}
			require.Len(t, st.applied, 1)
			p := st.applied[0]
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

// pipelineGitLab answers the two calls RetryFailedPipeline makes from
// what the test scripted, and records them; any other call panics on the
// nil embedded port.
type pipelineGitLab struct {
	gitlab.GitLab
	calls    []string
	pls      []gitlab.Pipeline
	listErr  error
	retried  gitlab.Pipeline
	retryErr error
}

func (g *pipelineGitLab) ListMRPipelines(_ context.Context, project string, iid int64) ([]gitlab.Pipeline, error) {
	g.calls = append(g.calls, fmt.Sprintf("ListMRPipelines %s !%d", project, iid))
	return g.pls, g.listErr
}

func (g *pipelineGitLab) RetryPipeline(_ context.Context, project string, id int64) (gitlab.Pipeline, error) {
	g.calls = append(g.calls, fmt.Sprintf("RetryPipeline %s %d", project, id))
	return g.retried, g.retryErr
}

// TestRetryFailedPipeline: only a single request stopped on its failed
// check pipeline has it re-run, and only while its newest pipeline is the
// failed (or canceled) one; GitLab's refusal is told apart from its
// failure.
func TestRetryFailedPipeline(t *testing.T) {
	mgr, err := config.Load(t.Context(), config.Options{Overlay: map[string]any{"gitlab.projects": []any{"1"}}})
	require.NoError(t, err)
	snap := mgr.Current()
	require.NoError(t, mgr.Close())
	failedAt := func(step domain.StepStatus) store.Operation {
		return store.Operation{OperationID: "r", ProjectID: 1, MRIID: 3, Step: int(step)}
	}
	for _, c := range []struct {
		name  string
		op    store.Operation
		gl    pipelineGitLab
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
			gl: pipelineGitLab{pls: []gitlab.Pipeline{{ID: 7, Status: pipelineFailed}, {ID: 6, Status: pipelineFailed}}, retried: gitlab.Pipeline{ID: 7, Status: "running"}},
			ok: true, calls: []string{"ListMRPipelines 1 !3", "RetryPipeline 1 7"},
		},
		{
			name: "a canceled one is re-run too", op: failedAt(domain.StepHandlePipelineFailed),
			gl: pipelineGitLab{pls: []gitlab.Pipeline{{ID: 7, Status: pipelineCanceled}}, retried: gitlab.Pipeline{ID: 7}},
			ok: true, calls: []string{"ListMRPipelines 1 !3", "RetryPipeline 1 7"},
		},
		{
			name: "someone re-ran it already", op: failedAt(domain.StepCreatePipelineFailed),
			gl:    pipelineGitLab{pls: []gitlab.Pipeline{{ID: 8, Status: "running"}, {ID: 7, Status: pipelineFailed}}},
			calls: []string{"ListMRPipelines 1 !3"},
		},
		{
			name: "no pipeline", op: failedAt(domain.StepCreatePipelineFailed),
			calls: []string{"ListMRPipelines 1 !3"},
		},
		{
			name: "the list fails", op: failedAt(domain.StepCreatePipelineFailed),
			gl:   pipelineGitLab{listErr: &gitlab.Error{Op: "list", Status: http.StatusBadGateway}},
			text: "list the pipelines of MR !3", calls: []string{"ListMRPipelines 1 !3"},
		},
		{
			name: "GitLab refuses", op: failedAt(domain.StepCreatePipelineFailed),
			gl:  pipelineGitLab{pls: []gitlab.Pipeline{{ID: 7, Status: pipelineFailed}}, retryErr: &gitlab.Error{Op: "retry", Status: http.StatusForbidden}},
			err: ErrPipelineNotRetried, text: "GitLab refused to re-run pipeline 7 of MR !3 (403)",
			calls: []string{"ListMRPipelines 1 !3", "RetryPipeline 1 7"},
		},
		{
			name: "GitLab fails", op: failedAt(domain.StepCreatePipelineFailed),
			gl:   pipelineGitLab{pls: []gitlab.Pipeline{{ID: 7, Status: pipelineFailed}}, retryErr: &gitlab.Error{Op: "retry", Status: http.StatusInternalServerError}},
			text: "re-run pipeline 7 of MR !3", calls: []string{"ListMRPipelines 1 !3", "RetryPipeline 1 7"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			gl := c.gl
			env := flow.Env{GitLab: &gl, Config: func() *config.Snapshot { return snap }}
			pl, ok, err := RetryFailedPipeline(t.Context(), env, c.op)
			switch {
			case c.text != "":
				require.ErrorContains(t, err, c.text)
				if c.err != nil {
					require.ErrorIs(t, err, c.err)
				} else {
					require.NotErrorIs(t, err, ErrPipelineNotRetried)
				}
			default:
				require.NoError(t, err)
			}
			require.Equal(t, c.ok, ok)
			if ok {
				require.Equal(t, gl.retried, pl)
			}
			require.Equal(t, c.calls, gl.calls)
		})
	}
}
