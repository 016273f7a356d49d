package store_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// mustSubmitApproveFirst submits operationID at the approve-first entry
// (CREATE_APPROVAL_SUBMITTING, APPROVAL_SENDING, submit_approval due).
func mustSubmitApproveFirst(t testing.TB, s *store.Store, operationID, subject string) {
	t.Helper()
	p := opParams(operationID, subject, "t")
	p.Flow, p.Step, p.NextAction = "APPROVE_FIRST", int(domain.StepCreateApprovalSubmitting), "submit_approval"
	_, err := s.OperationSubmit(t.Context(), store.OperationSubmitParams{Operation: p, BindingStatus: domain.BindingApprovalSending})
	require.NoError(t, err)
}

func approved(opID string) store.WorkCallbackParams {
	return store.WorkCallbackParams{
		OperationID: opID, Waiting: []domain.BindingStatus{domain.BindingApprovalSending, domain.BindingApprovalSent},
		Step: int(domain.StepCreateStarted), Binding: domain.BindingMRCreating, NextAction: "create_mr",
		Approval: &store.ApprovalBinding{ApprovalID: "APR-1", Adopt: true}, Actor: "approval-callback", Note: "approved",
	}
}

func TestWorkCallbackApplyGuardsAndPreempts(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		mustSubmitApproveFirst(t, s, "op-1", "alice")
		claimed, err := s.WorkClaimDue(ctx, "i1", time.Minute, 10)
		require.NoError(t, err)
		require.Len(t, claimed, 1)

		// The decision arrives while submit_approval still runs (SENDING).
		res, err := s.WorkCallbackApply(ctx, approved("op-1"))
		require.NoError(t, err)
		require.True(t, res.Applied)
		require.NotNil(t, res.Flip)
		require.Equal(t, domain.BindingApprovalSending, res.Flip.From)
		o := mustOperation(t, s, "op-1")
		require.Equal(t, int(domain.StepCreateStarted), o.Step)
		require.Equal(t, "create_mr", o.NextAction)
		require.Equal(t, "APR-1", o.ApprovalID)
		require.Empty(t, o.LeaseOwner, "the running step's lease is pre-empted")
		require.Equal(t, domain.BindingMRCreating, mustBinding(t, s, "alice", "t").Status)

		// The step's own SENT write is refused, not applied.
		_, err = s.WorkComplete(ctx, store.WorkCompleteParams{OperationID: "op-1", Lease: claimed[0].Lease,
			Step: int(domain.StepCreateApprovalSubmitted), Binding: domain.BindingApprovalSent})
		require.ErrorIs(t, err, domain.ErrPreempted)

		// A second delivery finds the binding out of the waiting set.
		res, err = s.WorkCallbackApply(ctx, approved("op-1"))
		require.NoError(t, err)
		require.False(t, res.Applied)
		require.Nil(t, res.Flip)

		// Unknown operation: stale.
		res, err = s.WorkCallbackApply(ctx, approved("op-none"))
		require.NoError(t, err)
		require.False(t, res.Applied)
	})
}

func TestWorkCallbackApplyOwnershipAndTable(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		mustSubmitApproveFirst(t, s, "op-old", "bob")
		rej := approved("op-old")
		rej.Step, rej.Binding, rej.NextAction = int(domain.StepCloseRejected), domain.BindingRejected, ""
		res, err := s.WorkCallbackApply(ctx, rej)
		require.NoError(t, err)
		require.True(t, res.Applied)
		o := mustOperation(t, s, "op-old")
		require.Empty(t, o.NextAction)
		require.True(t, o.DueAt.IsZero())

		// Re-applied: the row belongs to op-new; op-old's approval is stale.
		mustSubmitApproveFirst(t, s, "op-new", "bob")
		res, err = s.WorkCallbackApply(ctx, approved("op-old"))
		require.NoError(t, err)
		require.False(t, res.Applied)
		require.Equal(t, "op-new", res.Current.OperationID)
		require.Equal(t, domain.BindingApprovalSending, mustBinding(t, s, "bob", "t").Status)

		// A move the table does not list writes nothing.
		bad := approved("op-new")
		bad.Step = int(domain.StepHandleMerged)
		_, err = s.WorkCallbackApply(ctx, bad)
		require.True(t, errors.Is(err, domain.ErrIllegalTransition), "%v", err)
		require.Equal(t, int(domain.StepCreateApprovalSubmitting), mustOperation(t, s, "op-new").Step)

		// Admission in the same transaction.
		adm := approved("op-new")
		adm.Step, adm.NextAction, adm.AdmitProject = int(domain.StepCreateAdmitted), "", 1
		res, err = s.WorkCallbackApply(ctx, adm)
		require.NoError(t, err)
		require.True(t, res.Applied)
		n, err := s.BatchWaitingCount(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, 1, n)
	})
}

