package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// admittedOps submits n approve-first requests at CREATE_ADMITTED /
// MR_CREATING, admitted to project 1's waiting set.
func admittedOps(t *testing.T, s *store.Store, prefix string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	storetest.AdmitWaiting(t, s, "t", "r", ids...)
	time.Sleep(3 * time.Millisecond)
	return ids
}

// TestBatchApply: the MR, links, moves and schedule commit together; a
// stale member rolls back everything, the batch row included; a second
// settlement fails at its first statement; a FAILED settlement releases
// the members and re-admits the listed ones in the same transaction.
func TestBatchApply(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		ids := admittedOps(t, s, "ba", 3)
		c, err := s.BatchClaim(ctx, store.BatchClaimParams{ProjectID: 1, MaxRequests: 10})
		require.NoError(t, err)
		require.Equal(t, store.ClaimClaimed, c.Outcome)
		states, err := s.BatchMemberStates(ctx, c.BatchID)
		require.NoError(t, err)
		require.Len(t, states, 3)
		rows := make([]store.TransitionRow, len(states))
		for i, m := range states {
			require.Equal(t, domain.BindingMRCreating, m.Binding)
			rows[i] = store.TransitionRow{OperationID: m.OperationID, Version: m.Version, BindingVersion: m.BindingVersion}
		}
		mr := &store.BatchMR{IID: 7, URL: "u", Branch: "changeflow/batch-1", SplitDepth: 1}

		stale := append([]store.TransitionRow(nil), rows...)
		stale[1].Version++
		_, err = s.BatchApply(ctx, store.BatchApplyParams{BatchID: c.BatchID, SetMR: mr, LinkMR: mr, LinkOps: ids,
			Moves: []store.TransitionManyParams{{FromStep: int(domain.StepCreateAdmitted), ToStep: int(domain.StepCreateStarted), Rows: stale}}})
		require.ErrorIs(t, err, domain.ErrPreempted)
		b, err := s.BatchGet(ctx, c.BatchID)
		require.NoError(t, err)
		require.Zero(t, b.MRIID, "rolled back with the stale member")

		_, err = s.BatchApply(ctx, store.BatchApplyParams{BatchID: c.BatchID, SetMR: mr, LinkMR: mr, LinkOps: ids,
			Moves:    []store.TransitionManyParams{{FromStep: int(domain.StepCreateAdmitted), ToStep: int(domain.StepCreateStarted), Rows: rows}},
			Schedule: &store.BatchSchedule{OperationID: ids[0], Action: "batch_poll_pipeline"}})
		require.NoError(t, err)
		b, err = s.BatchGet(ctx, c.BatchID)
		require.NoError(t, err)
		require.Equal(t, int64(7), b.MRIID)
		require.Equal(t, 1, b.SplitDepth)
		ops, err := s.BatchMemberOperations(ctx, c.BatchID)
		require.NoError(t, err)
		for _, o := range ops {
			require.Equal(t, int64(7), o.MRIID)
			require.Equal(t, c.BatchID, o.BatchID)
			require.Equal(t, int(domain.StepCreateStarted), o.Step)
		}
		require.Equal(t, "batch_poll_pipeline", ops[0].NextAction)

		settle := store.BatchApplyParams{BatchID: c.BatchID, SettleTo: domain.BatchFailed, From: domain.BatchRunning, Version: b.Version,
			FailureCode: "X", Readmit: ids[1:], ProjectID: 1, Unschedule: ids[:1]}
		released, err := s.BatchApply(ctx, settle)
		require.NoError(t, err)
		require.Len(t, released, 3)
		n, err := s.BatchWaitingCount(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, 2, n, "two re-admitted")
		o, err := s.OperationGet(ctx, ids[0])
		require.NoError(t, err)
		require.Empty(t, o.NextAction, "unscheduled")

		_, err = s.BatchApply(ctx, settle)
		require.ErrorIs(t, err, domain.ErrPreempted, "a second settlement fails at its first statement")
		n, err = s.BatchWaitingCount(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, 2, n, "and re-admits nothing twice")
	})
}

// TestBatchApplyReadmitsInChunksAndAnswersDuplicates: re-admission is one
// multi-row INSERT per 500; a chunk holding a request that already waits
// (a duplicate) is admitted row by row instead — the others are admitted,
// the waiting one keeps its row, the transaction commits — and the queue
// order is the order given.
func TestBatchApplyReadmitsInChunksAndAnswersDuplicates(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		waiting := admitWaiting(t, s, 1, "already", 1)
		ids := make([]string, 0, 1201)
		for i := range 1200 {
			ids = append(ids, fmt.Sprintf("re-%04d", i))
		}
		ids = append(ids[:700], append([]string{waiting[0]}, ids[700:]...)...)
		_, err := s.BatchApply(ctx, store.BatchApplyParams{BatchID: 1, Readmit: ids, ProjectID: 1})
		require.NoError(t, err)
		n, err := s.BatchWaitingCount(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, 1201, n)
		rows, err := s.DB().QueryContext(ctx, "SELECT operation_id FROM merge_batch_request WHERE operation_id LIKE 're-%' ORDER BY created_at, id")
		require.NoError(t, err)
		defer rows.Close()
		var got []string
		for rows.Next() {
			var id string
			require.NoError(t, rows.Scan(&id))
			got = append(got, id)
		}
		require.NoError(t, rows.Err())
		require.Len(t, got, 1200)
		for i, id := range got {
			require.Equal(t, fmt.Sprintf("re-%04d", i), id, "queue order is the order given")
		}
	})
}

// TestBatchClaimOnlyAndBatchWaiting: culprit isolation's claim of one half
// of a failed batch takes only the named requests, in queue order, whatever
// else waits; BatchWaiting says which of a list still wait, in the list's
// order; SetMR records the parent batch.
func TestBatchClaimOnlyAndBatchWaiting(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		ops := admitWaiting(t, s, 1, "w", 5)
		c, err := s.BatchClaim(ctx, store.BatchClaimParams{ProjectID: 1, MaxRequests: 2, Only: []string{ops[3], ops[1], "never-admitted"}})
		require.NoError(t, err)
		require.Equal(t, store.ClaimClaimed, c.Outcome)
		got := []string{c.Members[0].OperationID, c.Members[1].OperationID}
		require.Equal(t, []string{ops[1], ops[3]}, got, "only the named, in queue order")

		waiting, err := s.BatchWaiting(ctx, 1, []string{ops[4], ops[3], ops[0], "never-admitted"})
		require.NoError(t, err)
		require.Equal(t, []string{ops[4], ops[0]}, waiting)

		mr := &store.BatchMR{IID: 7, URL: "u", Branch: "b", SplitDepth: 2, ParentBatchID: 41}
		_, err = s.BatchApply(ctx, store.BatchApplyParams{BatchID: c.BatchID, SetMR: mr})
		require.NoError(t, err)
		b, err := s.BatchGet(ctx, c.BatchID)
		require.NoError(t, err)
		require.Equal(t, int64(41), b.ParentBatchID)
		require.Equal(t, 2, b.SplitDepth)
	})
}
