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

// lapse ends the lease of alice's record of key by the DB clock, as if the
// request that took it had died a while ago.
func lapse(t testing.TB, s *store.Store, key string) {
	t.Helper()
	expr, arg := s.Dialect().NowMinus(time.Second)
	require.Equal(t, int64(1), mustExec(t, s.DB(),
		"UPDATE idempotency_record SET lease_until = "+expr+" WHERE subject = 'alice' AND idem_key = ?", arg, key))
}

// TestIdempotencyLease: a request that took a key and died before storing
// its operation (kill -9 between IdempotencyBegin and OperationSubmit)
// does not hold the key until it expires (issue 12, item 4).
func TestIdempotencyLease(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		begin := func(t *testing.T, p store.IdempotencyBeginParams) store.IdempotencyResult {
			t.Helper()
			res, err := s.IdempotencyBegin(ctx, p)
			require.NoError(t, err)
			return res
		}
		t.Run("inside the lease the key is in flight", func(t *testing.T) {
			begin(t, idemParams("k-live", "op-live"))
			require.Equal(t, store.IdempotencyResult{Outcome: store.IdempotencyInFlight, OperationID: "op-live"},
				begin(t, idemParams("k-live", "op-retry")))
		})
		t.Run("a lapsed key whose request stored nothing is taken over under the same operationId", func(t *testing.T) {
			begin(t, idemParams("k-died", "op-died"))
			lapse(t, s, "k-died")
			res := begin(t, idemParams("k-died", "op-retry"))
			require.Equal(t, store.IdempotencyResult{Outcome: store.IdempotencyFresh, OperationID: "op-died", TakenOver: true}, res)
			// The taker holds a fresh lease: the next retry waits for it.
			require.Equal(t, store.IdempotencyInFlight, begin(t, idemParams("k-died", "op-third")).Outcome)
			// The taker stores the request and its response as any winner.
			mustSubmit(t, s, "op-died", "alice", "billing-dashboard", domain.BindingMRCreating)
			require.NoError(t, s.IdempotencyComplete(ctx, store.IdempotencyCompleteParams{
				Subject: "alice", Key: "k-died", OperationID: "op-died", Status: 202, Body: []byte(`{"operationId":"op-died"}`)}))
			got := begin(t, idemParams("k-died", "op-fourth"))
			require.Equal(t, store.IdempotencyDuplicate, got.Outcome)
			require.Equal(t, "op-died", got.OperationID)
			require.Equal(t, 1, count(t, s.DB(), "SELECT COUNT(*) FROM operation WHERE operation_id IN ('op-died', 'op-retry', 'op-third', 'op-fourth')"))
		})
		t.Run("a lapsed key whose request stored its operation is a replay of it", func(t *testing.T) {
			p := idemParams("k-stored", "op-stored")
			p.RequestHash = "hash-op-stored" // what opParams stores as the operation's request hash
			begin(t, p)
			mustSubmit(t, s, "op-stored", "alice", "prod-console", domain.BindingMRCreating)
			lapse(t, s, "k-stored")
			retry := p
			retry.OperationID = "op-retry"
			require.Equal(t, store.IdempotencyResult{Outcome: store.IdempotencyDuplicate, OperationID: "op-stored", Recovered: true},
				begin(t, retry))
		})
		t.Run("a lapsed key with another body is still reused", func(t *testing.T) {
			begin(t, idemParams("k-other", "op-other"))
			lapse(t, s, "k-other")
			p := idemParams("k-other", "op-2")
			p.RequestHash = "h2"
			require.Equal(t, store.IdempotencyKeyReused, begin(t, p).Outcome)
		})
		t.Run("a completed key is never taken over", func(t *testing.T) {
			begin(t, idemParams("k-done", "op-done"))
			require.NoError(t, s.IdempotencyComplete(ctx, store.IdempotencyCompleteParams{
				Subject: "alice", Key: "k-done", OperationID: "op-done", Status: 202, Body: []byte(`{}`)}))
			lapse(t, s, "k-done")
			res := begin(t, idemParams("k-done", "op-2"))
			require.Equal(t, store.IdempotencyDuplicate, res.Outcome)
			require.False(t, res.Recovered)
			require.Equal(t, 202, res.ResponseStatus)
		})
		t.Run("of two takers the second sees the first's lease", func(t *testing.T) {
			begin(t, idemParams("k-two", "op-two"))
			lapse(t, s, "k-two")
			var first store.IdempotencyResult
			p := store.IdempotencyTakeOverHook(idemParams("k-two", "op-loser"), func() {
				first = begin(t, idemParams("k-two", "op-winner"))
			})
			second := begin(t, p)
			require.Equal(t, store.IdempotencyResult{Outcome: store.IdempotencyFresh, OperationID: "op-two", TakenOver: true}, first)
			require.Equal(t, store.IdempotencyResult{Outcome: store.IdempotencyInFlight, OperationID: "op-two"}, second)
		})
		t.Run("a key the first request completed meanwhile is replayed to the taker", func(t *testing.T) {
			begin(t, idemParams("k-slow", "op-slow"))
			lapse(t, s, "k-slow")
			p := store.IdempotencyTakeOverHook(idemParams("k-slow", "op-retry"), func() {
				// The first request was slow, not dead, and finishes now.
				require.NoError(t, s.IdempotencyComplete(ctx, store.IdempotencyCompleteParams{
					Subject: "alice", Key: "k-slow", OperationID: "op-slow", Status: 202, Body: []byte(`{"operationId":"op-slow"}`)}))
			})
			res := begin(t, p)
			require.Equal(t, store.IdempotencyDuplicate, res.Outcome)
			require.Equal(t, "op-slow", res.OperationID)
			require.Equal(t, []byte(`{"operationId":"op-slow"}`), res.ResponseBody)
		})
		t.Run("rows from before leases count as lapsed", func(t *testing.T) {
			begin(t, idemParams("k-legacy", "op-legacy"))
			mustExec(t, s.DB(), "UPDATE idempotency_record SET lease_until = NULL WHERE idem_key = 'k-legacy'")
			require.True(t, begin(t, idemParams("k-legacy", "op-2")).TakenOver)
		})
	})
}