func TestWorkExpediteOnlyWaitingRows(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		mustSchedule(t, s, "op-w", "create_mr")
		claimed, err := s.WorkClaimDue(ctx, "i1", time.Minute, 10)
		require.NoError(t, err)
		require.Len(t, claimed, 1)
		moved, err := s.WorkExpedite(ctx, "op-w", "create_mr")
		require.NoError(t, err)
		require.True(t, moved, "noted for the running step")
		o := mustOperation(t, s, "op-w")
		require.Equal(t, claimed[0].Lease.Owner+"#"+claimed[0].Lease.Token, o.LeaseOwner, "a running step is not pre-empted")
		require.True(t, o.DueAt.Equal(claimed[0].Operation.DueAt), "nor made due")

		_, err = s.WorkComplete(ctx, store.WorkCompleteParams{OperationID: "op-w", Lease: claimed[0].Lease,
			Step: int(domain.StepCreateMRCreated), NextAction: "poll_pipeline", Delay: time.Hour,
			Fields: store.WorkFields{MRIID: 42}})
		require.NoError(t, err)
		moved, err = s.WorkExpedite(ctx, "op-w", "merge")
		require.NoError(t, err)
		require.False(t, moved, "another action is left alone")
		moved, err = s.WorkExpedite(ctx, "op-w", "poll_pipeline")
		require.NoError(t, err)
		require.True(t, moved)
		again, err := s.WorkClaimDue(ctx, "i1", time.Minute, 10)
		require.NoError(t, err)
		require.Len(t, again, 1)
		_, err = s.WorkComplete(ctx, store.WorkCompleteParams{OperationID: "op-w", Lease: again[0].Lease,
			NextAction: "poll_pipeline", Delay: time.Hour}) // a poll: wait again
		require.NoError(t, err)
		moved, err = s.WorkExpedite(ctx, "op-w", "poll_pipeline")
		require.NoError(t, err)
		require.True(t, moved)
		again, err = s.WorkClaimDue(ctx, "i1", time.Minute, 10)
		require.NoError(t, err)
		require.Len(t, again, 1)
		require.Equal(t, 2, again[0].Operation.Attempts, "attempts kept for the polling tiers")

		ops, err := s.OperationListByMR(ctx, 1, 42)
		require.NoError(t, err)
		require.Len(t, ops, 1)
		seen, err := s.DeployCallbackSeen(ctx, 1, 42)
		require.NoError(t, err)
		require.False(t, seen)
		_, err = s.DeployCallbackInsert(ctx, store.DeployCallbackParams{ProjectID: 1, MRIID: 42, Status: "SUCCESS"})
		require.NoError(t, err)
		seen, err = s.DeployCallbackSeen(ctx, 1, 42)
		require.NoError(t, err)
		require.True(t, seen)
	})
}

// TestWorkExpediteWhileRunningIsNotLost: an event for a step that runs
// right now (the webhook "pipeline passed" while the poll that read
// "running" a moment before is still writing "wait an hour") is noted,
// not lost: when the step schedules the same action again it is due now,
// once; another action keeps its delay.
func TestWorkExpediteWhileRunningIsNotLost(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		mustSchedule(t, s, "op-x", "poll_pipeline")
		poll := func() store.WorkItem {
			t.Helper()
			got, err := s.WorkClaimDue(ctx, "i1", time.Minute, 10)
			require.NoError(t, err)
			require.Len(t, got, 1, "due now")
			return got[0]
		}
		wait := func(w store.WorkItem, action string) {
			t.Helper()
			_, err := s.WorkComplete(ctx, store.WorkCompleteParams{OperationID: "op-x", Lease: w.Lease,
				NextAction: action, Delay: time.Hour})
			require.NoError(t, err)
		}
		notDue := func(why string) {
			t.Helper()
			got, err := s.WorkClaimDue(ctx, "i1", time.Minute, 10)
			require.NoError(t, err)
			require.Empty(t, got, why)
		}

		running := poll()
		moved, err := s.WorkExpedite(ctx, "op-x", "poll_pipeline")
		require.NoError(t, err)
		require.True(t, moved)
		notDue("the running step is not run twice")
		wait(running, "poll_pipeline") // it read the state before the event
		again := poll()
		require.Equal(t, 2, again.Operation.Attempts, "attempts kept for the polling tiers")

		wait(again, "poll_pipeline")
		notDue("the note was used once")

		moved, err = s.WorkExpedite(ctx, "op-x", "poll_pipeline")
		require.NoError(t, err)
		require.True(t, moved, "a waiting row is made due")
		running = poll()
		moved, err = s.WorkExpedite(ctx, "op-x", "poll_pipeline")
		require.NoError(t, err)
		require.True(t, moved)
		wait(running, "merge")
		notDue("a note for another action does not speed up this one")
	})
}

