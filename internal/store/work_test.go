package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// mustSchedule submits operationID (legacy entry: CREATE_STARTED, MR_CREATING)
// with action due at once.
func mustSchedule(t testing.TB, s *store.Store, operationID, action string) {
	t.Helper()
	p := opParams(operationID, "u-"+operationID, "t")
	p.NextAction = action
	_, err := s.OperationSubmit(t.Context(), store.OperationSubmitParams{Operation: p, BindingStatus: domain.BindingMRCreating})
	require.NoError(t, err)
}

func TestWorkClaimTakesDueWorkOnce(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		mustSchedule(t, s, "op-1", "create_mr")
		_, err := s.OperationCreate(ctx, opParams("op-idle", "x", "t")) // nothing scheduled
		require.NoError(t, err)

		got, err := s.WorkClaimDue(ctx, "i1", time.Minute, 10)
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, "op-1", got[0].Operation.OperationID)
		require.Equal(t, "create_mr", got[0].Operation.NextAction)
		require.Equal(t, 1, got[0].Operation.Attempts)
		require.Equal(t, got[0].Operation.LeaseExpiresAt, got[0].Operation.DueAt, "a claimed row is due again when its lease expires")

		again, err := s.WorkClaimDue(ctx, "i2", time.Minute, 10)
		require.NoError(t, err)
		require.Empty(t, again, "a held lease is not claimable")

		res, err := s.WorkComplete(ctx, store.WorkCompleteParams{
			OperationID: "op-1", Lease: got[0].Lease, Step: int(domain.StepCreateMRCreated),
			NextAction: "poll_pipeline", Delay: time.Hour, Fields: store.WorkFields{MRIID: 7, Branch: "changeflow/op-1"},
		})
		require.NoError(t, err)
		require.True(t, res.StepWritten)
		require.Nil(t, res.Flip)
		require.Equal(t, "poll_pipeline", res.Operation.NextAction)
		require.Equal(t, 0, res.Operation.Attempts, "a new action starts counting again")
		require.Empty(t, res.Operation.LeaseOwner)
		require.Equal(t, int64(7), res.Operation.MRIID)

		none, err := s.WorkClaimDue(ctx, "i2", time.Minute, 10)
		require.NoError(t, err)
		require.Empty(t, none, "not due for an hour")
	})
}

func TestWorkCompleteChecksTheTableAndWritesNothingOnAnIllegalMove(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		mustSchedule(t, s, "op-1", "create_mr")
		got, err := s.WorkClaimDue(ctx, "i1", time.Minute, 1)
		require.NoError(t, err)
		require.Len(t, got, 1)
		l := got[0].Lease

		_, err = s.WorkComplete(ctx, store.WorkCompleteParams{OperationID: "op-1", Lease: l, Step: int(domain.StepHandleMerged)})
		require.ErrorIs(t, err, domain.ErrIllegalTransition)
		_, err = s.WorkComplete(ctx, store.WorkCompleteParams{OperationID: "op-1", Lease: l,
			Step: int(domain.StepCreateMRCreated), Binding: domain.BindingValidated})
		require.ErrorIs(t, err, domain.ErrIllegalTransition)
		o := mustOperation(t, s, "op-1")
		require.Equal(t, int(domain.StepCreateStarted), o.Step, "nothing written")
		require.Equal(t, l.Owner+"#"+l.Token, o.LeaseOwner, "the lease is still held")
		require.Equal(t, domain.BindingMRCreating, mustBinding(t, s, "u-op-1", "t").Status)

		res, err := s.WorkComplete(ctx, store.WorkCompleteParams{OperationID: "op-1", Lease: l,
			Step: int(domain.StepCreateFailed), Binding: domain.BindingCreateFailed, KeepAction: true, LastError: "boom"})
		require.NoError(t, err)
		require.NotNil(t, res.Flip)
		require.Equal(t, domain.BindingMRCreating, res.Flip.From)
		require.Equal(t, "create_mr", res.Operation.NextAction, "a failure remembers where it stopped")
		require.True(t, res.Operation.DueAt.IsZero())
		steps := mustSteps(t, s, "op-1")
		last := steps[len(steps)-1]
		require.Equal(t, domain.BindingCreateFailed, last.ToBinding)
	})
}

