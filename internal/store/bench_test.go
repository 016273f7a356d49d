package store_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// BenchmarkClaim measures one claim round (pre-check + claim transaction)
// of 10 … 5,000 waiting requests, all claimed into one batch, on each
// database. The store runs over a counting driver connector
// (store.OpenCounting), so the statements per claim are counted where they
// leave database/sql for the driver — no call site can forget one:
//
//	stmts/claim     SQL statements executed (pre-check, session lock wait
//	                set + restore on MariaDB, slot INSERT, read, UPDATE and
//	                history INSERT per chunk of store.InChunkSize)
//	prepares/claim  server-side prepares (MariaDB without interpolateParams
//	                prepares every statement that has arguments)
//	tx/claim        transactions begun
//
// Setup (admitting the waiting set) and teardown (settling the batch) run
// with the timer stopped and are not counted. docs/benchmarks.md has the
// numbers and the command.
func BenchmarkClaim(b *testing.B) {
	for _, driver := range storetest.Drivers() {
		b.Run(driver, func(b *testing.B) {
			s, counter, err := store.OpenCounting(b.Context(), driver, storetest.NewDatabase(b, driver))
			require.NoError(b, err)
			b.Cleanup(func() { _ = s.Close() })
			_, err = s.Migrate(b.Context())
			require.NoError(b, err)

			for _, n := range []int{10, 100, 1000, 5000} {
				b.Run(fmt.Sprintf("waiting=%d", n), func(b *testing.B) {
					ctx := b.Context()
					var stmts, prepares, txs int64
					for range b.N {
						b.StopTimer()
						mustExec(b, s.DB(), "DELETE FROM merge_batch_history")
						mustExec(b, s.DB(), "DELETE FROM merge_batch_request")
						admitWaiting(b, s, 1, "op", n)
						s0, p0, t0 := counter.Snapshot()
						b.StartTimer()

						c, err := s.BatchClaim(ctx, store.BatchClaimParams{ProjectID: 1, MaxRequests: n})

						b.StopTimer()
						s1, p1, t1 := counter.Snapshot()
						stmts, prepares, txs = stmts+s1-s0, prepares+p1-p0, txs+t1-t0
						require.NoError(b, err)
						require.Equal(b, store.ClaimClaimed, c.Outcome)
						require.Len(b, c.Members, n)
						mustSucceed(b, s, c.BatchID)
						b.StartTimer()
					}
					b.ReportMetric(float64(stmts)/float64(b.N), "stmts/claim")
					b.ReportMetric(float64(prepares)/float64(b.N), "prepares/claim")
					b.ReportMetric(float64(txs)/float64(b.N), "tx/claim")
				})
			}
		})
	}
}
