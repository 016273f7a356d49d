package callbacks

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/approval"
	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flow"
	"changeflow/internal/workflow/flowtest"
)

// approvalNow is the clock an approve-first approval is timed by.
var approvalNow = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// waitingWorld is a fake store holding one request per flow, each waiting
// for its approval (APPROVAL_SENT): "af" approve-first on target "t"
// without batching, "afb" on the batching "tb", "leg" on the legacy flow
// with MR !3, "unrec" approve-first with no approval id recorded yet.
func waitingWorld() *fakeStore {
	ops := map[string]store.Operation{
		"af":    {OperationID: "af", Subject: "u-af", TargetKey: "t", ProjectID: 1, ApprovalID: "ap-af", Flow: flow.FlowApproveFirst},
		"afb":   {OperationID: "afb", Subject: "u-afb", TargetKey: "tb", ProjectID: 1, ApprovalID: "ap-afb", Flow: flow.FlowApproveFirst},
		"leg":   {OperationID: "leg", Subject: "u-leg", TargetKey: "t", ProjectID: 1, ApprovalID: "ap-leg", MRIID: 3, Flow: flow.FlowLegacy},
		"unrec": {OperationID: "unrec", Subject: "u-unrec", TargetKey: "t", ProjectID: 1, Flow: flow.FlowApproveFirst},
	}
	st := &fakeStore{Store: flowtest.Store{Ops: ops, ByKey: map[string]store.Binding{}, Apply: store.WorkCallbackResult{Applied: true}}}
	for id, op := range ops {
		st.ByKey[op.Subject+"/"+op.TargetKey] = store.Binding{OperationID: id, Subject: op.Subject, TargetKey: op.TargetKey, Status: domain.BindingApprovalSent}
	}
	return st
}

