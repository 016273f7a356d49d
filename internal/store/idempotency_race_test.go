package store_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// TestRaceIdempotentSubmitsAgreeOnTheWinner: round after round, 32
// goroutines submit the same request under a new key at the same instant;
// the one that gets Fresh completes it at once. Per round exactly one is
// Fresh, and every other answer is InFlight or Duplicate naming the
// winner's operationId — a Duplicate with the winner's stored response.
func TestRaceIdempotentSubmitsAgreeOnTheWinner(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		totals := map[store.IdempotencyOutcome]int{}
		rounds := 0
		for deadline := time.Now().Add(raceDuration); time.Now().Before(deadline); rounds++ {
			key := fmt.Sprintf("key-%d", rounds)
			var (
				mu       sync.Mutex
				results  = make([]store.IdempotencyResult, raceGoroutines)
				errs     []error
				winner   string
				response []byte
			)
			runAtOnce(func(g int) {
				res, err := s.IdempotencyBegin(ctx, idemParams(key, fmt.Sprintf("op-%d-%d", rounds, g)))
				if err == nil && res.Outcome == store.IdempotencyFresh {
					body := fmt.Appendf(nil, `{"code":"ACCEPTED","data":{"operationId":%q}}`, res.OperationID)
					err = s.IdempotencyComplete(ctx, store.IdempotencyCompleteParams{Subject: "alice", Key: key, OperationID: res.OperationID, Status: 202, Body: body})
					mu.Lock()
					winner, response = res.OperationID, body
					mu.Unlock()
				}
				mu.Lock()
				defer mu.Unlock()
				results[g] = res
				if err != nil {
					errs = append(errs, err)
				}
			})
			require.Empty(t, errs, "round %d", rounds)
			fresh := 0
			for g, res := range results {
				totals[res.Outcome]++
				switch res.Outcome {
				case store.IdempotencyFresh:
					fresh++
				case store.IdempotencyDuplicate:
					require.Equal(t, winner, res.OperationID, "round %d, goroutine %d", rounds, g)
					require.Equal(t, 202, res.ResponseStatus)
					require.Equal(t, response, res.ResponseBody, "the winner's response is replayed")
				case store.IdempotencyInFlight:
					require.Equal(t, winner, res.OperationID, "round %d, goroutine %d", rounds, g)
				default:
					t.Fatalf("round %d, goroutine %d: unexpected %v", rounds, g, res.Outcome)
				}
			}
			require.Equal(t, 1, fresh, "round %d: exactly one submission proceeds", rounds)
		}
		t.Logf("%s: %d rounds × %d submissions: %d fresh, %d duplicate (replayed), %d in flight, %d other",
			s.Dialect().Name(), rounds, raceGoroutines, totals[store.IdempotencyFresh], totals[store.IdempotencyDuplicate],
			totals[store.IdempotencyInFlight], totals[store.IdempotencyKeyReused]+totals[store.IdempotencyRetryLater])
		require.Equal(t, rounds, count(t, s.DB(), "SELECT COUNT(*) FROM idempotency_record WHERE state = 'DONE'"), "one record per key")
	})
}