func TestWorkCompleteAfterALostLeaseIsPreempted(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		mustSchedule(t, s, "op-1", "create_mr")
		got, err := s.WorkClaimDue(ctx, "i1", time.Minute, 1)
		require.NoError(t, err)
		require.NoError(t, s.WorkSchedule(ctx, "op-1", "close_mr", 0), "a callback re-schedules and pre-empts")
		_, err = s.WorkComplete(ctx, store.WorkCompleteParams{OperationID: "op-1", Lease: got[0].Lease,
			Step: int(domain.StepCreateMRCreated), NextAction: "poll"})
		require.ErrorIs(t, err, domain.ErrPreempted)
		_, err = s.WorkRenewLease(ctx, "op-1", got[0].Lease, time.Minute)
		require.ErrorIs(t, err, domain.ErrPreempted)
		o := mustOperation(t, s, "op-1")
		require.Equal(t, int(domain.StepCreateStarted), o.Step)
		require.Equal(t, "close_mr", o.NextAction)
		require.ErrorIs(t, s.WorkSchedule(ctx, "nope", "x", 0), domain.ErrNotFound)
	})
}

func TestWorkLeaseExpiryMakesTheRowDueAgain(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		mustSchedule(t, s, "op-1", "create_mr")
		dead, err := s.WorkClaimDue(ctx, "dead", 150*time.Millisecond, 1)
		require.NoError(t, err)
		require.Len(t, dead, 1)
		var got []store.WorkItem
		require.Eventually(t, func() bool {
			got, err = s.WorkClaimDue(ctx, "alive", time.Minute, 1)
			return err == nil && len(got) == 1
		}, 5*time.Second, 20*time.Millisecond)
		require.Equal(t, 2, got[0].Operation.Attempts)
		_, err = s.WorkComplete(ctx, store.WorkCompleteParams{OperationID: "op-1", Lease: dead[0].Lease})
		require.ErrorIs(t, err, domain.ErrPreempted, "the dead owner's late write is refused")
		_, err = s.WorkComplete(ctx, store.WorkCompleteParams{OperationID: "op-1", Lease: got[0].Lease})
		require.NoError(t, err)

		mustSchedule(t, s, "op-2", "create_mr")
		_, err = s.WorkClaimDue(ctx, "dead", 10*time.Millisecond, 1)
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			n, err := s.WorkReleaseExpired(ctx, 10)
			return err == nil && n == 1
		}, 5*time.Second, 20*time.Millisecond)
		require.Empty(t, mustOperation(t, s, "op-2").LeaseOwner)
	})
}

// TestWorkClaimNeverGivesARowToTwoOwners races two store handles (two
// connection pools, as two instances) claiming 200 due operations.
func TestWorkClaimNeverGivesARowToTwoOwners(t *testing.T) {
	t.Parallel()
	storetest.EachDSN(t, func(t *testing.T, driver, dsn string) {
		a := storetest.OpenDSN(t, driver, dsn)
		_, err := a.Migrate(t.Context())
		require.NoError(t, err)
		b := storetest.OpenDSN(t, driver, dsn)
		const n = 200
		for i := range n {
			mustSchedule(t, a, fmt.Sprintf("op-%03d", i), "x")
		}
		var (
			mu    sync.Mutex
			owner = map[string]string{}
			wg    sync.WaitGroup
		)
		for g, s := range []*store.Store{a, b, a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				name := fmt.Sprintf("i%d", g)
				for {
					got, err := s.WorkClaimDue(context.Background(), name, time.Minute, 7)
					if errors.Is(err, domain.ErrBusy) || errors.Is(err, domain.ErrPreempted) {
						continue
					}
					if err != nil {
						t.Error(err)
						return
					}
					if len(got) == 0 {
						return
					}
					mu.Lock()
					for _, w := range got {
						if prev, dup := owner[w.Operation.OperationID]; dup {
							t.Errorf("%s claimed by %s and %s", w.Operation.OperationID, prev, name)
						}
						owner[w.Operation.OperationID] = name
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		require.Len(t, owner, n)
	})
}

func TestStoreWritesRefuseIllegalMoves(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		p := opParams("op-bad", "alice", "t")
		p.NextAction = "create_mr"
		_, err := s.OperationSubmit(ctx, store.OperationSubmitParams{Operation: p, BindingStatus: domain.BindingMerged})
		require.ErrorIs(t, err, domain.ErrIllegalTransition, "a scheduled submission starts from the entry row")
		p.Step = int(domain.StepHandleMerged)
		_, err = s.OperationSubmit(ctx, store.OperationSubmitParams{Operation: p, BindingStatus: domain.BindingMRCreating})
		require.ErrorIs(t, err, domain.ErrIllegalTransition)
		_, err = s.OperationGet(ctx, "op-bad")
		require.ErrorIs(t, err, domain.ErrNotFound, "nothing written")

		mustSubmit(t, s, "op-1", "bob", "t", domain.BindingMerging)
		_, err = s.BindingAdvance(ctx, store.BindingAdvanceParams{OperationID: "op-1", From: domain.BindingMerging, To: domain.BindingValidated})
		require.ErrorIs(t, err, domain.ErrIllegalTransition)
		require.Equal(t, domain.BindingMerging, mustBinding(t, s, "bob", "t").Status)

	})
}