// TestApprovalWithoutReadBack: with approval.verifyDecisions off, an
// approval callback is checked against what the request recorded and
// waits for, then applied as the flow it began on says; each delivery's
// disposition is noted once on its inbox row.
func TestApprovalWithoutReadBack(t *testing.T) {
	errDB := errors.New("database down")
	ev := func(op, approvalID, result, mr string) ApprovalEvent {
		return ApprovalEvent{DeliveryKey: "dk", OperationID: op, ApprovalID: approvalID, Result: result, MRID: mr}
	}
	for _, c := range []struct {
		name  string
		ev    ApprovalEvent
		setup func(st *fakeStore)
		want  Result
		err   error
		noted string // the disposition noted, prefix; "" for none
		// applied is the write asked of the store (Step, Binding,
		// NextAction, AdmitProject); nil for none.
		applied *store.WorkCallbackParams
		events  []string
	}{
		{
			name: "an unknown request", ev: ev("nope", "ap", "APPROVED", ""), want: Stale,
			noted: "dk UNKNOWN_OPERATION: no such request",
		},
		{
			name: "the request cannot be read", ev: ev("af", "ap-af", "APPROVED", ""),
			setup: func(st *fakeStore) { st.OpErr = errDB }, err: errDB,
		},
		{
			name: "an ext.mrId that is no MR number is refused", ev: ev("leg", "ap-leg", "APPROVED", "x1"), want: Stale,
			noted: `dk REJECTED_BY_GUARD: ext.mrId "x1" is not an MR number`,
		},
		{
			name: "a binding re-applied for a newer request is stale", ev: ev("af", "ap-af", "APPROVED", ""), want: Stale,
			setup: func(st *fakeStore) {
				st.ByKey["u-af/t"] = store.Binding{OperationID: "newer", Status: domain.BindingApprovalSent}
			},
			noted: "dk STALE: the binding was re-applied for request newer",
		},
		{
			name: "a binding no longer waiting is stale", ev: ev("af", "ap-af", "APPROVED", ""), want: Stale,
			setup: func(st *fakeStore) {
				st.ByKey["u-af/t"] = store.Binding{OperationID: "af", Status: domain.BindingValidated}
			},
			noted: "dk STALE: the binding is VALIDATED, not waiting",
		},
		{
			name: "no binding at all", ev: ev("af", "ap-af", "APPROVED", ""), want: Stale,
			setup: func(st *fakeStore) { delete(st.ByKey, "u-af/t") },
			noted: "dk UNKNOWN_OPERATION",
		},
		{
			name: "the binding cannot be read", ev: ev("af", "ap-af", "APPROVED", ""),
			setup: func(st *fakeStore) { st.ByKeyErr = errDB }, err: errDB,
		},
		{
			name: "another approval id is refused", ev: ev("af", "ap-other", "APPROVED", ""), want: Stale,
			noted: "dk REJECTED_BY_GUARD: approvalId",
		},
		{
			name: "the legacy flow's own MR is required", ev: ev("leg", "ap-leg", "APPROVED", "4"), want: Stale,
			noted: "dk REJECTED_BY_GUARD: ext.mrId 4 is not this request's MR !3",
		},
		{
			name: "no approval id recorded yet: it waits in the inbox", ev: ev("unrec", "ap-x", "APPROVED", ""), want: Deferred,
			noted: "dk RECORDED: no approval id recorded yet",
		},
		{
			name: "approved, approve-first, no batching: the MR is created", ev: ev("af", "ap-af", "approved", ""), want: Applied,
			noted:   "dk APPLIED: moved to CREATE_STARTED / MR_CREATING",
			applied: &store.WorkCallbackParams{Step: int(domain.StepCreateStarted), Binding: domain.BindingMRCreating, NextAction: flow.ActionCreateMR},
		},
		{
			name: "approved, approve-first, batching: admitted for a round", ev: ev("afb", "ap-afb", "APPROVED", ""), want: Applied,
			noted:   "dk APPLIED: moved to CREATE_ADMITTED / MR_CREATING",
			applied: &store.WorkCallbackParams{Step: int(domain.StepCreateAdmitted), Binding: domain.BindingMRCreating, AdmitProject: 1},
		},
		{
			name: "approved, legacy: its MR is approved", ev: ev("leg", "ap-leg", "APPROVED", "3"), want: Applied,
			noted:   "dk APPLIED: moved to HANDLE_STARTED / MERGING",
			applied: &store.WorkCallbackParams{Step: int(domain.StepHandleStarted), Binding: domain.BindingMerging, NextAction: flow.ActionApprove},
		},
		{
			name: "rejected, legacy: its MR is closed", ev: ev("leg", "ap-leg", "REJECTED", " 3 "), want: Applied,
			noted:   "dk APPLIED: moved to CLOSE_REJECTED / REJECTED",
			applied: &store.WorkCallbackParams{Step: int(domain.StepCloseRejected), Binding: domain.BindingRejected, NextAction: flow.ActionCloseMR},
		},
		{
			name: "withdrawn, approve-first: nothing to close", ev: ev("af", "ap-af", "WITHDRAWN", ""), want: Applied,
			noted:   "dk APPLIED: moved to CLOSE_WITHDRAWN / REJECTED",
			applied: &store.WorkCallbackParams{Step: int(domain.StepCloseWithdrawn), Binding: domain.BindingRejected},
		},
		{
			name: "a renewal rejected ends once, by the flip", ev: ev("af", "ap-af", "REJECTED", ""), want: Applied,
			setup: func(st *fakeStore) {
				st.Apply.Flip = &store.Flip{OperationID: "af", From: domain.BindingRenewing, To: domain.BindingValidated,
					EndedWithoutEffect: true, ToStep: int(domain.StepCloseRejected)}
			},
			noted:   "dk APPLIED",
			applied: &store.WorkCallbackParams{Step: int(domain.StepCloseRejected), Binding: domain.BindingRejected},
			events:  []string{"renewal ended af REJECTED"},
		},
		{
			name: "an unknown result is an error", ev: ev("af", "ap-af", "MAYBE", ""), err: errUnknownResult,
		},
		{
			name: "the store's guard refuses under the lock", ev: ev("af", "ap-af", "APPROVED", ""), want: Stale,
			setup:   func(st *fakeStore) { st.Apply = store.WorkCallbackResult{Refused: "raced"} },
			noted:   "dk REJECTED_BY_GUARD: raced",
			applied: &store.WorkCallbackParams{Step: int(domain.StepCreateStarted), Binding: domain.BindingMRCreating, NextAction: flow.ActionCreateMR},
		},
		{
			name: "re-applied under the lock", ev: ev("af", "ap-af", "APPROVED", ""), want: Stale,
			setup: func(st *fakeStore) {
				st.Apply = store.WorkCallbackResult{Current: store.Binding{OperationID: "newer", Status: domain.BindingApprovalSent}}
			},
			noted:   "dk STALE: the binding was re-applied for request newer",
			applied: &store.WorkCallbackParams{Step: int(domain.StepCreateStarted), Binding: domain.BindingMRCreating, NextAction: flow.ActionCreateMR},
		},
		{
			name: "moved on under the lock", ev: ev("af", "ap-af", "APPROVED", ""), want: Stale,
			setup: func(st *fakeStore) {
				st.Apply = store.WorkCallbackResult{Current: store.Binding{OperationID: "af", Status: domain.BindingMRCreating}}
			},
			noted:   "dk STALE: the binding is MR_CREATING",
			applied: &store.WorkCallbackParams{Step: int(domain.StepCreateStarted), Binding: domain.BindingMRCreating, NextAction: flow.ActionCreateMR},
		},
		{
			name: "gone under the lock", ev: ev("af", "ap-af", "APPROVED", ""), want: Stale,
			setup:   func(st *fakeStore) { st.Apply = store.WorkCallbackResult{} },
			noted:   "dk UNKNOWN_OPERATION",
			applied: &store.WorkCallbackParams{Step: int(domain.StepCreateStarted), Binding: domain.BindingMRCreating, NextAction: flow.ActionCreateMR},
		},
		{
			name: "an illegal transition is refused and an error", ev: ev("af", "ap-af", "APPROVED", ""),
			setup: func(st *fakeStore) { st.ApplyErr = fmt.Errorf("no: %w", domain.ErrIllegalTransition) },
			err:   domain.ErrIllegalTransition, noted: "dk REJECTED_BY_GUARD: no:",
			applied: &store.WorkCallbackParams{Step: int(domain.StepCreateStarted), Binding: domain.BindingMRCreating, NextAction: flow.ActionCreateMR},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := waitingWorld()
			if c.setup != nil {
				c.setup(st)
			}
			obs := &flowtest.Observer{}
			env := flow.Env{Config: snapshot(t, map[string]any{"approval.verifyDecisions": false}), Observer: obs, Now: func() time.Time { return approvalNow }}
			got, err := New(env, st, nil).Approval(t.Context(), c.ev)
			switch {
			case errors.Is(c.err, errUnknownResult):
				require.ErrorContains(t, err, `unknown result "MAYBE"`)
			case c.err != nil:
				require.ErrorIs(t, err, c.err)
			default:
				require.NoError(t, err)
				require.Equal(t, c.want, got)
			}
			if c.noted == "" {
				require.Empty(t, st.noted)
			} else {
				require.Len(t, st.noted, 1, "noted once: %v", st.noted)
				require.True(t, strings.HasPrefix(st.noted[0], c.noted), "noted %q, want it to start %q", st.noted[0], c.noted)
			}
			if c.applied == nil {
				require.Empty(t, st.Applied, "nothing is written")
			} else {
				require.Len(t, st.Applied, 1)
				p := st.Applied[0]
				require.Equal(t, c.ev.OperationID, p.OperationID)
				require.Equal(t, approvalWaiting, p.Waiting)
				require.Equal(t, "approval-callback", p.Actor)
				require.Equal(t, c.ev.ApprovalID, p.Approval.ApprovalID)
				require.Equal(t, [4]any{c.applied.Step, c.applied.Binding, c.applied.NextAction, c.applied.AdmitProject},
					[4]any{p.Step, p.Binding, p.NextAction, p.AdmitProject})
				if st.Ops[c.ev.OperationID].MRIID == 0 && p.Binding == domain.BindingMRCreating {
					require.Equal(t, approvalNow, p.ApprovedAt, "approve-first: the days count from the approval")
					require.Equal(t, 30, p.MaxDays)
				} else {
					require.True(t, p.ApprovedAt.IsZero(), "only an approve-first approval fixes the expiry")
				}
			}
			require.Equal(t, c.events, obs.Events)
		})
	}
}

