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

// BenchmarkBatchStart measures the database side of a batch round with n
// members (docs/benchmarks.md): the claim, the two member reads
// (BatchMemberOperations, BatchMemberStates) and the one BatchApply that
// records the MR, links every member to it, moves every member
// CREATE_ADMITTED → CREATE_STARTED → CREATE_MR_CREATED and schedules the
// driver — statements counted at the driver boundary, as BenchmarkClaim.
// Run with -benchtime=1x for 1,000 (the setup submits n requests).
func BenchmarkBatchStart(b *testing.B) {
	for _, driver := range storetest.Drivers() {
		b.Run(driver, func(b *testing.B) {
			s, counter, err := store.OpenCounting(b.Context(), driver, storetest.NewDatabase(b, driver))
			require.NoError(b, err)
			b.Cleanup(func() { _ = s.Close() })
			_, err = s.Migrate(b.Context())
			require.NoError(b, err)
			round := 0
			for _, n := range []int{10, 100, 1000} {
				b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
					ctx := b.Context()
					var stmts, txs int64
					for range b.N {
						b.StopTimer()
						round++
						members := make([]string, n)
						for i := range members {
							members[i] = fmt.Sprintf("bs-%d-%d", round, i)
						}
						storetest.AdmitWaiting(b, s, "t", "bench", members...)
						time.Sleep(2 * time.Millisecond) // claimable: created before the claim's "now"
						s0, _, t0 := counter.Snapshot()
						b.StartTimer()

						c, err := s.BatchClaim(ctx, store.BatchClaimParams{ProjectID: 1, MaxRequests: n})
						require.NoError(b, err)
						require.Equal(b, store.ClaimClaimed, c.Outcome)
						ops, err := s.BatchMemberOperations(ctx, c.BatchID)
						require.NoError(b, err)
						states, err := s.BatchMemberStates(ctx, c.BatchID)
						require.NoError(b, err)
						ids := make([]string, len(ops))
						rows := make([]store.TransitionRow, len(states))
						next := make([]store.TransitionRow, len(states))
						for i, o := range ops {
							ids[i] = o.OperationID
						}
						for i, m := range states {
							rows[i] = store.TransitionRow{OperationID: m.OperationID, Version: m.Version, BindingVersion: m.BindingVersion}
							next[i] = store.TransitionRow{OperationID: m.OperationID, Version: m.Version + 1, BindingVersion: m.BindingVersion}
						}
						mr := &store.BatchMR{IID: int64(round), URL: "u", Branch: "changeflow/batch"}
						_, err = s.BatchApply(ctx, store.BatchApplyParams{
							BatchID: c.BatchID, SetMR: mr, LinkMR: mr, LinkOps: ids,
							Moves: []store.TransitionManyParams{
								{FromStep: int(domain.StepCreateAdmitted), ToStep: int(domain.StepCreateStarted), Rows: rows},
								{FromStep: int(domain.StepCreateStarted), ToStep: int(domain.StepCreateMRCreated), Rows: next},
							},
							Schedule: &store.BatchSchedule{OperationID: ids[0], Action: "batch_poll_pipeline"},
						})
						require.NoError(b, err)

						b.StopTimer()
						s1, _, t1 := counter.Snapshot()
						stmts, txs = stmts+s1-s0, txs+t1-t0
						mustSucceed(b, s, c.BatchID)
						b.StartTimer()
					}
					b.ReportMetric(float64(stmts)/float64(b.N), "stmts/round")
					b.ReportMetric(float64(txs)/float64(b.N), "tx/round")
				})
			}
		})
	}
}
