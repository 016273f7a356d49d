package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
)

// admitWaiting admits n requests named prefix-0 … prefix-(n-1) into
// project, created a second ago on the database clock so a claim takes
// them at once (no sleeping past the clock's precision). Large n goes in
// multi-row INSERTs; BatchAdmit itself is tested on its own.
func admitWaiting(t testing.TB, s *store.Store, project int64, prefix string, n int) []string {
	t.Helper()
	ops := make([]string, n)
	for i := range ops {
		ops[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	past, arg := s.Dialect().NowMinus(time.Second)
	for start := 0; start < n; start += store.InChunkSize {
		part := ops[start:min(start+store.InChunkSize, n)]
		q := "INSERT INTO merge_batch_request (operation_id, project_id, created_at) VALUES "
		a := make([]any, 0, 3*len(part))
		for i, op := range part {
			if i > 0 {
				q += ", "
			}
			q += "(?, ?, " + past + ")"
			a = append(a, op, project, arg)
		}
		mustExec(t, s.DB(), q, a...)
	}
	return ops
}

// backdateWaiting moves every waiting request of project one second into
// the past, so that requests admitted by BatchAdmit are claimable now.
func backdateWaiting(t testing.TB, s *store.Store, project int64) {
	t.Helper()
	past, arg := s.Dialect().NowMinus(time.Second)
	mustExec(t, s.DB(), "UPDATE merge_batch_request SET created_at = "+past+
		" WHERE project_id = ? AND batch_id IS NULL", arg, project)
}

// mustClaim runs a claim round that must claim.
func mustClaim(t testing.TB, s *store.Store, project int64, maxRequests int) store.Claim {
	t.Helper()
	c, err := s.BatchClaim(t.Context(), store.BatchClaimParams{ProjectID: project, MaxRequests: maxRequests})
	require.NoError(t, err)
	require.Equal(t, store.ClaimClaimed, c.Outcome, "claim of project %d", project)
	require.NotZero(t, c.BatchID)
	require.NotEmpty(t, c.Members)
	return c
}

// mustBatch reads a batch.
func mustBatch(t testing.TB, s *store.Store, id int64) store.Batch {
	t.Helper()
	b, err := s.BatchGet(t.Context(), id)
	require.NoError(t, err)
	return b
}

// mustSucceed settles a RUNNING batch at version 1 as SUCCEEDED the way
// the product does (BatchApply), freeing its project's slot.
func mustSucceed(t testing.TB, s *store.Store, batchID int64) {
	t.Helper()
	_, err := s.BatchApply(t.Context(), store.BatchApplyParams{
		BatchID: batchID, SettleTo: domain.BatchSucceeded, From: domain.BatchRunning, Version: 1,
	})
	require.NoError(t, err)
}

// memberOpIDs returns the members' operationIds in order.
func memberOpIDs(members []store.BatchMember) []string {
	out := make([]string, len(members))
	for i, m := range members {
		out[i] = m.OperationID
	}
	return out
}

// activeBatches counts the project's RUNNING and BLOCKED batches by status
// (not through the slot column, so the check does not trust what it checks).
func activeBatches(t testing.TB, s *store.Store, project int64) int {
	t.Helper()
	return count(t, s.DB(), "SELECT COUNT(*) FROM merge_batch WHERE project_id = ? AND status IN (?, ?)",
		project, domain.BatchRunning, domain.BatchBlocked)
}
