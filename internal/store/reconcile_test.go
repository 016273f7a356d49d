package store_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// mergedAgo submits operationID with its binding MERGED, its MR
// (project, iid), and its binding last changed ago by the DB clock.
func mergedAgo(t *testing.T, s *store.Store, operationID string, project, iid int64, ago time.Duration) {
	t.Helper()
	mustSubmit(t, s, operationID, "u-"+operationID, "t-rec", domain.BindingMerged)
	mustExec(t, s.DB(), "UPDATE operation SET project_id = ?, mr_iid = ? WHERE operation_id = ?", project, iid, operationID)
	past, arg := s.Dialect().NowMinus(ago)
	mustExec(t, s.DB(), "UPDATE binding SET updated_at = "+past+" WHERE operation_id = ?", arg, operationID)
}

// TestReconcileScan: the window by the DB clock (open at both ends), the
// lookup in IN chunks, the exact-match flag (SUCCESS only) and the
// per-project watermark (SUCCESS only).
func TestReconcileScan(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		_, err := s.ReconcileWindow(ctx, time.Hour, time.Minute)
		require.Error(t, err, "minAge ≥ maxAge is no window")

		for i := range 5 {
			mergedAgo(t, s, fmt.Sprintf("in-%d", i), int64(1+i%2), int64(10+i), 10*time.Minute)
		}
		mergedAgo(t, s, "young", 1, 1, 5*time.Second)
		mergedAgo(t, s, "old", 1, 2, 3*time.Hour)
		mustSubmit(t, s, "not-merged", "u-nm", "t-rec", domain.BindingMerging)
		// MRs changeflow merged long ago (outside the window) whose
		// deployments set the watermarks below: a callback counts only for
		// an MR changeflow merged.
		mergedAgo(t, s, "earlier-30", 1, 30, 3*time.Hour)
		mergedAgo(t, s, "earlier-8", 2, 8, 3*time.Hour)
		for _, cb := range []store.DeployCallbackParams{
			{ProjectID: 1, MRIID: 10, Status: "SUCCESS"}, // exact for in-0
			{ProjectID: 2, MRIID: 11, Status: "FAILED"},  // not evidence for in-1
			{ProjectID: 2, MRIID: 8, Status: "SUCCESS"},
			{ProjectID: 1, MRIID: 30, Status: "SUCCESS"},
			{ProjectID: 1, MRIID: 40, Status: "FAILED"},
		} {
			_, err := s.DeployCallbackInsert(ctx, cb)
			require.NoError(t, err)
		}

		ids, err := s.ReconcileWindow(ctx, time.Minute, time.Hour)
		require.NoError(t, err)
		slices.Sort(ids)
		require.Equal(t, []string{"in-0", "in-1", "in-2", "in-3", "in-4"}, ids)

		scan, err := s.ReconcileLookup(ctx, append(ids, "no-such-op"), 2)
		require.NoError(t, err)
		require.Len(t, scan.Rows, 5)
		got := map[string]store.ReconcileRow{}
		for _, r := range scan.Rows {
			got[r.OperationID] = r
		}
		require.Equal(t, store.ReconcileRow{OperationID: "in-0", ProjectID: 1, MRIID: 10, CalledBack: true}, got["in-0"])
		require.Equal(t, store.ReconcileRow{OperationID: "in-1", ProjectID: 2, MRIID: 11}, got["in-1"])
		require.Equal(t, map[int64]int64{1: 30, 2: 8}, scan.Watermarks)

		all, err := s.ReconcileScanWindow(ctx, store.ReconcileScanParams{MinAge: time.Minute, MaxAge: time.Hour})
		require.NoError(t, err)
		require.Len(t, all.Rows, 5)
		require.Equal(t, scan.Watermarks, all.Watermarks)

		exactOnly, err := s.ReconcileScanWindow(ctx, store.ReconcileScanParams{MinAge: time.Minute, MaxAge: time.Hour, NoWatermarks: true})
		require.NoError(t, err)
		require.ElementsMatch(t, all.Rows, exactOnly.Rows, "the rows and their exact matches are the same")
		require.Empty(t, exactOnly.Watermarks, "inference off: no watermark query")

		empty, err := s.ReconcileScanWindow(ctx, store.ReconcileScanParams{MinAge: 4 * time.Hour, MaxAge: 5 * time.Hour})
		require.NoError(t, err)
		require.Empty(t, empty.Rows)
	})
}
