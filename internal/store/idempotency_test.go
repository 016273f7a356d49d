package store_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// idemParams returns a request under key by alice with body hash "h1",
// whose lease outlasts any test (lapse ends it).
func idemParams(key, operationID string) store.IdempotencyBeginParams {
	return store.IdempotencyBeginParams{Key: key, Subject: "alice", RequestHash: "h1", OperationID: operationID, TTL: time.Hour, Lease: time.Hour}
}

func TestIdempotencyBegin(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		begin := func(t *testing.T, p store.IdempotencyBeginParams) store.IdempotencyResult {
			t.Helper()
			res, err := s.IdempotencyBegin(ctx, p)
			require.NoError(t, err)
			return res
		}
		t.Run("a new key is fresh", func(t *testing.T) {
			res := begin(t, idemParams("k-fresh", "op-1"))
			require.Equal(t, store.IdempotencyFresh, res.Outcome)
			require.Equal(t, "op-1", res.OperationID)
			require.Equal(t, domain.CodeAccepted, res.Outcome.Code())
		})
		t.Run("the same request while the first is in flight", func(t *testing.T) {
			begin(t, idemParams("k-flight", "op-1"))
			res := begin(t, idemParams("k-flight", "op-2"))
			require.Equal(t, store.IdempotencyInFlight, res.Outcome)
			require.Equal(t, "op-1", res.OperationID, "the winner's operationId")
			require.Equal(t, domain.CodeIdempotencyInFlight, res.Outcome.Code())
		})
		t.Run("the same request after completion replays the stored response", func(t *testing.T) {
			begin(t, idemParams("k-done", "op-1"))
			body := []byte(`{"code":"ACCEPTED","data":{"operationId":"op-1"}}`)
			require.NoError(t, s.IdempotencyComplete(ctx, store.IdempotencyCompleteParams{Subject: "alice", Key: "k-done", OperationID: "op-1", Status: 202, Body: body}))
			res := begin(t, idemParams("k-done", "op-2"))
			require.Equal(t, store.IdempotencyResult{
				Outcome: store.IdempotencyDuplicate, OperationID: "op-1", ResponseStatus: 202, ResponseBody: body,
			}, res)
			require.Equal(t, domain.CodeDuplicateSubmit, res.Outcome.Code())
		})
		t.Run("the same key with another body is reused", func(t *testing.T) {
			begin(t, idemParams("k-body", "op-1"))
			p := idemParams("k-body", "op-2")
			p.RequestHash = "h2"
			res := begin(t, p)
			require.Equal(t, store.IdempotencyKeyReused, res.Outcome)
			require.Equal(t, domain.CodeIdempotencyReused, res.Outcome.Code())
		})
		t.Run("the same key from another subject is a fresh key for them", func(t *testing.T) {
			begin(t, idemParams("k-subject", "op-1"))
			p := idemParams("k-subject", "op-2")
			p.Subject = "bob"
			p.RequestHash = "h-bob"
			res := begin(t, p)
			require.Equal(t, store.IdempotencyResult{Outcome: store.IdempotencyFresh, OperationID: "op-2"}, res,
				"exactly what an unused key answers")
			// Each caller's record answers for their own key only.
			require.Equal(t, store.IdempotencyInFlight, begin(t, idemParams("k-subject", "op-3")).Outcome)
			require.Equal(t, "op-1", begin(t, idemParams("k-subject", "op-3")).OperationID)
			require.Equal(t, "op-2", begin(t, p).OperationID)
		})
		t.Run("an expired record frees its key", func(t *testing.T) {
			begin(t, idemParams("k-expired", "op-1"))
			expire(t, s, "k-expired")
			res := begin(t, idemParams("k-expired", "op-2"))
			require.Equal(t, store.IdempotencyFresh, res.Outcome)
			require.Equal(t, 1, count(t, s.DB(), "SELECT COUNT(*) FROM idempotency_record WHERE idem_key = ?", "k-expired"))
		})
		t.Run("a winner gone before the re-read means retry later", func(t *testing.T) {
			// The loser's look-up finds nothing; a concurrent request
			// inserts before the loser does and releases before the
			// loser re-reads.
			p := store.IdempotencyBeginHooks(idemParams("k-vanished", "op-loser"), func() {
				require.Equal(t, store.IdempotencyFresh, begin(t, idemParams("k-vanished", "op-winner")).Outcome)
			}, func() {
				released, err := s.IdempotencyRelease(ctx, "alice", "k-vanished", "op-winner")
				require.NoError(t, err)
				require.True(t, released)
			})
			res := begin(t, p)
			require.Equal(t, store.IdempotencyResult{Outcome: store.IdempotencyRetryLater}, res)
			require.Equal(t, domain.CodeRetryLater, res.Outcome.Code())
		})
		t.Run("a winner that inserted first is re-read", func(t *testing.T) {
			p := store.IdempotencyBeginHooks(idemParams("k-raced", "op-loser"), func() {
				begin(t, idemParams("k-raced", "op-winner"))
			}, nil)
			res := begin(t, p)
			require.Equal(t, store.IdempotencyInFlight, res.Outcome)
			require.Equal(t, "op-winner", res.OperationID)
		})
		for _, tt := range []struct {
			name   string
			mutate func(*store.IdempotencyBeginParams)
		}{
			{"an empty key is refused", func(p *store.IdempotencyBeginParams) { p.Key = "" }},
			{"a key longer than its column is refused", func(p *store.IdempotencyBeginParams) { p.Key = strings.Repeat("k", 129) }},
			{"a TTL of zero is refused", func(p *store.IdempotencyBeginParams) { p.TTL = 0 }},
			{"a lease of zero is refused", func(p *store.IdempotencyBeginParams) { p.Lease = 0 }},
		} {
			t.Run(tt.name, func(t *testing.T) {
				p := idemParams("k-invalid", "op-1")
				tt.mutate(&p)
				_, err := s.IdempotencyBegin(ctx, p)
				require.Error(t, err)
			})
		}
	})
}

