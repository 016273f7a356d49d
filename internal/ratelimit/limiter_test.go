package ratelimit

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// t0 is an arbitrary, millisecond-aligned start for injected clocks.
var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func mustAllow(t *testing.T, l *Limiter, key string, limit int, window time.Duration, now time.Time) {
	t.Helper()
	if ok, ra := l.Allow(key, limit, window, now); !ok {
		t.Fatalf("Allow(%q) at %v refused (retry after %v), want admitted", key, now.Sub(t0), ra)
	}
}

func mustRefuse(t *testing.T, l *Limiter, key string, limit int, window time.Duration, now time.Time, wantRetry time.Duration) {
	t.Helper()
	ok, ra := l.Allow(key, limit, window, now)
	if ok {
		t.Fatalf("Allow(%q) at %v admitted, want refused", key, now.Sub(t0))
	}
	if ra != wantRetry {
		t.Fatalf("Allow(%q) at %v: retryAfter = %v, want %v", key, now.Sub(t0), ra, wantRetry)
	}
}

func TestConcurrentCallersOfOneKeyGetExactlyLimit(t *testing.T) {
	const (
		limit      = 25
		goroutines = 64
		perG       = 20
		windows    = 3
	)
	l := New()
	for w := range windows {
		now := at(time.Duration(w) * time.Minute)
		var admitted atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range goroutines {
			wg.Go(func() {
				<-start
				for range perG {
					if ok, _ := l.Allow("apply:alice", limit, time.Minute, now); ok {
						admitted.Add(1)
					}
				}
			})
		}
		close(start)
		wg.Wait()
		if got := admitted.Load(); got != limit {
			t.Fatalf("window %d: %d of %d calls admitted, want exactly %d", w, got, goroutines*perG, limit)
		}
	}
}

func TestWindowSlides(t *testing.T) {
	const limit, window = 3, 10 * time.Second
	l := New()
	mustAllow(t, l, "k", limit, window, at(0))
	mustAllow(t, l, "k", limit, window, at(2*time.Second))
	mustAllow(t, l, "k", limit, window, at(4*time.Second))

	t.Run("full window refuses until the oldest entry leaves", func(t *testing.T) {
		mustRefuse(t, l, "k", limit, window, at(5*time.Second), 5*time.Second)
		mustRefuse(t, l, "k", limit, window, at(10*time.Second-time.Millisecond), time.Millisecond)
	})
	t.Run("an entry leaves exactly one window after it was logged", func(t *testing.T) {
		mustAllow(t, l, "k", limit, window, at(10*time.Second))
		mustRefuse(t, l, "k", limit, window, at(10*time.Second), 2*time.Second)
	})
	t.Run("refused calls are not logged", func(t *testing.T) {
		// Entries now: 2s, 4s, 10s. Refusals above did not add any, so the
		// 2s entry alone decides the next admission.
		mustAllow(t, l, "k", limit, window, at(12*time.Second))
		mustRefuse(t, l, "k", limit, window, at(13*time.Second), time.Second)
	})
	t.Run("other keys are independent", func(t *testing.T) {
		mustAllow(t, l, "k2", limit, window, at(13*time.Second))
	})
}

func TestLimitChangesApplyToTheExistingLog(t *testing.T) {
	l := New()
	for i := range 5 {
		mustAllow(t, l, "k", 5, time.Minute, at(time.Duration(i)*time.Second))
	}
	// Lowered to 2: entries at 0..4s are live, so the 4th oldest (3s) must
	// leave before a 3rd entry fits under the new limit.
	mustRefuse(t, l, "k", 2, time.Minute, at(10*time.Second), 53*time.Second)
	mustAllow(t, l, "k", 2, time.Minute, at(64*time.Second))
	// Raised: the ring grows past its old size.
	for i := range 20 {
		mustAllow(t, l, "k", 100, time.Minute, at(65*time.Second+time.Duration(i)*time.Millisecond))
	}
}

func TestNoLimitWhenLimitOrWindowIsNotPositive(t *testing.T) {
	l := New()
	for range 100 {
		mustAllow(t, l, "k", 0, time.Minute, t0)
		mustAllow(t, l, "k", -5, time.Minute, t0)
		mustAllow(t, l, "k", 1, 0, t0)
	}
	if n := l.Len(); n != 0 {
		t.Fatalf("unlimited calls created %d buckets, want 0", n)
	}
}

func TestClockGoingBackwardsKeepsTheLogSorted(t *testing.T) {
	l := New()
	mustAllow(t, l, "k", 2, 10*time.Second, at(5*time.Second))
	// A caller that read the clock a little earlier counts at 5s.
	mustAllow(t, l, "k", 2, 10*time.Second, at(4*time.Second))
	mustRefuse(t, l, "k", 2, 10*time.Second, at(6*time.Second), 9*time.Second)
	mustAllow(t, l, "k", 2, 10*time.Second, at(15*time.Second))
}

