package ratelimit

import (
	"fmt"
	"testing"
	"time"
)

func TestJanitorReclaimsIdleBucketsWithoutTraffic(t *testing.T) {
	l := New()
	for i := range 5000 {
		mustAllow(t, l, fmt.Sprintf("k%d", i), 10, time.Minute, t0)
	}
	swept := make(chan int, 100)
	j := NewJanitor(l, time.Millisecond, func() time.Time { return at(2 * time.Minute) })
	j.onSweep = func(n int) { swept <- n }
	j.Stop() // before Start: nothing to stop
	if err := j.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := j.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := <-swept; n != 5000 {
		t.Fatalf("first sweep removed %d, want all 5000 idle buckets", n)
	}
	j.Stop()
	j.Stop()
	if n := l.Len(); n != 0 {
		t.Fatalf("Len = %d after the sweep, want 0", n)
	}
}

func TestNewJanitorDefaults(t *testing.T) {
	j := NewJanitor(New(), 0, nil)
	if j.every != DefaultSweepInterval || j.now == nil {
		t.Fatalf("defaults not applied: every=%v now=%v", j.every, j.now != nil)
	}
}
