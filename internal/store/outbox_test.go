package store_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/notify"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// kindsOf are the kinds of operationID's events, in the order written.
func kindsOf(t *testing.T, s *store.Store, operationID string) []notify.Kind {
	t.Helper()
	evs, err := s.OutboxEventsOf(t.Context(), operationID)
	require.NoError(t, err)
	var out []notify.Kind
	for _, e := range evs {
		out = append(out, e.Kind)
	}
	return out
}

// TestOutboxWritesEachMovesEventInItsTransaction: a submission, a
// confirmation and a rejection each commit their event with them, with
// the facts of the request (and the approver's comment); the steps on the
// way write none; a change that rolls back leaves no event.
func TestOutboxWritesEachMovesEventInItsTransaction(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		mustSubmit(t, s, "ob-g", "alice", "ob-t", domain.BindingMerged)
		require.Equal(t, []notify.Kind{notify.KindRequestSubmitted}, kindsOf(t, s, "ob-g"))
		atStep(t, s, "ob-g", domain.StepHandleMerged)
		confirm(t, s, "ob-g")
		require.Equal(t, []notify.Kind{notify.KindRequestSubmitted, notify.KindRequestInEffect}, kindsOf(t, s, "ob-g"))
		confirmAgain, err := s.BindingMarkValidated(ctx, store.BindingMarkValidatedParams{
			OperationID: "ob-g", CalledBackStep: int(domain.StepCalledBack), Actor: "deploy-callback"})
		require.NoError(t, err)
		require.Nil(t, confirmAgain)
		require.Len(t, kindsOf(t, s, "ob-g"), 2, "a duplicate confirmation writes no second event")

		evs, err := s.OutboxEventsOf(ctx, "ob-g")
		require.NoError(t, err)
		in := evs[1]
		require.Equal(t, store.OutboxPending, in.Status)
		require.Regexp(t, `^evt_[0-9a-f]{32}$`, in.EventID)
		require.NotEqual(t, evs[0].EventID, in.EventID)
		require.Equal(t, "ob-g", in.OrderKey)
		require.Equal(t, "alice", in.Data.Subject)
		require.Equal(t, "alice", in.Data.Requester)
		require.Equal(t, "ob-t", in.Data.TargetKey)
		require.Equal(t, domain.OperationGrant, in.Data.Request)
		require.NotNil(t, in.Data.Until)
		require.True(t, in.Data.Until.Equal(time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)), "until %v", in.Data.Until)

		// A rejection carries the approver's comment.
		mustSubmitApproval(t, s, "ob-r", "bob", "ob-t")
		mustExec(t, s.DB(), "INSERT INTO approval_callback (delivery_key, operation_id, approval_id, result, decided_by, comment) VALUES ('d-ob-r', 'ob-r', 'ap', 'REJECTED', 'carol', 'not for prod')")
		res, err := s.WorkCallbackApply(ctx, store.WorkCallbackParams{OperationID: "ob-r",
			Waiting: []domain.BindingStatus{domain.BindingApprovalSending}, Step: int(domain.StepCloseRejected), Binding: domain.BindingRejected, Actor: "approval"})
		require.NoError(t, err)
		require.True(t, res.Applied)
		evs, err = s.OutboxEventsOf(ctx, "ob-r")
		require.NoError(t, err)
		require.Len(t, evs, 2)
		require.Equal(t, notify.KindRequestRejected, evs[1].Kind)
		require.Equal(t, "not for prod", evs[1].Data.Comment)

		// A step on the way writes nothing; a change that rolls back
		// leaves nothing of its event.
		mustSubmit(t, s, "ob-x", "dave", "ob-t", domain.BindingMRCreating)
		require.NoError(t, s.StepThenRollBack(ctx, "ob-x", domain.StepCreateStarted, domain.StepCreateBranchCreated, "", ""))
		require.NoError(t, s.StepThenRollBack(ctx, "ob-x", domain.StepCreatePipelineRunning, domain.StepCreatePipelineFailed,
			domain.BindingMRCreating, domain.BindingCreateFailed))
		require.Equal(t, []notify.Kind{notify.KindRequestSubmitted}, kindsOf(t, s, "ob-x"))
	})
}