func TestLongWindowsAndOffsetRebase(t *testing.T) {
	l := New()
	window := 20 * 24 * time.Hour
	mustAllow(t, l, "k", 2, window, at(0))
	mustAllow(t, l, "k", 2, window, at(19*24*time.Hour))
	mustRefuse(t, l, "k", 2, window, at(19*24*time.Hour+time.Hour), 23*time.Hour)
	// A bucket that never empties outlives its 32-bit millisecond offsets
	// (49.7 days from its base): it rebases rather than wrapping.
	day := 24 * time.Hour
	for d := 20; d <= 60; d += 10 {
		mustAllow(t, l, "k", 3, window, at(time.Duration(d)*day))
	}
	// Live now: 50 and 60 days (40 left at exactly 60).
	mustAllow(t, l, "k", 3, window, at(61*day))
	mustRefuse(t, l, "k", 3, window, at(62*day), 8*day)
	mustAllow(t, l, "k", 3, window, at(70*day))
	// Windows past MaxWindow are clamped, not rejected.
	mustAllow(t, l, "long", 1, 100*24*time.Hour, at(0))
	mustRefuse(t, l, "long", 1, 100*24*time.Hour, at(time.Hour), MaxWindow-time.Hour)
}

func TestIdleBucketsAreReclaimedOnAccess(t *testing.T) {
	l := New()
	const keys = 10_000
	for i := range keys {
		mustAllow(t, l, fmt.Sprintf("k%d", i), 5, time.Second, t0)
	}
	if n := l.Len(); n != keys {
		t.Fatalf("Len = %d, want %d", n, keys)
	}
	// A second wave of new keys after the window reclaims the old ones as
	// it goes (sweepPerCall per call), without any Sweep.
	for i := range keys {
		mustAllow(t, l, fmt.Sprintf("new%d", i), 5, time.Second, at(2*time.Second))
	}
	if n := l.Len(); n > keys+keys/10 {
		t.Fatalf("Len = %d after a second wave of %d keys: dead buckets are not reclaimed on access", n, keys)
	}
	if n := l.Sweep(at(2 * time.Second)); n > keys/10 {
		t.Fatalf("Sweep removed %d, want the few left over", n)
	}
	if n := l.Len(); n != keys {
		t.Fatalf("Len = %d, want %d live", n, keys)
	}
}

// TestMillionCallersLeaveNoFootprint is the rate limiter's memory test: a
// million distinct callers, the window passes, a few keys stay active and
// a sweep runs — the limiter returns to (nearly) its empty size.
func TestMillionCallersLeaveNoFootprint(t *testing.T) {
	callers := 1_000_000
	if testing.Short() {
		callers = 100_000
	}
	const window = time.Minute
	l := New()
	base := heapInuse()

	keys := make([]string, callers)
	for i := range keys {
		keys[i] = fmt.Sprintf("apply:ip:10.%d.%d.%d", i>>16&0xff, i>>8&0xff, i&0xff)
	}
	for i, k := range keys {
		mustAllow(t, l, k, 10, window, at(time.Duration(i%1000)*time.Millisecond))
	}
	keys = nil
	peak := heapInuse()
	if n := l.Len(); n != callers {
		t.Fatalf("Len = %d, want %d", n, callers)
	}

	later := at(2 * window)
	for i := range 10 {
		mustAllow(t, l, fmt.Sprintf("apply:alice%d", i), 10, window, later)
	}
	l.Sweep(later)
	after := heapInuse()

	if n := l.Len(); n != 10 {
		t.Fatalf("Len = %d after the window passed, want the 10 active keys", n)
	}
	perCaller := float64(peak-base) / float64(callers)
	t.Logf("heap in use: empty %d KiB, %d callers %d KiB (%.0f B/caller), after sweep %d KiB",
		base>>10, callers, peak>>10, perCaller, after>>10)
	// Bound: 64 empty shard maps and ten one-entry buckets are a few KiB;
	// 1 MiB leaves room for the runtime's own jitter (GC metadata, test
	// framework buffers) while being ~1% of the peak, so a leak of even a
	// few bytes per departed caller fails.
	const slack = 1 << 20
	if after > base+slack {
		t.Fatalf("heap in use after sweep = %d KiB, want within %d KiB of the empty limiter's %d KiB (peak was %d KiB)",
			after>>10, slack>>10, base>>10, peak>>10)
	}
	runtime.KeepAlive(l)
}

// heapInuse returns HeapInuse after two collections (the second frees
// what the first's finalizers released).
func heapInuse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}
