package store_test

import (
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

// mustValidated arranges n VALIDATED grants of target, "<prefix>-<i>" for
// subject "<prefix>-s<i>", expiring at expiresAt.
func mustValidated(t *testing.T, s *store.Store, prefix, target string, n int, expiresAt time.Time) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprintf("%s-%d", prefix, i)
		subject := fmt.Sprintf("%s-s%d", prefix, i)
		mustSubmit(t, s, ids[i], subject, target, domain.BindingMRCreating)
		mustSetBinding(t, s, subject, target, domain.BindingValidated, expiresAt)
	}
	return ids
}

// scanAll is one expiry scan over the store: chunks of size, every row
// revoked for EXPIRED, batching as given.
func scanAll(t *testing.T, s *store.Store, size int, batching bool) ([]store.RevocationCreated, int, error) {
	var (
		out    []store.RevocationCreated
		cursor store.ExpiredCursor
		chunks int
	)
	for {
		cands, next, err := s.RevocationCandidatesExpired(t.Context(), cursor, size)
		if err != nil || len(cands) == 0 {
			return out, chunks, err
		}
		chunks++
		rows := make([]store.RevocationRow, len(cands))
		for i, c := range cands {
			rows[i] = store.RevocationRow{RevocationCandidate: c, Batching: batching}
		}
		created, err := s.RevocationCreate(t.Context(), store.RevocationCreateParams{
			Reason: domain.RevokeExpired, Text: "expired", Actor: "scan", SingleAction: "create_mr", Rows: rows,
		})
		out = append(out, created...)
		if err != nil {
			return out, chunks, err
		}
		cursor = next
	}
}

func TestRevocationCreateMovesTheBindingAndStartsTheRemoval(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		past := time.Now().Add(-time.Hour)
		expired := mustValidated(t, s, "old", "t-single", 3, past)
		mustValidated(t, s, "live", "t-single", 2, time.Now().Add(time.Hour))
		batched := mustValidated(t, s, "bat", "t-batch", 2, past)
		// Not VALIDATED: an expired row still being granted is not revoked.
		mustSubmit(t, s, "merging", "m-s0", "t-single", domain.BindingMRCreating)
		mustSetBinding(t, s, "m-s0", "t-single", domain.BindingMerged, past)

		var rows []store.RevocationRow
		var cursor store.ExpiredCursor
		for {
			cands, next, err := s.RevocationCandidatesExpired(t.Context(), cursor, 2)
			require.NoError(t, err)
			if len(cands) == 0 {
				break
			}
			require.LessOrEqual(t, len(cands), 2, "chunk size")
			for _, c := range cands {
				rows = append(rows, store.RevocationRow{RevocationCandidate: c, Batching: c.TargetKey == "t-batch"})
			}
			cursor = next
		}
		require.Len(t, rows, 5, "the expired VALIDATED bindings, nothing else")

		created, err := s.RevocationCreate(t.Context(), store.RevocationCreateParams{
			Reason: domain.RevokeExpired, Text: "expired", Actor: "scan", SingleAction: "create_mr", Rows: rows,
		})
		require.NoError(t, err)
		require.Len(t, created, 5)

		for i, id := range expired {
			rev := domain.RevocationID(id)
			b := mustBinding(t, s, fmt.Sprintf("old-s%d", i), "t-single")
			require.Equal(t, domain.BindingRevoking, b.Status)
			require.Equal(t, rev, b.OperationID, "the binding points at the revocation: the grant's late callbacks are stale")
			op := mustOperation(t, s, rev)
			require.Equal(t, domain.OperationRevoke, op.Kind)
			require.Equal(t, id, op.GrantOperationID)
			require.Equal(t, domain.RevokeExpired, op.RevokeReason)
			require.Equal(t, int(domain.StepRevokeStarted), op.Step)
			require.Equal(t, "create_mr", op.NextAction)
			require.False(t, op.DueAt.IsZero(), "the removal is due")
			require.Equal(t, "APPROVE_FIRST", op.Flow, "no approval is asked to lose access")
			grant := mustOperation(t, s, id)
			require.Equal(t, domain.OperationGrant, grant.Kind)
		}
		for _, id := range batched {
			op := mustOperation(t, s, domain.RevocationID(id))
			require.Equal(t, int(domain.StepCreateAdmitted), op.Step)
			require.Empty(t, op.NextAction, "a batch round claims it")
			require.Equal(t, 1, count(t, s.DB(), "SELECT COUNT(*) FROM merge_batch_request WHERE operation_id = ?", op.OperationID))
			require.Equal(t, 2, count(t, s.DB(), "SELECT COUNT(*) FROM operation_step WHERE operation_id = ?", op.OperationID))
		}
		require.Equal(t, 2, count(t, s.DB(), "SELECT COUNT(*) FROM binding WHERE status = ?", string(domain.BindingValidated)), "live grants stay")

		again, chunks, err := scanAll(t, s, 2, false)
		require.NoError(t, err)
		require.Empty(t, again, "nothing is revoked twice")
		require.Zero(t, chunks)
	})
}