// TestOutboxClaimsWithALeaseInOrderPerRequest: of two instances claiming
// at once each event goes to one; a request's second event waits for its
// first; a lease that runs out hands the event, with the same id, to the
// other instance, whose finish wins; failures retry, then go dead, and a
// replay makes them due again.
func TestOutboxClaimsWithALeaseInOrderPerRequest(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		ev := func(order string) store.OutboxNew {
			return store.OutboxNew{Kind: notify.KindBatchBlocked, OrderKey: order, Data: store.OutboxData{Data: notify.Data{BatchID: 7}}}
		}
		require.NoError(t, s.OutboxAdd(ctx, ev("q:a"), ev("q:a"), ev("q:b")))
		require.Error(t, s.OutboxAdd(ctx, store.OutboxNew{Kind: "no.such", OrderKey: "x"}))
		require.Error(t, s.OutboxAdd(ctx, store.OutboxNew{Kind: notify.KindBatchBlocked}))

		var (
			wg  sync.WaitGroup
			got [2][]store.OutboxEvent
		)
		for i := range got {
			wg.Go(func() {
				evs, err := s.OutboxClaim(ctx, []string{"i1", "i2"}[i], time.Minute, 10)
				require.NoError(t, err)
				got[i] = evs
			})
		}
		wg.Wait()
		claimed := map[string]string{}
		for i, evs := range got {
			for _, e := range evs {
				_, twice := claimed[e.EventID]
				require.False(t, twice, "event %s claimed twice", e.EventID)
				claimed[e.EventID] = []string{"i1", "i2"}[i]
				require.Equal(t, 1, e.Attempts)
			}
		}
		require.Len(t, claimed, 2, "q:a's first and q:b's only: q:a's second waits")
		owner := func(order string) (store.OutboxEvent, string) {
			for i, evs := range got {
				for _, e := range evs {
					if e.OrderKey == order {
						return e, []string{"i1", "i2"}[i]
					}
				}
			}
			t.Fatalf("no claim of %s", order)
			return store.OutboxEvent{}, ""
		}
		a1, a1Owner := owner("q:a")
		b, bOwner := owner("q:b")
		ok, err := s.OutboxFinish(ctx, a1.Row, "someone-else", true, false, 0, "")
		require.NoError(t, err)
		require.False(t, ok, "only the lease's owner finishes")
		ok, err = s.OutboxFinish(ctx, a1.Row, a1Owner, true, false, 0, "")
		require.NoError(t, err)
		require.True(t, ok)

		// q:a's second is due now; q:b failed and retries at once.
		ok, err = s.OutboxFinish(ctx, b.Row, bOwner, false, false, 0, "hooks: 500")
		require.NoError(t, err)
		require.True(t, ok)
		next, err := s.OutboxClaim(ctx, "i1", 50*time.Millisecond, 10)
		require.NoError(t, err)
		require.Len(t, next, 2)
		require.Equal(t, "q:a", next[0].OrderKey)
		require.NotEqual(t, a1.EventID, next[0].EventID)
		require.Equal(t, b.EventID, next[1].EventID, "a retry keeps the event's id")
		require.Equal(t, 2, next[1].Attempts)
		require.Equal(t, "hooks: 500", next[1].LastError)

		// i1 stalls past its lease: i2 takes the events over, same ids,
		// and i1's late finish is refused.
		time.Sleep(120 * time.Millisecond)
		over, err := s.OutboxClaim(ctx, "i2", time.Minute, 10)
		require.NoError(t, err)
		require.Len(t, over, 2)
		require.Equal(t, next[1].EventID, over[1].EventID)
		ok, err = s.OutboxFinish(ctx, next[1].Row, "i1", true, false, 0, "")
		require.NoError(t, err)
		require.False(t, ok, "a lease that ran out finishes nothing")

		// Dead, listed, replayed.
		ok, err = s.OutboxFinish(ctx, over[1].Row, "i2", false, true, 0, "hooks: 500 (attempt 3)")
		require.NoError(t, err)
		require.True(t, ok)
		dead, err := s.OutboxDeadLetters(ctx, 10)
		require.NoError(t, err)
		require.Len(t, dead, 1)
		require.Equal(t, b.EventID, dead[0].EventID)
		require.Equal(t, "hooks: 500 (attempt 3)", dead[0].LastError)
		st, err := s.OutboxStats(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, st.Pending, "q:a's second, still claimed")
		require.Equal(t, 1, st.Dead)
		require.Positive(t, st.OldestPending)
		replayed, err := s.OutboxReplay(ctx, b.EventID)
		require.NoError(t, err)
		require.True(t, replayed)
		replayed, err = s.OutboxReplay(ctx, b.EventID)
		require.NoError(t, err)
		require.False(t, replayed, "only a dead event is replayed")
		again, err := s.OutboxClaim(ctx, "i1", time.Minute, 10)
		require.NoError(t, err)
		require.Len(t, again, 1)
		require.Equal(t, b.EventID, again[0].EventID)
		require.Equal(t, 1, again[0].Attempts, "a replay starts the attempts again")

		// Deliveries are recorded once per channel.
		require.NoError(t, s.OutboxRecordDelivery(ctx, b.Row, "webhook:a", store.DeliveryDelivered))
		require.NoError(t, s.OutboxRecordDelivery(ctx, b.Row, "webhook:a", store.DeliverySkipped))
		had, err := s.OutboxDeliveries(ctx, b.Row)
		require.NoError(t, err)
		require.Equal(t, map[string]string{"webhook:a": store.DeliveryDelivered}, had)

		// A channel gone, then turned on again.
		require.NoError(t, s.OutboxDisableChannel(ctx, "webhook:a", "410 Gone"))
		require.NoError(t, s.OutboxDisableChannel(ctx, "webhook:a", "again"))
		off, err := s.OutboxDisabledChannels(ctx)
		require.NoError(t, err)
		require.Equal(t, "410 Gone", off["webhook:a"].Reason)
		on, err := s.OutboxEnableChannel(ctx, "webhook:a")
		require.NoError(t, err)
		require.True(t, on)
	})
}