// errUnknownResult marks the case whose error is built from text.
var errUnknownResult = errors.New("unknown result")

// TestApprovalReadBack: with approval.verifyDecisions on, the decision
// applied is the approval system's own; a read that fails or says pending
// defers it, one that names another request refuses it.
func TestApprovalReadBack(t *testing.T) {
	decided := func(id, op string, s approval.Status) approval.Approval {
		return approval.Approval{ApprovalID: id, OperationID: op, Status: s, Comment: "ok by me"}
	}
	for _, c := range []struct {
		name     string
		op       string
		claimed  string // the callback's approval id
		result   string
		sys      *flowtest.Approval // nil: no approval client configured
		want     Result
		noted    string
		step     domain.StepStatus // 0: nothing is applied
		note     string            // in the applied step's note
		adopt    bool
		sysCalls []string
	}{
		{
			name: "no approval client: read again later", op: "af", claimed: "ap-af", result: "APPROVED",
			want: Deferred, noted: "dk VERIFY_FAILED: no approval system client configured",
		},
		{
			name: "the read fails", op: "af", claimed: "ap-af", result: "APPROVED",
			sys:  &flowtest.Approval{GetErr: &approval.Error{Op: "get", Status: 503, Message: "down"}},
			want: Deferred, noted: "dk VERIFY_FAILED: reading the approval back failed", sysCalls: []string{"Get ap-af"},
		},
		{
			name: "still pending", op: "af", claimed: "ap-af", result: "APPROVED",
			sys:  &flowtest.Approval{ByID: map[string]approval.Approval{"ap-af": decided("ap-af", "af", approval.Pending)}},
			want: Deferred, noted: "dk UNCONFIRMED: the approval system still reports approval ap-af as PENDING", sysCalls: []string{"Get ap-af"},
		},
		{
			name: "the system says it is another request's", op: "af", claimed: "ap-af", result: "APPROVED",
			sys:  &flowtest.Approval{ByID: map[string]approval.Approval{"ap-af": decided("ap-af", "other", approval.Approved)}},
			want: Stale, noted: `dk REJECTED_BY_GUARD: the approval system says approval "ap-af" is not this request's`, sysCalls: []string{"Get ap-af"},
		},
		{
			name: "confirmed", op: "af", claimed: "ap-af", result: "APPROVED",
			sys:  &flowtest.Approval{ByID: map[string]approval.Approval{"ap-af": decided("ap-af", "af", approval.Approved)}},
			want: Applied, noted: "dk APPLIED", step: domain.StepCreateStarted, note: "; confirmed by the approval system",
			sysCalls: []string{"Get ap-af"},
		},
		{
			name: "the system's decision wins over the callback's claim", op: "af", claimed: "ap-af", result: "APPROVED",
			sys:  &flowtest.Approval{ByID: map[string]approval.Approval{"ap-af": decided("ap-af", "af", approval.Rejected)}},
			want: Applied, noted: "dk APPLIED", step: domain.StepCloseRejected,
			note: "; the approval system reports REJECTED, the callback claimed APPROVED", sysCalls: []string{"Get ap-af"},
		},
		{
			name: "unrecorded: the system's approval for the request is adopted", op: "unrec", claimed: "ap-u", result: "APPROVED",
			sys:  &flowtest.Approval{ByOp: map[string]approval.Approval{"unrec": decided("ap-u", "unrec", approval.Approved)}},
			want: Applied, noted: "dk APPLIED", step: domain.StepCreateStarted, adopt: true,
			sysCalls: []string{"FindByOperationID unrec"},
		},
		{
			name: "unrecorded: the system holds none yet", op: "unrec", claimed: "ap-u", result: "APPROVED",
			sys:  &flowtest.Approval{},
			want: Deferred, noted: "dk VERIFY_FAILED: the approval system holds no approval for this request yet",
			sysCalls: []string{"FindByOperationID unrec"},
		},
		{
			name: "unrecorded: the system holds another approval", op: "unrec", claimed: "ap-u", result: "APPROVED",
			sys:  &flowtest.Approval{ByOp: map[string]approval.Approval{"unrec": decided("ap-real", "unrec", approval.Approved)}},
			want: Stale, noted: `dk REJECTED_BY_GUARD: approvalId "ap-u" is not the approval`,
			sysCalls: []string{"FindByOperationID unrec"},
		},
		{
			name: "stale before any read: no call to the approval system", op: "af", claimed: "ap-af", result: "APPROVED",
			sys:  &flowtest.Approval{},
			want: Stale, noted: "dk STALE",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := waitingWorld()
			if strings.HasPrefix(c.name, "stale before") {
				st.ByKey["u-af/t"] = store.Binding{OperationID: "af", Status: domain.BindingMerged}
			}
			env := flow.Env{Config: snapshot(t, map[string]any{"approval.verifyDecisions": true}), Now: func() time.Time { return approvalNow }}
			if c.sys != nil {
				env.Approval = c.sys
			}
			got, err := New(env, st, nil).Approval(t.Context(), ApprovalEvent{DeliveryKey: "dk", OperationID: c.op, ApprovalID: c.claimed, Result: c.result})
			require.NoError(t, err)
			require.Equal(t, c.want, got)
			require.Len(t, st.noted, 1, "noted once: %v", st.noted)
			require.True(t, strings.HasPrefix(st.noted[0], c.noted), "noted %q, want it to start %q", st.noted[0], c.noted)
			if c.sys != nil {
				require.Equal(t, c.sysCalls, c.sys.Calls)
			}
			if c.step == 0 {
				require.Empty(t, st.Applied)
				return
			}
			require.Len(t, st.Applied, 1)
			p := st.Applied[0]
			require.Equal(t, int(c.step), p.Step)
			require.Equal(t, c.adopt, p.Approval.Adopt)
			require.Contains(t, p.Note, c.note)
			require.Contains(t, p.Note, "ok by me", "the approver's comment comes from the system's answer")
		})
	}
}

