package store_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// TestRaceMarkValidatedFlipsOnce: round after round, a merged request's
// deploy callback, reconciliation and operators — 32 goroutines — call
// BindingMarkValidated at the same instant. Exactly one gets a Flip (the
// one that may count the metric, I9); the others get nil, not an error,
// because they queue on the operation's row lock and then read VALIDATED.
// The lagging step is repaired once, in the same transaction as the flip.
func TestRaceMarkValidatedFlipsOnce(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		rounds, flipsTotal := 0, 0
		for deadline := time.Now().Add(raceDuration); time.Now().Before(deadline); rounds++ {
			opID, subject := fmt.Sprintf("op-%d", rounds), fmt.Sprintf("user-%d", rounds)
			mustSubmit(t, s, opID, subject, "t", domain.BindingMerged)
			walked := storetest.WalkTo(t, s, opID, storetest.LegacyPath, domain.StepHandleApproved)
			walkedSteps := len(mustSteps(t, s, opID))

			var (
				mu    sync.Mutex
				flips []*store.Flip
				errs  []error
			)
			runAtOnce(func(g int) {
				flip, err := s.BindingMarkValidated(ctx, store.BindingMarkValidatedParams{
					OperationID: opID, CalledBackStep: stepCalledBack, Actor: fmt.Sprint(g)})
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
				}
				if flip != nil {
					flips = append(flips, flip)
				}
			})
			require.Empty(t, errs, "round %d: losers answer nil, they do not fail", rounds)
			require.Len(t, flips, 1, "round %d: exactly one caller flips", rounds)
			flipsTotal += len(flips)

			op, b := mustOperation(t, s, opID), mustBinding(t, s, subject, "t")
			require.Equal(t, domain.BindingValidated, b.Status)
			require.Equal(t, int64(2), b.Version, "one binding write")
			require.Equal(t, stepCalledBack, op.Step)
			require.Equal(t, walked.Version+1, op.Version, "walked to handling, repaired once")
			require.Len(t, mustSteps(t, s, opID), walkedSteps+1)
		}
		t.Logf("%s: %d rounds × %d concurrent callers: %d flips, %d nil answers, 0 errors",
			s.Dialect().Name(), rounds, raceGoroutines, flipsTotal, rounds*raceGoroutines-flipsTotal)
	})
}