// TestOutboxRemindsOnceAThreshold: an access in effect that ends within a
// threshold gets that threshold's reminder once however many instances
// scan at once, and only the smallest threshold it is inside; an access
// being removed, not ending soon, or in effect for less than the
// threshold before its end gets none.
func TestOutboxRemindsOnceAThreshold(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		now := time.Now()
		// inEffect confirms a grant as the deployment does (its period
		// opens), as if a week ago, ending at until.
		inEffect := func(op, subject string, until time.Time) {
			mustSubmit(t, s, op, subject, "rm-t", domain.BindingMerged)
			atStep(t, s, op, domain.StepHandleMerged)
			confirm(t, s, op)
			mustSetBinding(t, s, subject, "rm-t", domain.BindingValidated, until)
			mustExec(t, s.DB(), "UPDATE access_interval SET from_at = ? WHERE operation_id = ?", s.Dialect().Time(now.Add(-7*24*time.Hour)), op)
		}
		inEffect("rm-soon", "alice", now.Add(10*time.Hour))
		inEffect("rm-two-days", "bob", now.Add(48*time.Hour))
		inEffect("rm-later", "carol", now.Add(30*24*time.Hour))
		inEffect("rm-going", "dave", now.Add(time.Hour))
		mustSetBinding(t, s, "dave", "rm-t", domain.BindingRevoking, now.Add(time.Hour))
		// A grant of 20 hours that has just taken effect: it was in effect
		// for less than either threshold before its end, so neither
		// reminds it as it starts.
		mustSubmit(t, s, "rm-short", "erin", "rm-t", domain.BindingMerged)
		atStep(t, s, "rm-short", domain.StepHandleMerged)
		confirm(t, s, "rm-short")
		mustSetBinding(t, s, "erin", "rm-t", domain.BindingValidated, now.Add(20*time.Hour))

		thresholds := []time.Duration{72 * time.Hour, 24 * time.Hour}
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			total int
		)
		for range 6 {
			wg.Go(func() {
				n, err := s.OutboxRemindExpiring(ctx, thresholds, 100)
				require.NoError(t, err)
				mu.Lock()
				total += n
				mu.Unlock()
			})
		}
		wg.Wait()
		require.Equal(t, 2, total, "one reminder each for alice and bob, whoever wrote it")
		n, err := s.OutboxRemindExpiring(ctx, thresholds, 100)
		require.NoError(t, err)
		require.Zero(t, n, "a second scan writes nothing")

		threshold := func(op string) []string {
			evs, err := s.OutboxEventsOf(ctx, op)
			require.NoError(t, err)
			var out []string
			for _, e := range evs {
				if e.Kind == notify.KindAccessExpiring {
					out = append(out, e.Data.Threshold)
					require.NotNil(t, e.Data.Until)
				}
			}
			return out
		}
		require.Equal(t, []string{"24h"}, threshold("rm-soon"), "inside 24h: the 72h one is past")
		require.Equal(t, []string{"72h"}, threshold("rm-two-days"))
		require.Empty(t, threshold("rm-later"))
		require.Empty(t, threshold("rm-going"), "an access being removed is not reminded of")
		require.Empty(t, threshold("rm-short"), "in effect for less than 24h before its end: no reminder as it starts")
	})
}