// TestRaceLapsedKeyHasExactlyOneTaker: round after round, a key whose
// request died is retried by 32 goroutines at the same instant. Exactly
// one takes it over; every other answer is InFlight naming the same
// operationId — none proceeds with a second request.
func TestRaceLapsedKeyHasExactlyOneTaker(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		rounds := 0
		for deadline := time.Now().Add(raceDuration); time.Now().Before(deadline); rounds++ {
			key := fmt.Sprintf("lapsed-%d", rounds)
			dead := fmt.Sprintf("op-dead-%d", rounds)
			_, err := s.IdempotencyBegin(ctx, idemParams(key, dead))
			require.NoError(t, err)
			lapse(t, s, key)
			var (
				mu      sync.Mutex
				results = make([]store.IdempotencyResult, raceGoroutines)
				errs    []error
			)
			runAtOnce(func(g int) {
				res, err := s.IdempotencyBegin(ctx, idemParams(key, fmt.Sprintf("op-%d-%d", rounds, g)))
				mu.Lock()
				defer mu.Unlock()
				results[g] = res
				if err != nil {
					errs = append(errs, err)
				}
			})
			require.Empty(t, errs, "round %d", rounds)
			takers := 0
			for g, res := range results {
				require.Equal(t, dead, res.OperationID, "round %d, goroutine %d: every answer names the dead request's operation", rounds, g)
				switch res.Outcome {
				case store.IdempotencyFresh:
					require.True(t, res.TakenOver)
					takers++
				case store.IdempotencyInFlight:
				default:
					t.Fatalf("round %d, goroutine %d: unexpected %v", rounds, g, res.Outcome)
				}
			}
			require.Equal(t, 1, takers, "round %d: exactly one retry takes the key over", rounds)
		}
		t.Logf("%s: %d rounds × %d retries of a lapsed key, one taker each", s.Dialect().Name(), rounds, raceGoroutines)
	})
}

// TestIdempotencyKeysAreScopedPerCaller: bob probing the key alice used
// gets exactly what an unused key gives, and neither caller's completion
// or release touches the other's record (issue 13, finding 9).
func TestIdempotencyKeysAreScopedPerCaller(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		alice := idemParams("shared", "op-alice")
		_, err := s.IdempotencyBegin(ctx, alice)
		require.NoError(t, err)
		require.NoError(t, s.IdempotencyComplete(ctx, store.IdempotencyCompleteParams{
			Subject: "alice", Key: "shared", OperationID: "op-alice", Status: 202, Body: []byte(`{"operationId":"op-alice"}`)}))

		probe := func(subject, key, hash string) store.IdempotencyResult {
			res, err := s.IdempotencyBegin(ctx, store.IdempotencyBeginParams{Key: key, Subject: subject, RequestHash: hash,
				OperationID: "op-" + subject + "-" + key, TTL: time.Hour, Lease: time.Hour})
			require.NoError(t, err)
			return res
		}
		used := probe("bob", "shared", "h-bob")
		unused := probe("bob", "never-used", "h-bob")
		require.Equal(t, store.IdempotencyFresh, used.Outcome)
		require.Equal(t, unused.Outcome, used.Outcome, "alice's key answers bob as an unused one does")
		require.Equal(t, "op-bob-shared", used.OperationID, "bob's own operationId, nothing of alice's")

		// bob's release and completion are his own.
		released, err := s.IdempotencyRelease(ctx, "bob", "shared", "op-alice")
		require.NoError(t, err)
		require.False(t, released)
		require.ErrorIs(t, s.IdempotencyComplete(ctx, store.IdempotencyCompleteParams{
			Subject: "bob", Key: "shared", OperationID: "op-alice", Status: 500}), domain.ErrPreempted)
		released, err = s.IdempotencyRelease(ctx, "bob", "shared", "op-bob-shared")
		require.NoError(t, err)
		require.True(t, released)
		res, err := s.IdempotencyBegin(ctx, alice)
		require.NoError(t, err)
		require.Equal(t, store.IdempotencyDuplicate, res.Outcome, "alice's record is untouched")
		require.Equal(t, []byte(`{"operationId":"op-alice"}`), res.ResponseBody)
	})
}