// expire moves a record's expiry into the past.
func expire(t testing.TB, s *store.Store, key string) {
	t.Helper()
	expr, arg := s.Dialect().NowMinus(time.Second)
	require.Equal(t, int64(1), mustExec(t, s.DB(), "UPDATE idempotency_record SET expires_at = "+expr+" WHERE idem_key = ?", arg, key))
}

func TestIdempotencyCompleteIsGuarded(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		_, err := s.IdempotencyBegin(ctx, idemParams("k", "op-1"))
		require.NoError(t, err)
		complete := func(op string, status int) error {
			return s.IdempotencyComplete(ctx, store.IdempotencyCompleteParams{Subject: "alice", Key: "k", OperationID: op, Status: status, Body: []byte("{}")})
		}
		require.ErrorIs(t, complete("op-other", 202), domain.ErrPreempted, "only the winner completes")
		require.NoError(t, complete("op-1", 202))
		require.ErrorIs(t, complete("op-1", 500), domain.ErrPreempted, "a stored response is never overwritten")
		res, err := s.IdempotencyBegin(ctx, idemParams("k", "op-2"))
		require.NoError(t, err)
		require.Equal(t, 202, res.ResponseStatus)
	})
}

func TestIdempotencyRelease(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		_, err := s.IdempotencyBegin(ctx, idemParams("k-release", "op-1"))
		require.NoError(t, err)

		released, err := s.IdempotencyRelease(ctx, "alice", "k-release", "op-other")
		require.NoError(t, err)
		require.False(t, released, "only the owner releases")
		released, err = s.IdempotencyRelease(ctx, "alice", "k-release", "op-1")
		require.NoError(t, err)
		require.True(t, released)

		res, err := s.IdempotencyBegin(ctx, idemParams("k-release", "op-2"))
		require.NoError(t, err)
		require.Equal(t, store.IdempotencyFresh, res.Outcome, "a retry proceeds afresh")

		require.NoError(t, s.IdempotencyComplete(ctx, store.IdempotencyCompleteParams{Subject: "alice", Key: "k-release", OperationID: "op-2", Status: 202}))
		released, err = s.IdempotencyRelease(ctx, "alice", "k-release", "op-2")
		require.NoError(t, err)
		require.False(t, released, "a completed record is never released")
	})
}

func TestIdempotencyDeleteExpired(t *testing.T) {
	t.Parallel()
	const expired, live = 2*store.InChunkSize + 7, 3
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		past, pastArg := s.Dialect().NowMinus(time.Minute)
		future, futureArg := s.Dialect().NowAdd(time.Hour)
		for start := 0; start < expired; start += store.InChunkSize {
			n := min(store.InChunkSize, expired-start)
			vals := make([]any, 0, 4*n)
			for i := start; i < start+n; i++ {
				vals = append(vals, fmt.Sprintf("old-%d", i), "alice", "h", pastArg)
			}
			mustExec(t, s.DB(), "INSERT INTO idempotency_record (idem_key, subject, request_hash, operation_id, expires_at) VALUES "+
				strings.TrimSuffix(strings.Repeat("(?, ?, ?, 'op', "+past+"), ", n), ", "), vals...)
		}
		for i := range live {
			mustExec(t, s.DB(), "INSERT INTO idempotency_record (idem_key, subject, request_hash, operation_id, expires_at) VALUES (?, 'alice', 'h', 'op', "+future+")",
				fmt.Sprintf("live-%d", i), futureArg)
		}

		for _, step := range []struct{ limit, want int }{{0, 0}, {700, 700}, {700, expired - 700}, {700, 0}} {
			n, err := s.IdempotencyDeleteExpired(ctx, step.limit)
			require.NoError(t, err)
			require.Equal(t, step.want, n, "limit %d", step.limit)
		}
		require.Equal(t, live, count(t, s.DB(), "SELECT COUNT(*) FROM idempotency_record"), "live records stay")
	})
}