// TestRecordPolledAndReplay: a polled decision is recorded in the inbox
// under its key and applied without a read-back, actor and comment kept;
// a replay applies the latest recorded decision with the MR its delivery
// claimed, or the request's own.
func TestRecordPolledAndReplay(t *testing.T) {
	env := func(t *testing.T) flow.Env {
		// Read-back on: a polled or replayed decision is verified or read
		// again, so without a client the replay defers.
		return flow.Env{Config: snapshot(t, map[string]any{"approval.verifyDecisions": true}), Now: func() time.Time { return approvalNow }}
	}
	t.Run("polled: recorded, then applied as verified", func(t *testing.T) {
		st := waitingWorld()
		d := Applier{Env: env(t), Store: st}
		res, next, err := d.RecordPolled(t.Context(), "unrec",
			approval.Approval{ApprovalID: "ap-u", Status: approval.Approved, Comment: "fine", DecidedBy: "jane"}, "poll-1", "poll_approval")
		require.NoError(t, err)
		require.Equal(t, Applied, res)
		require.Equal(t, flow.ActionCreateMR, next)
		require.Equal(t, []store.ApprovalCallbackParams{{DeliveryKey: "poll-1", OperationID: "unrec", ApprovalID: "ap-u", Result: "APPROVED",
			Source: store.InboxSourcePoll, DecidedBy: "jane", Comment: "fine"}}, st.inserted)
		require.Len(t, st.Applied, 1)
		require.Equal(t, "poll_approval", st.Applied[0].Actor)
		require.True(t, st.Applied[0].Approval.Adopt, "the system's own id is adopted")
		require.Contains(t, st.Applied[0].Note, "fine")
		by, _ := domain.DeciderFrom(st.Applied[0].Note)
		require.Equal(t, "jane", by, "the approver the system named is in the note")
	})
	t.Run("polled: the record fails, nothing is applied", func(t *testing.T) {
		st := waitingWorld()
		st.insertErr = errors.New("down")
		_, _, err := Applier{Env: env(t), Store: st}.RecordPolled(t.Context(), "af", approval.Approval{ApprovalID: "ap-af", Status: approval.Approved}, "k", "a")
		require.ErrorIs(t, err, st.insertErr)
		require.Empty(t, st.Applied)
	})
	for _, c := range []struct {
		name    string
		op      string
		rec     *store.ApprovalCallbackRecord
		latest  error
		want    Result
		wantMR  string // the MR the replayed event claims, seen in the refusal or the applied write
		applied bool
	}{
		{name: "nothing recorded", op: "af", want: Stale},
		{name: "the inbox cannot be read", op: "af", latest: errors.New("down"), want: Stale},
		{
			name: "a legacy request's own MR", op: "leg", want: Applied, applied: true,
			rec: &store.ApprovalCallbackRecord{DeliveryKey: "dk", ApprovalID: "ap-leg", Result: "APPROVED"},
		},
		{
			name: "the MR the delivery claimed is checked again", op: "leg", want: Stale, wantMR: "ext.mrId 9 is not this request's MR !3",
			rec: &store.ApprovalCallbackRecord{DeliveryKey: "dk", ApprovalID: "ap-leg", Result: "APPROVED", MRIDRecorded: true, MRID: "9"},
		},
	} {
		t.Run("replay: "+c.name, func(t *testing.T) {
			st := waitingWorld()
			st.latest = map[string]store.ApprovalCallbackRecord{}
			if c.rec != nil {
				st.latest[c.op] = *c.rec
			}
			st.latestErr = c.latest
			sys := &flowtest.Approval{ByID: map[string]approval.Approval{"ap-leg": {ApprovalID: "ap-leg", OperationID: "leg", Status: approval.Approved}}}
			e := env(t)
			e.Approval = sys
			got, err := New(e, st, nil).ReplayApproval(t.Context(), c.op)
			require.ErrorIs(t, err, c.latest)
			require.Equal(t, c.want, got)
			if c.wantMR != "" {
				require.Len(t, st.noted, 1)
				require.Contains(t, st.noted[0], c.wantMR)
			}
			require.Equal(t, c.applied, len(st.Applied) == 1)
		})
	}
}

// TestACallbackNamesWhoDecided: without read-back, the approver and the
// comment a callback reports are what the decision's note records.
func TestACallbackNamesWhoDecided(t *testing.T) {
	st := waitingWorld()
	env := flow.Env{Config: snapshot(t, map[string]any{"approval.verifyDecisions": false}), Observer: &flowtest.Observer{}, Now: func() time.Time { return approvalNow }}
	e := ApprovalEvent{DeliveryKey: "dk", OperationID: "af", ApprovalID: "ap-af", Result: "REJECTED", DecidedBy: "jane\nroot", Comment: "not now"}
	_, err := New(env, st, nil).Approval(t.Context(), e)
	require.NoError(t, err)
	require.Len(t, st.Applied, 1)
	by, ok := domain.DeciderFrom(st.Applied[0].Note)
	require.True(t, ok, st.Applied[0].Note)
	require.Equal(t, "jane root", by, "a newline is no line break in the note")
	c, _ := domain.ApproverCommentFrom(st.Applied[0].Note)
	require.Equal(t, "not now", c)
}
