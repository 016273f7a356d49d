package ratelimit

import (
	"fmt"
	"hash/maphash"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// The comparison of docs/benchmarks.md: this limiter against
// golang.org/x/time/rate, the usual Go answer, kept in a per-key map with
// the same 64-way sharding so that only the per-key algorithm and its
// memory differ. x/time/rate is a token bucket: it allows bursts of
// `limit` and refills continuously, where the log counts exactly the last
// window; it has no notion of idle keys, so a map of them grows until
// something else evicts it.

// keyed is what both contestants offer the benchmarks.
type keyed interface {
	Allow(key string, limit int, window time.Duration, now time.Time) bool
	Len() int
}

type slidingLog struct{ *Limiter }

func (s slidingLog) Allow(key string, limit int, window time.Duration, now time.Time) bool {
	ok, _ := s.Limiter.Allow(key, limit, window, now)
	return ok
}

// xrateMap is a sharded map of token buckets, one per key, created on
// first use with rate limit/window and burst limit.
type xrateMap struct {
	seed   maphash.Seed
	shards [numShards]struct {
		mu sync.Mutex
		m  map[string]*rate.Limiter
		_  [64]byte
	}
}

func newXrateMap() *xrateMap {
	x := &xrateMap{seed: maphash.MakeSeed()}
	for i := range x.shards {
		x.shards[i].m = make(map[string]*rate.Limiter)
	}
	return x
}

func (x *xrateMap) Allow(key string, limit int, window time.Duration, now time.Time) bool {
	s := &x.shards[maphash.String(x.seed, key)&(numShards-1)]
	s.mu.Lock()
	l := s.m[key]
	if l == nil {
		l = rate.NewLimiter(rate.Every(window/time.Duration(limit)), limit)
		s.m[key] = l
	}
	s.mu.Unlock()
	return l.AllowN(now, 1)
}

func (x *xrateMap) Len() int {
	n := 0
	for i := range x.shards {
		x.shards[i].mu.Lock()
		n += len(x.shards[i].m)
		x.shards[i].mu.Unlock()
	}
	return n
}

func contestants() []struct {
	name string
	new  func() keyed
} {
	return []struct {
		name string
		new  func() keyed
	}{
		{"impl=sliding-log", func() keyed { return slidingLog{New()} }},
		{"impl=x-time-rate", func() keyed { return newXrateMap() }},
	}
}

// BenchmarkAllowOneKey is one busy caller: 1 request per ms against
// 2000/s, so the log stays ~1000 entries deep and every call evicts one
// and appends one (the steady state of a hot key).
func BenchmarkAllowOneKey(b *testing.B) {
	for _, c := range contestants() {
		b.Run(c.name, func(b *testing.B) {
			l := c.new()
			now := t0
			b.ReportAllocs()
			for b.Loop() {
				now = now.Add(time.Millisecond)
				if !l.Allow("apply:alice", 2000, time.Second, now) {
					b.Fatal("refused")
				}
			}
		})
	}
}

// BenchmarkAllowManyKeys is 10 000 callers spread over all cores, the
// shape of real traffic: contention is per shard, not global.
func BenchmarkAllowManyKeys(b *testing.B) {
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = fmt.Sprintf("apply:ip:10.0.%d.%d", i>>8, i&0xff)
	}
	for _, c := range contestants() {
		b.Run(c.name, func(b *testing.B) {
			l := c.new()
			var seq atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := int(seq.Add(1)) * 7919
				for pb.Next() {
					i++
					l.Allow(keys[i%len(keys)], 10, time.Minute, t0.Add(time.Duration(i)*time.Microsecond))
				}
			})
		})
	}
}

// BenchmarkNewKey adds one caller per op, each making a single request,
// and reports the heap each of them still holds once idle (B/idle-key,
// excluding the key string, which both keep). For the sliding log that is
// the cost until the window passes; for the map of token buckets it is
// for ever.
func BenchmarkNewKey(b *testing.B) {
	for _, c := range contestants() {
		b.Run(c.name, func(b *testing.B) {
			keys := make([]string, b.N)
			for i := range keys {
				keys[i] = fmt.Sprintf("apply:ip:%d", i)
			}
			l := c.new()
			before := heapAlloc()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				l.Allow(keys[i], 10, time.Minute, t0)
			}
			b.StopTimer()
			after := heapAlloc()
			if l.Len() != b.N {
				b.Fatalf("Len = %d, want %d", l.Len(), b.N)
			}
			b.ReportMetric(float64(after-before)/float64(b.N), "B/idle-key")
			runtime.KeepAlive(l)
			runtime.KeepAlive(keys)
		})
	}
}

func heapAlloc() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
