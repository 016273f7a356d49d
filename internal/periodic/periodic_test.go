package periodic

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestServiceLifecycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var runs atomic.Int32
		loop := func(ctx context.Context) { runs.Add(1); <-ctx.Done() }
		var s Service
		s.Stop() // before Start: nothing to wait for, and it can still start
		s.Start(t.Context(), loop)
		s.Start(t.Context(), loop) // running: no second loop
		synctest.Wait()
		if n := runs.Load(); n != 1 {
			t.Fatalf("%d loops started, want 1", n)
		}
		s.Stop()
		s.Stop() // twice
		s.Start(t.Context(), loop)
		synctest.Wait()
		if n := runs.Load(); n != 1 {
			t.Fatalf("a Start after Stop ran a loop (%d)", n)
		}
	})
}

// TestServiceStopWaitsForThePass: Stop returns only once the loop has
// returned, so a shutdown never cuts a pass in two.
func TestServiceStopWaitsForThePass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var finished atomic.Bool
		var s Service
		s.Start(t.Context(), func(ctx context.Context) {
			<-ctx.Done()
			time.Sleep(time.Second) // the pass in progress finishing
			finished.Store(true)
		})
		synctest.Wait()
		s.Stop()
		if !finished.Load() {
			t.Fatal("Stop returned before the loop did")
		}
	})
}

func TestEvery(t *testing.T) {
	for _, c := range []struct {
		name     string
		every    Every
		after    time.Duration
		wantRuns int32
	}{
		{"first pass after one interval", Every{Fallback: time.Minute}, 59 * time.Second, 0},
		{"one pass per interval", Every{Fallback: time.Minute}, 3*time.Minute + time.Second, 3},
		{"Now runs at once", Every{Fallback: time.Minute, Now: true}, time.Second, 1},
		{"the interval read each time", Every{Interval: func() time.Duration { return 10 * time.Second }, Fallback: time.Minute}, 31 * time.Second, 3},
		{"an interval ≤ 0 falls back", Every{Interval: func() time.Duration { return 0 }, Fallback: time.Minute}, 61 * time.Second, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var runs atomic.Int32
				e := c.every
				e.Pass = func(context.Context) { runs.Add(1) }
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan struct{})
				go func() { defer close(done); e.Loop(ctx) }()
				time.Sleep(c.after)
				synctest.Wait()
				cancel()
				<-done
				if n := runs.Load(); n != c.wantRuns {
					t.Fatalf("%d passes after %s, want %d", n, c.after, c.wantRuns)
				}
			})
		})
	}
}

// TestEverySlowPassDelaysTheNext: the wait starts when a pass returns, so
// passes never overlap.
func TestEverySlowPassDelaysTheNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var runs, running, overlapped atomic.Int32
		e := Every{Fallback: time.Minute, Pass: func(context.Context) {
			if running.Add(1) > 1 {
				overlapped.Add(1)
			}
			runs.Add(1)
			time.Sleep(2 * time.Minute)
			running.Add(-1)
		}}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); e.Loop(ctx) }()
		time.Sleep(7*time.Minute + time.Second) // passes start at 1, 4, 7 min
		synctest.Wait()
		cancel()
		<-done
		if n := runs.Load(); n != 3 || overlapped.Load() != 0 {
			t.Fatalf("%d passes (%d overlapping), want 3 and none", n, overlapped.Load())
		}
	})
}
