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

// BenchmarkExpiryScan measures one expiry scan — chunks of expired
// VALIDATED bindings read on idx_binding_status_expires and revoked in one
// transaction each (store.RevocationCandidatesExpired, RevocationCreate) —
// over n bindings expiring at once, on each database, half of them on a
// batching target (admitted to the waiting set), half not (create_mr
// due). Each iteration seeds the n bindings again outside the timer.
//
//	stmts/scan   SQL statements executed by the scan
//	stmts/chunk  the same per chunk: constant, whatever n — nothing is
//	             issued per binding
//	chunks/scan  ⌈n/chunk⌉ (+1 for the empty read that ends the scan)
func BenchmarkExpiryScan(b *testing.B) {
	for _, driver := range storetest.Drivers() {
		for _, c := range []struct{ n, chunk int }{{1_000, 200}, {10_000, 200}, {10_000, 500}} {
			b.Run(fmt.Sprintf("%s/n=%d/chunk=%d", driver, c.n, c.chunk), func(b *testing.B) {
				s, counter, err := store.OpenCounting(b.Context(), driver, storetest.NewDatabase(b, driver))
				require.NoError(b, err)
				b.Cleanup(func() { _ = s.Close() })
				_, err = s.Migrate(b.Context())
				require.NoError(b, err)
				var stmts, chunks int64
				b.ResetTimer()
				for i := range b.N {
					b.StopTimer()
					seedValidatedExpired(b, s, fmt.Sprintf("r%d", i), c.n)
					b.StartTimer()
					s0, _, _ := counter.Snapshot()
					var (
						cursor  store.ExpiredCursor
						revoked int
					)
					for {
						cands, next, err := s.RevocationCandidatesExpired(b.Context(), cursor, c.chunk)
						require.NoError(b, err)
						chunks++
						if len(cands) == 0 {
							break
						}
						rows := make([]store.RevocationRow, len(cands))
						for j, cd := range cands {
							rows[j] = store.RevocationRow{RevocationCandidate: cd, Batching: strings.HasPrefix(cd.TargetKey, "batched")}
						}
						created, err := s.RevocationCreate(b.Context(), store.RevocationCreateParams{
							Reason: domain.RevokeExpired, Actor: "bench", SingleAction: "create_mr", Rows: rows,
						})
						require.NoError(b, err)
						revoked += len(created)
						cursor = next
					}
					s1, _, _ := counter.Snapshot()
					stmts += s1 - s0
					require.Equal(b, c.n, revoked)
				}
				b.ReportMetric(float64(stmts)/float64(b.N), "stmts/scan")
				b.ReportMetric(float64(chunks)/float64(b.N), "chunks/scan")
				b.ReportMetric(float64(stmts)/float64(chunks), "stmts/chunk")
			})
		}
	}
}

// seedValidatedExpired inserts n grants with VALIDATED bindings that
// expired an hour ago (database clock), half on a batching target, in
// multi-row statements.
func seedValidatedExpired(b *testing.B, s *store.Store, prefix string, n int) {
	b.Helper()
	past, arg := s.Dialect().NowMinus(time.Hour)
	for start := 0; start < n; start += 500 {
		end := min(start+500, n)
		var ops, binds []string
		var oa, ba []any
		for i := start; i < end; i++ {
			id := fmt.Sprintf("%s-%06d", prefix, i)
			target := "single"
			if i%2 == 0 {
				target = "batched"
			}
			ops = append(ops, "(?, ?, ?, 1, 'APPROVE_FIRST', 10301)")
			oa = append(oa, id, "u-"+id, target)
			binds = append(binds, "(?, ?, 'VALIDATED', ?, "+past+")")
			ba = append(ba, "u-"+id, target, id, arg)
		}
		mustExec(b, s.DB(), "INSERT INTO operation (operation_id, subject, target_key, project_id, flow, step_status) VALUES "+strings.Join(ops, ", "), oa...)
		mustExec(b, s.DB(), "INSERT INTO binding (subject_id, target_key, status, operation_id, expires_at) VALUES "+strings.Join(binds, ", "), ba...)
	}
}
