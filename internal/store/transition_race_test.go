package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// TestRaceGuardedWritesLoseNoUpdate: 32 goroutines read one operation and
// write its step back and forth between two steps (a round trip, so every
// stale read is an ABA opportunity), guarded by step and version. No
// update may be lost: the successful writes must account for every version
// increment and form one unbroken chain in the step history.
func TestRaceGuardedWritesLoseNoUpdate(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		_, err := s.OperationCreate(t.Context(), opParams("op-race", "alice", "t"))
		require.NoError(t, err)
		start := storetest.WalkTo(t, s, "op-race", storetest.LegacyPath, domain.StepHandleApproved)
		walked := len(mustSteps(t, s, "op-race"))
		var wins, preempted, busy atomic.Int64
		runRace(t, func(ctx context.Context, g, _ int) error {
			o, err := s.OperationGet(ctx, "op-race")
			if err != nil {
				return err
			}
			to := roundTrip(o.Step)
			_, err = s.OperationSetStepIfVersion(ctx, store.OperationSetStepIfVersionParams{
				OperationID: "op-race", FromStep: o.Step, ToStep: to, Version: o.Version, Actor: fmt.Sprint(g),
			})
			switch {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, domain.ErrPreempted):
				preempted.Add(1)
			case errors.Is(err, domain.ErrBusy):
				busy.Add(1)
			default:
				return err
			}
			return nil
		})

		final := mustOperation(t, s, "op-race")
		steps := mustSteps(t, s, "op-race")
		t.Logf("%s: %d successful writes, %d preempted, %d busy; final version %d",
			s.Dialect().Name(), wins.Load(), preempted.Load(), busy.Load(), final.Version)
		require.Positive(t, wins.Load())
		require.Positive(t, preempted.Load(), "the goroutines did contend")
		require.Zero(t, busy.Load(), "no deadlock, no lock wait timeout")
		require.Equal(t, wins.Load(), final.Version-start.Version, "every successful write is one version step, none lost")
		require.Len(t, steps, int(wins.Load())+walked, "one history row per successful write, plus the walk there")
		for k := 1; k < len(steps); k++ {
			require.Equal(t, steps[k-1].ToStep, steps[k].FromStep, "history row %d continues the chain", k)
		}
		require.Equal(t, final.Step, steps[len(steps)-1].ToStep)
	})
}

// TestRaceStatusOnlyGuardLosesUpdates is the control for the test above:
// the same load with a status-only guard, carrying the version
// the writer read plus one. A writer whose read is stale by a round trip
// passes the guard and writes a version that was already written, so the
// version no longer counts the writes. It only reports what it saw: the
// point is that the version guard's test is sensitive to this, not to
// assert a timing-dependent count.
func TestRaceStatusOnlyGuardLosesUpdates(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		_, err := s.OperationCreate(t.Context(), opParams("op-seed", "alice", "t"))
		require.NoError(t, err)
		start := storetest.WalkTo(t, s, "op-seed", storetest.LegacyPath, domain.StepHandleApproved)
		var wins atomic.Int64
		deadline := time.Now().Add(raceDuration / 3)
		runAtOnce(func(int) {
			for time.Now().Before(deadline) {
				o, err := s.OperationGet(t.Context(), "op-seed")
				if err != nil {
					return
				}
				to := roundTrip(o.Step)
				res, err := s.DB().ExecContext(t.Context(),
					"UPDATE operation SET step_status = ?, version = ? WHERE operation_id = ? AND step_status = ?",
					to, o.Version+1, "op-seed", o.Step)
				if err != nil {
					continue
				}
				if n, _ := res.RowsAffected(); n == 1 {
					wins.Add(1)
				}
			}
		})
		final := mustOperation(t, s, "op-seed")
		t.Logf("%s: status-only guard: %d successful writes, final version %d: %d updates lost",
			s.Dialect().Name(), wins.Load(), final.Version, wins.Load()-(final.Version-start.Version))
	})
}

// roundTrip returns the step the race tests write next from step: a merge
// refused and rebased (HANDLE_APPROVED → HANDLE_REBASING) and the rebase
// done (→ HANDLE_APPROVED), a legal round trip in the transition table, so
// every stale read is an ABA opportunity.
func roundTrip(step int) int {
	if step == int(domain.StepHandleRebasing) {
		return stepHandleApproved
	}
	return int(domain.StepHandleRebasing)
}