// mustApprovalSent claims operationID's submit_approval and completes it
// as sent: APPROVAL_SENT with approvalID (and mrIID, 0 for none) recorded.
func mustApprovalSent(t testing.TB, s *store.Store, operationID, subject, approvalID string, mrIID int64) {
	t.Helper()
	mustSubmitApproveFirst(t, s, operationID, subject)
	claimed, err := s.WorkClaimDue(t.Context(), "i1", time.Minute, 10)
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	_, err = s.WorkComplete(t.Context(), store.WorkCompleteParams{OperationID: operationID, Lease: claimed[0].Lease,
		Step: int(domain.StepCreateApprovalSubmitted), Binding: domain.BindingApprovalSent, NextAction: "poll_approval", Delay: time.Hour,
		Fields: store.WorkFields{ApprovalID: approvalID, MRIID: mrIID}})
	require.NoError(t, err)
}

// TestWorkCallbackApplyApprovalBindingAttacks: a decision is applied only
// for the approval changeflow recorded (and the request's MR); every
// attack is refused with a reason, writes nothing — the recorded approval
// id stays — and the real decision still applies afterwards.
func TestWorkCallbackApplyApprovalBindingAttacks(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		mrIID  int64 // the request's MR (0: approve-first, none)
		attack store.ApprovalBinding
		reason string
	}{
		{"another approvalId on a waiting request", 0, store.ApprovalBinding{ApprovalID: "APR-666"}, "not the approval changeflow submitted"},
		{"another approvalId that asks to be adopted", 0, store.ApprovalBinding{ApprovalID: "APR-666", Adopt: true}, "not the approval changeflow submitted"},
		{"no approvalId at all", 0, store.ApprovalBinding{}, "names no approvalId"},
		{"the right approval with a wrong ext.mrId (legacy)", 7, store.ApprovalBinding{ApprovalID: "APR-1", MRIID: 8}, "is not this request's MR !7"},
		{"the right approval without ext.mrId on a legacy request", 7, store.ApprovalBinding{ApprovalID: "APR-1"}, "legacy flow with MR !7"},
		{"the right approval with an ext.mrId on an approve-first request", 0, store.ApprovalBinding{ApprovalID: "APR-1", MRIID: 3}, "has no MR"},
	}
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				ctx := t.Context()
				op, subject := fmt.Sprintf("op-attack-%d", i), fmt.Sprintf("user%d", i)
				mustApprovalSent(t, s, op, subject, "APR-1", c.mrIID)
				p := approved(op)
				p.Approval = &c.attack
				res, err := s.WorkCallbackApply(ctx, p)
				require.NoError(t, err)
				require.False(t, res.Applied)
				require.Contains(t, res.Refused, c.reason)
				o := mustOperation(t, s, op)
				require.Equal(t, "APR-1", o.ApprovalID, "the recorded approval id is never overwritten")
				require.Equal(t, int(domain.StepCreateApprovalSubmitted), o.Step)
				require.Equal(t, domain.BindingApprovalSent, mustBinding(t, s, subject, "t").Status)

				// The real decision still applies.
				rej := approved(op)
				rej.Step, rej.Binding, rej.NextAction = int(domain.StepCloseRejected), domain.BindingRejected, ""
				rej.Approval = &store.ApprovalBinding{ApprovalID: "APR-1", MRIID: c.mrIID}
				res, err = s.WorkCallbackApply(ctx, rej)
				require.NoError(t, err)
				require.True(t, res.Applied, res.Refused)
				require.Equal(t, domain.BindingRejected, mustBinding(t, s, subject, "t").Status)
			})
		}
		t.Run("an unrecorded approval id is adopted only when asked", func(t *testing.T) {
			ctx := t.Context()
			mustSubmitApproveFirst(t, s, "op-early", "early")
			p := approved("op-early")
			p.Approval = &store.ApprovalBinding{ApprovalID: "APR-9"}
			res, err := s.WorkCallbackApply(ctx, p)
			require.NoError(t, err)
			require.Contains(t, res.Refused, "no approval id is recorded")
			require.Empty(t, mustOperation(t, s, "op-early").ApprovalID)
			p.Approval.Adopt = true
			res, err = s.WorkCallbackApply(ctx, p)
			require.NoError(t, err)
			require.True(t, res.Applied)
			require.Equal(t, "APR-9", mustOperation(t, s, "op-early").ApprovalID)
		})
	})
}
