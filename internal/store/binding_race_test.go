package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// TestRaceReapplicationsKeepOneRowPerRelationship: 32 goroutines apply for
// two relationships over and over. Every successful application is
// rejected at once by its own request, so the row keeps becoming
// re-appliable and the next applications race for it.
//
// Afterwards, per relationship: exactly one binding row; every successful
// application — and only those — in binding_history and in the operation
// table (a refused submission leaves no operation); no two successes reset
// the same (status, version); and the version counts every write.
func TestRaceReapplicationsKeepOneRowPerRelationship(t *testing.T) {
	t.Parallel()
	targets := []string{"payments-db-readonly", "billing-dashboard"}
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		type success struct {
			operationID string
			prev        store.Binding // zero for the first application
		}
		var (
			mu                       sync.Mutex
			successes                = map[string][]success{}
			refused, preempted, busy int
			refusedCodes             = map[domain.Code]int{}
			firstRefused             int
			firstWinners             = map[string]int{}
			firstWinnerOperation     = map[string]string{}
		)
		submit := func(ctx context.Context, opID, target string) (store.OperationSubmitResult, error) {
			return s.OperationSubmit(ctx, store.OperationSubmitParams{
				Operation: approveFirstParams(opID, "alice", target), BindingStatus: domain.BindingApprovalSending,
			})
		}
		// The request's own rejection: only the owner moves an in-flight
		// binding, so this must never be preempted.
		reject := func(ctx context.Context, op store.Operation, b store.Binding) error {
			_, err := s.Transition(ctx, store.TransitionParams{
				OperationID: op.OperationID, FromStep: int(domain.StepCreateApprovalSubmitting), ToStep: int(domain.StepCloseRejected), Version: op.Version,
				Binding: &store.BindingMove{From: domain.BindingApprovalSending, To: domain.BindingRejected, Version: b.Version},
			})
			return err
		}
		// tally counts an expected losing answer; false for anything else.
		tally := func(err error) bool {
			mu.Lock()
			defer mu.Unlock()
			var r *store.BindingRefusedError
			switch {
			case errors.As(err, &r):
				refused++
				refusedCodes[r.Code()]++
			case errors.Is(err, domain.ErrPreempted):
				preempted++
			case errors.Is(err, domain.ErrBusy):
				busy++
			default:
				return false
			}
			return true
		}

		// Phase 1: 32 concurrent first applications per relationship.
		for _, target := range targets {
			runAtOnce(func(g int) {
				res, err := submit(t.Context(), fmt.Sprintf("first-%s-%d", target, g), target)
				mu.Lock()
				defer mu.Unlock()
				var r *store.BindingRefusedError
				switch {
				case err == nil:
					firstWinners[target]++
					firstWinnerOperation[target] = res.Operation.OperationID
					successes[target] = append(successes[target], success{operationID: res.Operation.OperationID})
				case errors.As(err, &r) && r.Code() == domain.CodeRequestInProgress:
					firstRefused++
				default:
					t.Errorf("first application: %v", err)
				}
			})
			require.Equal(t, 1, firstWinners[target], "exactly one first application wins")
			winner := mustOperation(t, s, firstWinnerOperation[target])
			require.NoError(t, reject(t.Context(), winner, mustBinding(t, s, "alice", target)))
		}
		require.Equal(t, len(targets)*(raceGoroutines-1), firstRefused, "every loser is told the request is in progress")

		// Phase 2: re-applications racing for the same rows.
		runRace(t, func(ctx context.Context, g, i int) error {
			target := targets[g%len(targets)]
			res, err := submit(ctx, fmt.Sprintf("g%d-i%d-%s", g, i, target), target)
			if err != nil {
				if tally(err) {
					return nil
				}
				return err
			}
			mu.Lock()
			successes[target] = append(successes[target], success{res.Operation.OperationID, res.Application.Previous})
			mu.Unlock()
			return reject(ctx, res.Operation, res.Application.Binding)
		})

		total := 0
		for _, target := range targets {
			got := successes[target]
			total += len(got)
			b := mustBinding(t, s, "alice", target)
			require.Equal(t, 1, count(t, s.DB(), "SELECT COUNT(*) FROM binding WHERE subject_id = ? AND target_key = ?", "alice", target),
				"one row per relationship")
			require.Equal(t, domain.BindingRejected, b.Status)
			require.Equal(t, int64(2*len(got)), b.Version, "each application and each rejection is one version")

			hist, err := s.BindingHistoryList(t.Context(), "alice", target)
			require.NoError(t, err)
			require.Len(t, hist, len(got), "every successful application is in the history, and only those")
			want := map[string]bool{}
			for _, sc := range got {
				want[sc.operationID] = true
			}
			for _, h := range hist {
				require.True(t, want[h.OperationID], "history names a successful application: %s", h.OperationID)
			}
			require.Equal(t, len(got), count(t, s.DB(), "SELECT COUNT(*) FROM operation WHERE target_key = ?", target),
				"a refused submission leaves no operation")

			type pin struct {
				status  domain.BindingStatus
				version int64
			}
			seen := map[pin]string{}
			for _, sc := range got[1:] {
				p := pin{sc.prev.Status, sc.prev.Version}
				require.Equal(t, domain.BindingRejected, p.status)
				require.Empty(t, seen[p], "two successful resets of %v: %s and %s", p, seen[p], sc.operationID)
				seen[p] = sc.operationID
			}
		}
		t.Logf("%s: %d successful applications over %d relationships (first phase: 1 winner + %d refused each); then %d refused %v, %d preempted after retries, %d busy",
			s.Dialect().Name(), total, len(targets), raceGoroutines-1, refused, refusedCodes, preempted, busy)
		require.Greater(t, total, len(targets), "re-applications succeeded")
		require.Positive(t, refused, "re-applications did contend")
		require.Equal(t, refused, refusedCodes[domain.CodeRequestInProgress], "a contended row is always in flight, never in effect")
		// Every write is pinned to its key and takes its locks in the order
		// operation → binding, so nothing deadlocks (MariaDB planning the
		// reset on the status index once produced ~1,200 deadlocks here).
		require.Zero(t, busy, "no deadlock, no lock wait timeout")
	})
}
