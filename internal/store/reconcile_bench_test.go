package store_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// BenchmarkReconcileScan measures one reconciliation scan
// (store.ReconcileScanWindow: the window on idx_binding_status_updated,
// the IN lookups in chunks of store.InChunkSize, the watermark query) over
// 100,000 MERGED bindings in the window across 10 projects, with 10,000
// more outside it, on each database. The flips are not included: each is
// one BindingMarkValidated transaction, as for a deploy callback.
//
//	stmts/scan  SQL statements executed (1 window + ⌈n/500⌉ lookups + 1 watermark)
func BenchmarkReconcileScan(b *testing.B) {
	const inWindow, outside, projects = 100_000, 10_000, 10
	for _, driver := range storetest.Drivers() {
		b.Run(driver, func(b *testing.B) {
			s, counter, err := store.OpenCounting(b.Context(), driver, storetest.NewDatabase(b, driver))
			require.NoError(b, err)
			b.Cleanup(func() { _ = s.Close() })
			_, err = s.Migrate(b.Context())
			require.NoError(b, err)
			seedMerged(b, s, "in", inWindow, projects, 10*time.Minute)
			seedMerged(b, s, "old", outside, projects, 48*time.Hour)
			for p := range projects {
				_, err := s.DeployCallbackInsert(b.Context(), store.DeployCallbackParams{ProjectID: int64(p + 1), MRIID: inWindow / 2, Status: "SUCCESS"})
				require.NoError(b, err)
			}
			var stmts int64
			b.ResetTimer()
			for range b.N {
				s0, _, _ := counter.Snapshot()
				scan, err := s.ReconcileScanWindow(b.Context(), store.ReconcileScanParams{MinAge: time.Minute, MaxAge: 24 * time.Hour})
				s1, _, _ := counter.Snapshot()
				stmts += s1 - s0
				require.NoError(b, err)
				require.Len(b, scan.Rows, inWindow)
			}
			b.ReportMetric(float64(stmts)/float64(b.N), "stmts/scan")
		})
	}
}

// seedMerged inserts n operations with MERGED bindings last changed ago,
// spread over projects, in multi-row statements.
func seedMerged(b *testing.B, s *store.Store, prefix string, n, projects int, ago time.Duration) {
	b.Helper()
	past, arg := s.Dialect().NowMinus(ago)
	for start := 0; start < n; start += 1000 {
		end := min(start+1000, n)
		var ops, binds []string
		var oa, ba []any
		for i := start; i < end; i++ {
			id := fmt.Sprintf("%s-%06d", prefix, i)
			ops = append(ops, "(?, ?, 't', ?, 'LEGACY', 10108, ?)")
			oa = append(oa, id, "u-"+id, i%projects+1, i/projects+1)
			binds = append(binds, "(?, 't', 'MERGED', ?, "+past+")")
			ba = append(ba, "u-"+id, id, arg)
		}
		mustExec(b, s.DB(), "INSERT INTO operation (operation_id, subject, target_key, project_id, flow, step_status, mr_iid) VALUES "+strings.Join(ops, ", "), oa...)
		mustExec(b, s.DB(), "INSERT INTO binding (subject_id, target_key, status, operation_id, updated_at) VALUES "+strings.Join(binds, ", "), ba...)
	}
}