// TestOutboxTellsOfABlockedBatchAndAnOpenedReview: blocking a batch and
// opening a review write their events with them, once.
func TestOutboxTellsOfABlockedBatchAndAnOpenedReview(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		admitWaiting(t, s, 77, "ob-blk", 2)
		backdateWaiting(t, s, 77)
		c := mustClaim(t, s, 77, 10)
		_, err := s.BatchBlock(ctx, store.BatchBlockParams{ID: c.BatchID, Version: 1, Code: "REBASE_CONFLICT", Message: "the rebase conflicts"})
		require.NoError(t, err)
		_, err = s.BatchBlock(ctx, store.BatchBlockParams{ID: c.BatchID, Version: 1, Code: "REBASE_CONFLICT"})
		require.ErrorIs(t, err, domain.ErrPreempted)
		var blocked []store.OutboxEvent
		claimed, err := s.OutboxClaim(ctx, "i1", time.Minute, 100)
		require.NoError(t, err)
		for _, e := range claimed {
			if e.Kind == notify.KindBatchBlocked {
				blocked = append(blocked, e)
			}
		}
		require.Len(t, blocked, 1, "one event per block")
		require.Equal(t, c.BatchID, blocked[0].Data.BatchID)
		require.Equal(t, "77", blocked[0].Data.Project)
		require.Equal(t, "the rebase conflicts", blocked[0].Data.WhatToDo)

		mustSubmit(t, s, "ob-rev", "erin", "ob-rev-t", domain.BindingValidated)
		rc, err := s.ReviewOpen(ctx, store.ReviewOpenParams{TargetKey: "ob-rev-t", DueAt: time.Now().Add(48 * time.Hour),
			Default: domain.ReviewRevoke, OpenedBy: "ops", Reviewers: []string{"olga", "oscar"}})
		require.NoError(t, err)
		claimed, err = s.OutboxClaim(ctx, "i1", time.Minute, 100)
		require.NoError(t, err)
		var assigned []store.OutboxEvent
		for _, e := range claimed {
			if e.Kind == notify.KindReviewAssigned {
				assigned = append(assigned, e)
			}
		}
		require.Len(t, assigned, 1)
		require.Equal(t, []string{"olga", "oscar"}, assigned[0].Data.Reviewers)
		require.Equal(t, "ob-rev-t", assigned[0].Data.TargetKey)
		require.Equal(t, fmt.Sprint(rc.ID), assigned[0].Data.ReviewID)
	})
}
