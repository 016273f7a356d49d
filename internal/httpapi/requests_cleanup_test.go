package httpapi

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

func TestIdempotencyCleanup(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		ctx := t.Context()
		begin := func(key string, ttl time.Duration) {
			t.Helper()
			if _, err := st.IdempotencyBegin(ctx, store.IdempotencyBeginParams{Key: key, Subject: "alice", RequestHash: "h", OperationID: key, TTL: ttl, Lease: time.Hour}); err != nil {
				t.Fatal(err)
			}
		}
		const expired = cleanupChunk + 7 // more than one chunk
		for i := range expired {
			begin(fmt.Sprintf("old-%d", i), time.Millisecond)
		}
		begin("live", time.Hour)

		w := newBizWorld(t, st, withOverlay(map[string]any{"idempotency.cleanupInterval": "20ms"}))
		c := NewIdempotencyCleanup(st, w.cfg, nil)
		runs := make(chan int, 100)
		c.onRun = func(n int, err error) {
			if err == nil {
				runs <- n
			}
		}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		_ = c.Start(ctx) // a second Start does nothing
		deleted := 0
		deadline := time.After(10 * time.Second)
		for deleted < expired {
			select {
			case n := <-runs:
				deleted += n
			case <-deadline:
				t.Fatalf("deleted %d of %d", deleted, expired)
			}
		}
		c.Stop()
		c.Stop() // safe twice
		if deleted != expired {
			t.Fatalf("deleted %d, want %d", deleted, expired)
		}
		// The live record still answers.
		res, err := st.IdempotencyBegin(ctx, store.IdempotencyBeginParams{Key: "live", Subject: "alice", RequestHash: "h", OperationID: "live", TTL: time.Hour, Lease: time.Hour})
		if err != nil || res.Outcome != store.IdempotencyInFlight {
			t.Fatalf("live record: %v %v", res.Outcome, err)
		}
	})
}

type failingExpirer struct{ calls int }

func (f *failingExpirer) IdempotencyDeleteExpired(context.Context, int) (int, error) {
	f.calls++
	return 3, errors.New("database down")
}

func TestIdempotencyCleanupFailureIsReturnedAndBounded(t *testing.T) {
	f := &failingExpirer{}
	c := NewIdempotencyCleanup(f, nil, nil)
	n, err := c.RunOnce(t.Context())
	if err == nil || n != 3 || f.calls != 1 {
		t.Fatalf("n %d err %v calls %d", n, err, f.calls)
	}
	c.Stop() // before Start: nothing to stop
}
