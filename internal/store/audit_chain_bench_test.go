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

// BenchmarkAuditChain measures chaining n records that are not chained
// yet (half step history, half audit log, a minute old) in chunks of
// store.InChunkSize, then reading all of them back as an export does
// (AuditChainRange, then pages of 500 by seq), and a pass that finds
// nothing new — what every instance pays every audit.chainInterval.
// Statements counted at the driver (store.OpenCounting). docs/benchmarks.md
// has the numbers and the command.
func BenchmarkAuditChain(b *testing.B) {
	for _, driver := range storetest.Drivers() {
		b.Run(driver, func(b *testing.B) {
			for _, n := range []int{1000, 10000} {
				b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
					for range b.N {
						benchAuditChainOnce(b, driver, n)
					}
				})
			}
		})
	}
}

func benchAuditChainOnce(b *testing.B, driver string, n int) {
	b.StopTimer()
	ctx := b.Context()
	s, counter, err := store.OpenCounting(ctx, driver, storetest.NewDatabase(b, driver))
	require.NoError(b, err)
	defer s.Close()
	_, err = s.Migrate(ctx)
	require.NoError(b, err)
	at, arg := s.Dialect().NowMinus(time.Minute)
	for start := 0; start < n/2; start += 500 {
		rows := min(500, n/2-start)
		var steps, audits []string
		var sargs, aargs []any
		for i := range rows {
			k := start + i
			steps = append(steps, "(?, ?, 'MR_CREATED', 'bot', 'a note of some length for the step', "+at+")")
			sargs = append(sargs, fmt.Sprintf("op-%d", k/5), 10000+k%5, arg)
			audits = append(audits, "(?, 'olivia', 'ops-request-get', ?, '{\"limit\":\"50\"}', 'OK', "+at+")")
			aargs = append(aargs, fmt.Sprintf("k-%d", k), fmt.Sprintf("op-%d", k), arg)
		}
		mustExec(b, s.DB(), "INSERT INTO operation_step (operation_id, to_step, to_binding_status, actor, note, created_at) VALUES "+strings.Join(steps, ", "), sargs...)
		mustExec(b, s.DB(), "INSERT INTO audit_log (audit_key, actor, action, resource, params, outcome, created_at) VALUES "+strings.Join(audits, ", "), aargs...)
	}
	p := store.AuditChainParams{Grace: 5 * time.Second, Lookback: 15 * time.Minute, Limit: store.InChunkSize}
	before, _, _ := counter.Snapshot()
	b.StartTimer()
	start := time.Now()
	total := 0
	for {
		k, err := s.AuditChainAppend(ctx, p)
		require.NoError(b, err)
		if k == 0 {
			break
		}
		total += k
	}
	chainTime := time.Since(start)
	afterChain, _, _ := counter.Snapshot()
	chainStmts := afterChain - before
	require.Equal(b, n, total)

	start = time.Now()
	first, last, err := s.AuditChainRange(ctx, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	require.NoError(b, err)
	read := 0
	for next := first; next <= last; {
		page, err := s.AuditChainPage(ctx, next, last, 500)
		require.NoError(b, err)
		read += len(page)
		next = page[len(page)-1].Seq + 1
	}
	readTime := time.Since(start)
	require.Equal(b, n, read)

	idle, _, _ := counter.Snapshot()
	start = time.Now()
	k, err := s.AuditChainAppend(ctx, p)
	require.NoError(b, err)
	require.Zero(b, k)
	idleTime := time.Since(start)
	b.StopTimer()
	b.ReportMetric(chainTime.Seconds(), "chain-s")
	b.ReportMetric(float64(chainStmts), "chain-stmts")
	b.ReportMetric(readTime.Seconds(), "read-s")
	b.ReportMetric(float64(idleTime.Microseconds())/1000, "idle-pass-ms")
	afterIdle, _, _ := counter.Snapshot()
	b.ReportMetric(float64(afterIdle-idle), "idle-stmts")
}
