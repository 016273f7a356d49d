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

// BenchmarkOutboxCost prices the outbox in a request's transaction: the
// deploy callback's confirmation of a grant (BindingMarkValidated: lock,
// flip, step history, access history and the request.in_effect event, one
// transaction) against the outbox's part of it alone (the read of the
// request's facts and the event's INSERT, in a transaction of its own),
// in the same run on the same database. Statements are counted at the
// driver (store.OpenCounting). docs/benchmarks.md has the numbers and the
// command.
func BenchmarkOutboxCost(b *testing.B) {
	for _, driver := range storetest.Drivers() {
		b.Run(driver, func(b *testing.B) {
			ctx := b.Context()
			s, counter, err := store.OpenCounting(ctx, driver, storetest.NewDatabase(b, driver))
			require.NoError(b, err)
			defer s.Close()
			_, err = s.Migrate(ctx)
			require.NoError(b, err)
			n := max(b.N, 1)
			ids := make([]string, n)
			for i := range ids {
				ids[i] = fmt.Sprintf("oc-%d", i)
				mustSubmit(b, s, ids[i], fmt.Sprintf("u-%d", i), "oc-t", domain.BindingMerged)
				require.Equal(b, int64(1), mustExec(b, s.DB(), "UPDATE operation SET step_status = ? WHERE operation_id = ?", int(domain.StepHandleMerged), ids[i]))
			}
			b.ResetTimer()
			s0, _, _ := counter.Snapshot()
			start := time.Now()
			for _, id := range ids {
				flip, err := s.BindingMarkValidated(ctx, store.BindingMarkValidatedParams{
					OperationID: id, CalledBackStep: int(domain.StepCalledBack), Actor: "bench", Note: "in effect"})
				require.NoError(b, err)
				require.NotNil(b, flip)
			}
			whole := time.Since(start)
			s1, _, _ := counter.Snapshot()
			start = time.Now()
			for _, id := range ids {
				require.NoError(b, s.OutboxOfStepsAlone(ctx, id, domain.StepHandleMerged, domain.StepCalledBack, domain.BindingMerged, domain.BindingValidated))
			}
			part := time.Since(start)
			s2, _, _ := counter.Snapshot()
			b.StopTimer()
			b.ReportMetric(float64(whole.Microseconds())/float64(n)/1000, "confirm-ms")
			b.ReportMetric(float64(s1-s0)/float64(n), "confirm-stmts")
			b.ReportMetric(float64(part.Microseconds())/float64(n)/1000, "outbox-ms")
			// BEGIN and COMMIT are not statements (StmtCount counts them as
			// transactions): these are the outbox's own.
			b.ReportMetric(float64(s2-s1)/float64(n), "outbox-stmts")
			b.ReportMetric(float64(part)/float64(whole), "outbox/confirm")
		})
	}
}
