package ratelimit

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"changeflow/internal/config"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// instanceConfig is a configuration whose instance.* items come from the
// program overlay (id, heartbeat interval, liveAfter).
func instanceConfig(t *testing.T, id, interval, liveAfter string) *config.Manager {
	t.Helper()
	m, err := config.Load(t.Context(), config.Options{Overlay: map[string]any{
		"instance.id":                id,
		"instance.heartbeatInterval": interval,
		"instance.liveAfter":         liveAfter,
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func TestPerInstanceLimit(t *testing.T) {
	for _, c := range []struct{ limit, live, want int }{
		{10, 1, 10}, {10, 3, 4}, {9, 3, 3}, {1, 5, 1}, {10, 0, 10}, {10, -2, 10}, {0, 3, 0},
	} {
		if got := PerInstanceLimit(c.limit, c.live); got != c.want {
			t.Errorf("PerInstanceLimit(%d, %d) = %d, want %d", c.limit, c.live, got, c.want)
		}
	}
}

func TestQuotaDividesByLiveInstancesInTheDatabase(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		quotas := make([]*Quota, 3)
		for i, id := range []string{"host-a-1", "host-b-2", "host-c-3"} {
			quotas[i] = NewQuota(QuotaOptions{Store: s, Config: instanceConfig(t, id, "10s", "30s")})
			if _, err := quotas[i].Refresh(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		if got := quotas[0].Live(); got != 1 {
			t.Fatalf("first instance counted %d before the others beat, want 1", got)
		}
		n, err := quotas[0].Refresh(t.Context())
		if err != nil || n != 3 {
			t.Fatalf("Refresh = %d, %v; want 3 live", n, err)
		}
		if got := quotas[0].PerInstance(10); got != 4 {
			t.Fatalf("PerInstance(10) with 3 live = %d, want ceil(10/3) = 4", got)
		}
	})
}

// fakeInstances is an InstanceStore with scripted answers.
type fakeInstances struct {
	mu     sync.Mutex
	live   int
	err    error
	beats  int
	prunes []time.Duration
}

func (f *fakeInstances) InstanceHeartbeat(context.Context, string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.beats++
	return f.err
}

func (f *fakeInstances) InstanceCountLive(context.Context, time.Duration) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.live, f.err
}

func (f *fakeInstances) InstancePrune(_ context.Context, olderThan time.Duration) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.prunes = append(f.prunes, olderThan)
	return 0, nil
}

func (f *fakeInstances) set(live int, err error) {
	f.mu.Lock()
	f.live, f.err = live, err
	f.mu.Unlock()
}

func TestQuotaFallsBackToPerInstanceLimits(t *testing.T) {
	now := t0
	fs := &fakeInstances{live: 3}
	q := NewQuota(QuotaOptions{Store: fs, Config: instanceConfig(t, "a", "10s", "30s"), Now: func() time.Time { return now }})

	if got := q.Live(); got != 1 {
		t.Fatalf("Live before any count = %d, want 1", got)
	}
	if _, err := q.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := q.PerInstance(9); got != 3 {
		t.Fatalf("PerInstance(9) = %d, want 3", got)
	}

	t.Run("a failed round keeps the last count while it is fresh", func(t *testing.T) {
		fs.set(5, errors.New("database is down"))
		now = now.Add(20 * time.Second)
		if _, err := q.Refresh(t.Context()); err == nil {
			t.Fatal("Refresh hid the store's error")
		}
		if got := q.Live(); got != 3 {
			t.Fatalf("Live = %d, want the last count 3", got)
		}
	})
	t.Run("a count older than liveAfter falls back to 1", func(t *testing.T) {
		now = now.Add(11 * time.Second)
		if got := q.Live(); got != 1 {
			t.Fatalf("Live with a 31 s old count = %d, want 1 (per-instance limits)", got)
		}
	})
	t.Run("zero live (own beat not visible yet) counts as 1", func(t *testing.T) {
		fs.set(0, nil)
		if _, err := q.Refresh(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := q.Live(); got != 1 {
			t.Fatalf("Live = %d, want 1", got)
		}
	})
	t.Run("prunes long-dead rows once an hour", func(t *testing.T) {
		for range 3 {
			if _, err := q.Refresh(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		now = now.Add(time.Hour)
		if _, err := q.Refresh(t.Context()); err != nil {
			t.Fatal(err)
		}
		fs.mu.Lock()
		defer fs.mu.Unlock()
		if len(fs.prunes) != 2 || fs.prunes[0] != time.Hour {
			t.Fatalf("prunes = %v, want two of 1h (one at the first success, one an hour later)", fs.prunes)
		}
	})
}

func TestQuotaServiceStartsAndStopsSafely(t *testing.T) {
	fs := &fakeInstances{live: 2}
	rounds := make(chan int, 100)
	q := NewQuota(QuotaOptions{
		Store:     fs,
		Config:    instanceConfig(t, "a", "1ms", "1s"),
		OnRefresh: func(live int, err error) { rounds <- live },
	})
	q.Stop() // before Start: nothing to stop
	if err := q.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := q.Start(t.Context()); err != nil { // running: no second loop
		t.Fatal(err)
	}
	for range 3 {
		if live := <-rounds; live != 2 {
			t.Fatalf("round counted %d, want 2", live)
		}
	}
	if got := q.PerInstance(5); got != 3 {
		t.Fatalf("PerInstance(5) = %d, want 3", got)
	}
	q.Stop()
	q.Stop()
	fs.mu.Lock()
	beats := fs.beats
	fs.mu.Unlock()
	// Stop waited for the loop to exit, so the count cannot move again.
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.beats != beats {
		t.Fatalf("beats went from %d to %d after Stop", beats, fs.beats)
	}
}

func TestQuotaStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	rounds := make(chan int, 100)
	q := NewQuota(QuotaOptions{Store: &fakeInstances{live: 1}, Config: instanceConfig(t, "a", "1ms", "1s"),
		OnRefresh: func(live int, err error) { rounds <- live }})
	if err := q.Start(ctx); err != nil {
		t.Fatal(err)
	}
	<-rounds
	cancel()
	q.Stop() // returns once the loop has seen the cancellation
}