// TestRevocationCreateRacingCreatorsCreateEachOnce: three scans of the
// same expired bindings at once (each its own chunks, as three instances
// would) and two owners' give-backs of the same rows create each
// revocation exactly once.
func TestRevocationCreateRacingCreatorsCreateEachOnce(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		const n = 60
		ids := mustValidated(t, s, "g", "t-race", n, time.Now().Add(-time.Minute))
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			created = map[string]int{}
		)
		record := func(cs []store.RevocationCreated) {
			mu.Lock()
			defer mu.Unlock()
			for _, c := range cs {
				created[c.OperationID]++
			}
		}
		for i := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cs, _, err := scanAll(t, s, 7+i*5, i == 1)
				if !assertNoErrorOrPreempted(t, err) {
					return
				}
				record(cs)
			}()
		}
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, id := range ids[:10] {
					c, st, err := s.RevocationCandidateOf(t.Context(), id)
					if err != nil || st != domain.BindingValidated {
						continue // revoked meanwhile: the binding has moved on
					}
					cs, err := s.RevocationCreate(t.Context(), store.RevocationCreateParams{
						Reason: domain.RevokeGivenBack, Actor: "owner", SingleAction: "create_mr",
						Rows: []store.RevocationRow{{RevocationCandidate: c}},
					})
					if !assertNoErrorOrPreempted(t, err) {
						return
					}
					record(cs)
				}
			}()
		}
		wg.Wait()
		require.Len(t, created, n, "every grant revoked")
		for id, k := range created {
			require.Equal(t, 1, k, "%s created %d times", id, k)
		}
		require.Equal(t, n, count(t, s.DB(), "SELECT COUNT(*) FROM operation WHERE kind = 'REVOKE'"))
		require.Equal(t, n, count(t, s.DB(), "SELECT COUNT(*) FROM binding WHERE status = ?", string(domain.BindingRevoking)))
		require.Equal(t, n, count(t, s.DB(), "SELECT COUNT(*) FROM operation_step WHERE to_step = ?", int(domain.StepRevokeStarted)))
		require.Zero(t, count(t, s.DB(),
			"SELECT COUNT(*) FROM binding b WHERE NOT EXISTS (SELECT 1 FROM operation o WHERE o.operation_id = b.operation_id)"),
			"no binding points at a revocation that does not exist")
	})
}

// assertNoErrorOrPreempted accepts nil and a lost race (the chunk's rows
// changed between its read and its write: the next scan reads again).
func assertNoErrorOrPreempted(t *testing.T, err error) bool {
	t.Helper()
	if err == nil || isPreempted(err) {
		return true
	}
	t.Errorf("unexpected error: %v", err)
	return false
}

func isPreempted(err error) bool { return errors.Is(err, domain.ErrPreempted) }

func TestRevocationCreateRefusesWhatIsNotARevocation(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		_, err := s.RevocationCreate(t.Context(), store.RevocationCreateParams{Reason: "BORED", SingleAction: "create_mr"})
		require.Error(t, err)
		// A binding that is no longer VALIDATED at the version read is left alone.
		ids := mustValidated(t, s, "x", "t-x", 1, time.Now().Add(-time.Minute))
		c, _, err := s.RevocationCandidateOf(t.Context(), ids[0])
		require.NoError(t, err)
		mustSetBinding(t, s, "x-s0", "t-x", domain.BindingValidated, time.Now().Add(-time.Minute)) // version+1
		created, err := s.RevocationCreate(t.Context(), store.RevocationCreateParams{
			Reason: domain.RevokeOperator, SingleAction: "create_mr", Rows: []store.RevocationRow{{RevocationCandidate: c}},
		})
		require.NoError(t, err)
		require.Empty(t, created)
		require.Equal(t, domain.BindingValidated, mustBinding(t, s, "x-s0", "t-x").Status)
		require.Zero(t, count(t, s.DB(), "SELECT COUNT(*) FROM operation WHERE kind = 'REVOKE'"))
		// The CHECK constraint refuses an unknown kind.
		require.Error(t, exec(t, s.DB(), "UPDATE operation SET kind = 'RENEW' WHERE operation_id = ?", ids[0]))
	})
}
