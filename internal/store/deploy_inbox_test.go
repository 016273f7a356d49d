package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// mergedOp records operationID with MR (1, iid) and, when merged, the
// step-history row changeflow's merge writes (MERGING → MERGED).
func mergedOp(t *testing.T, s *store.Store, operationID string, iid int64, merged bool) {
	t.Helper()
	ctx := t.Context()
	_, err := s.DB().ExecContext(ctx,
		"INSERT INTO operation (operation_id, subject, target_key, project_id, flow, step_status, mr_iid) VALUES (?, ?, 't', 1, 'LEGACY', 10108, ?)",
		operationID, "u-"+operationID, iid)
	require.NoError(t, err)
	status := "MERGED"
	if !merged {
		status = "REJECTED"
	}
	_, err = s.DB().ExecContext(ctx, "INSERT INTO binding (subject_id, target_key, status, operation_id) VALUES (?, 't', ?, ?)",
		"u-"+operationID, status, operationID)
	require.NoError(t, err)
	if merged {
		_, err = s.DB().ExecContext(ctx,
			"INSERT INTO operation_step (operation_id, from_step, to_step, from_binding_status, to_binding_status) VALUES (?, 10101, 10108, 'MERGING', 'MERGED')",
			operationID)
		require.NoError(t, err)
	}
}

func mustDeploy(t *testing.T, s *store.Store, key string, iid int64, status string) store.DeployCallbackInserted {
	t.Helper()
	r, err := s.DeployCallbackInsert(t.Context(), store.DeployCallbackParams{DeliveryKey: key, ProjectID: 1, MRIID: iid, Status: status})
	require.NoError(t, err)
	return r
}

// TestDeployCallbackInbox: the inbox row, its duplicates, and that the
// first classification wins over a later one but not over APPLIED.
func TestDeployCallbackInbox(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		first := mustDeploy(t, s, "dep-a", 7, "SUCCESS")
		require.True(t, first.Inserted)
		again := mustDeploy(t, s, "dep-a", 7, "SUCCESS")
		require.False(t, again.Inserted)
		require.Equal(t, first.ID, again.ID, "a duplicate names the first row")
		recs, err := s.DeployCallbackListByMR(ctx, 1, 7, 10)
		require.NoError(t, err)
		require.Len(t, recs, 1)
		require.Equal(t, store.DeployRecorded, recs[0].Disposition)
		require.Equal(t, 1, recs[0].Duplicates)
		require.Equal(t, "dep-a", recs[0].DeliveryKey)

		require.NoError(t, s.DeployCallbackClassify(ctx, first.ID, store.DeployEarly, "being merged"))
		require.NoError(t, s.DeployCallbackClassify(ctx, first.ID, store.DeployDuplicate, "late look"))
		recs, _ = s.DeployCallbackListByMR(ctx, 1, 7, 10)
		require.Equal(t, store.DeployEarly, recs[0].Disposition, "only a RECORDED row is classified")
		require.NoError(t, s.DeployCallbackMarkApplied(ctx, 1, 7, "merged"))
		recs, _ = s.DeployCallbackListByMR(ctx, 1, 7, 10)
		require.Equal(t, store.DeployApplied, recs[0].Disposition)

		noKey := mustDeploy(t, s, "", 8, "SUCCESS")
		require.NoError(t, s.DeployCallbackClassify(ctx, noKey.ID, store.DeployUnknownMR, "no request"))
		all, err := s.DeployCallbackList(ctx, store.DeployCallbackListParams{Limit: 10})
		require.NoError(t, err)
		require.Len(t, all, 2)
		require.Equal(t, noKey.ID, all[0].ID, "newest first")
		unknown, err := s.DeployCallbackList(ctx, store.DeployCallbackListParams{Limit: 10, Disposition: store.DeployUnknownMR})
		require.NoError(t, err)
		require.Len(t, unknown, 1)
		older, err := s.DeployCallbackList(ctx, store.DeployCallbackListParams{Limit: 10, BeforeID: noKey.ID})
		require.NoError(t, err)
		require.Len(t, older, 1)
		require.Equal(t, first.ID, older[0].ID)
	})
}

// TestDeployCallbacksCountOnlyForMRsChangeflowMerged: the attacks on the
// reconciliation's reads, at the store — a callback for an MR no request
// has, for a changeflow MR it never merged, one sent ahead for an iid
// changeflow reaches later, and a failed deployment: none raises the
// watermark, none is an exact match, none is "seen" by the merge step.
func TestDeployCallbacksCountOnlyForMRsChangeflowMerged(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		mergedOp(t, s, "op-5", 5, true)
		mergedOp(t, s, "op-closed", 50, false)

		mustDeploy(t, s, "forged", 99999, "SUCCESS") // {"project":1,"mrIid":99999}
		mustDeploy(t, s, "closed", 50, "SUCCESS")
		ahead := mustDeploy(t, s, "ahead", 60, "SUCCESS")
		require.NoError(t, s.DeployCallbackClassify(ctx, ahead.ID, store.DeployUnknownMR, "no request has it"))
		mustDeploy(t, s, "failed", 5, "FAILED")

		scan, err := s.ReconcileLookup(ctx, []string{"op-5"}, 0)
		require.NoError(t, err)
		require.Empty(t, scan.Watermarks, "no callback for an MR changeflow merged: no watermark, though !99999 was reported")
		require.False(t, scan.Rows[0].CalledBack, "a FAILED deployment is no exact match")

		// Changeflow now merges MR !60: the callback sent ahead never counts.
		mergedOp(t, s, "op-60", 60, true)
		scan, err = s.ReconcileLookup(ctx, []string{"op-60", "op-5"}, 0)
		require.NoError(t, err)
		require.Empty(t, scan.Watermarks)
		for _, r := range scan.Rows {
			require.False(t, r.CalledBack, r.OperationID)
		}
		seen, err := s.DeployCallbackSeen(ctx, 1, 60)
		require.NoError(t, err)
		require.False(t, seen, "a callback recorded as UNKNOWN_MR is not seen by the merge step")
		seen, err = s.DeployCallbackSeen(ctx, 1, 5)
		require.NoError(t, err)
		require.False(t, seen, "nor a FAILED one")

		// The genuine deployment of MR !5: exact match and watermark.
		mustDeploy(t, s, "real", 5, "SUCCESS")
		scan, err = s.ReconcileLookup(ctx, []string{"op-5", "op-60"}, 0)
		require.NoError(t, err)
		require.Equal(t, map[int64]int64{1: 5}, scan.Watermarks)
		for _, r := range scan.Rows {
			require.Equal(t, r.OperationID == "op-5", r.CalledBack, r.OperationID)
		}

		st, err := s.MRMergeStateGet(ctx, 1, 50)
		require.NoError(t, err)
		require.Equal(t, store.MRMergeState{Requests: 1}, st)
		st, err = s.MRMergeStateGet(ctx, 1, 5)
		require.NoError(t, err)
		require.Equal(t, store.MRMergeState{Requests: 1, Merged: 1}, st)
	})
}
