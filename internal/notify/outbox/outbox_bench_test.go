package outbox_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/notify"
	"changeflow/internal/notify/outbox"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// counting is a channel that takes every event at once: the bench prices
// the outbox (claims, records, finishes), not a destination.
type counting struct{ n atomic.Int64 }

func (c *counting) Name() string           { return "count" }
func (c *counting) Wants(notify.Kind) bool { return true }
func (c *counting) Send(context.Context, notify.Event) error {
	c.n.Add(1)
	return nil
}

// BenchmarkOutboxThroughput drains 2,000 events of 400 requests (five
// each, delivered in order per request) with one deliverer and with three
// on the same database — the baseline and the multi-instance case in the
// same run — and reports events per second. docs/benchmarks.md has the
// numbers and the command.
func BenchmarkOutboxThroughput(b *testing.B) {
	const events, requests = 2000, 400
	for _, driver := range storetest.Drivers() {
		for _, instances := range []int{1, 3} {
			b.Run(fmt.Sprintf("%s/instances=%d", driver, instances), func(b *testing.B) {
				for range b.N {
					b.StopTimer()
					s := storetest.Open(b, driver)
					ctx := b.Context()
					evs := make([]store.OutboxNew, 0, events)
					for i := range events {
						op := fmt.Sprintf("op-%d", i%requests)
						evs = append(evs, store.OutboxNew{Kind: notify.KindRequestSubmitted, OrderKey: op,
							Data: store.OutboxData{Data: notify.Data{OperationID: op, Subject: "alice", TargetKey: "billing"}}})
					}
					require.NoError(b, s.OutboxAdd(ctx, evs...))
					ch := &counting{}
					b.StartTimer()
					start := time.Now()
					var wg sync.WaitGroup
					for i := range instances {
						d := deliverer(s, fmt.Sprintf("i%d", i), outbox.Settings{Channels: []notify.Channel{ch}, MaxAttempts: 3})
						d.Batch = 100
						wg.Go(func() {
							for ch.n.Load() < events {
								if _, err := d.Pass(ctx); err != nil {
									b.Error(err)
									return
								}
							}
						})
					}
					wg.Wait()
					took := time.Since(start)
					b.StopTimer()
					require.Equal(b, int64(events), ch.n.Load())
					b.ReportMetric(float64(events)/took.Seconds(), "events/s")
					s.Close()
				}
			})
		}
	}
}
