// Package ratelimit is changeflow's rate limiter: a sliding-window
// log per key, atomic per key, sharded so that keys do not contend on one
// lock, and garbage-collected so that memory stays bounded however many
// distinct callers come and go. It also holds the optional global quota of
// the global quota (quota.go), which divides a limit among the live instances.
//
// The limiter has no clock of its own: every call passes now, so tests
// drive time and the HTTP link reads one injectable clock.
package ratelimit

import (
	"hash/maphash"
	"sync"
	"time"
)

const (
	// numShards spreads keys over independent locks. 64 is well above the
	// core count of the hosts we run on, so two requests rarely wait for
	// each other unless they share a key.
	numShards = 64

	// sweepPerCall is how many idle buckets one call may reclaim from its
	// shard's idle end. Every call that may create a bucket can also remove
	// this many dead ones, so garbage cannot outgrow live traffic.
	sweepPerCall = 4

	// sweepChunk is how many buckets Sweep reclaims per lock hold, so a full
	// sweep never blocks a shard for long (no stop-the-world).
	sweepChunk = 1024

	// MaxWindow is the longest window the limiter honours; longer windows
	// are treated as MaxWindow. Timestamps are stored as 32-bit millisecond
	// offsets from a per-bucket base, and every live entry must fit.
	MaxWindow = time.Duration(1<<31) * time.Millisecond // ≈ 24.8 days

	// shrinkMinPeak and shrinkRatio decide when a shard's map is rebuilt:
	// Go maps never give back their tables after deletes, so a map that
	// once held a million callers would keep their slots for ever. Once
	// the live count drops below peak/shrinkRatio (and the peak was worth
	// bothering about), the live entries move to a fresh map; the copy is
	// O(live) and is paid for by the peak/shrinkRatio deletes before it.
	shrinkMinPeak = 1024
	shrinkRatio   = 8
)

// Limiter is a set of sliding-window logs keyed by string (the HTTP link
// uses "bucket:subject"). The zero value is not usable; call New. It is
// safe for concurrent use.
type Limiter struct {
	seed   maphash.Seed
	shards [numShards]shard
}

// shard is one lock and the buckets behind it. Buckets are also threaded
// on a list ordered by their newest timestamp (oldest first), so the idle
// ones are always at the front and reclaiming them never scans live ones.
type shard struct {
	mu      sync.Mutex
	buckets map[string]*bucket
	idle    bucketList
	peak    int
	// pad keeps neighbouring shards' locks off one cache line.
	_ [64]byte
}

// bucket is one key's log: the admission times of the last window, oldest
// first, as millisecond offsets from base in a ring. Denied calls are not
// logged: a caller hammering a full bucket does not
// extend its own wait.
type bucket struct {
	key    string
	base   int64 // Unix milliseconds; ring values are offsets from it
	window int64 // milliseconds, the window of the last call (for sweeping)
	head   int32 // index of the oldest entry
	n      int32 // live entries
	ring   []uint32

	prev, next *bucket // the shard's idle-order list
}

// New returns an empty limiter.
func New() *Limiter {
	l := &Limiter{seed: maphash.MakeSeed()}
	for i := range l.shards {
		l.shards[i].buckets = make(map[string]*bucket)
	}
	return l
}

// Allow logs one request for key at now and reports whether it is within
// limit requests per window. Eviction of expired entries, the check and the
// append happen under the key's shard lock, so concurrent callers of one
// key are admitted exactly limit times per window. When it refuses,
// retryAfter is how long until enough entries leave the window for one
// more request to fit.
//
// limit ≤ 0 or window ≤ 0 means no limiting (the configuration fallback:
// a broken threshold must not block traffic); nothing is recorded then.
// Times are kept at millisecond resolution.
func (l *Limiter) Allow(key string, limit int, window time.Duration, now time.Time) (ok bool, retryAfter time.Duration) {
	if limit <= 0 || window <= 0 {
		return true, 0
	}
	if window > MaxWindow {
		window = MaxWindow
	}
	winMs := window.Milliseconds()
	if winMs < 1 {
		winMs = 1
	}
	nowMs := now.UnixMilli()

	s := &l.shards[maphash.String(l.seed, key)&(numShards-1)]
	s.mu.Lock()
	defer s.mu.Unlock()

	b := s.buckets[key]
	if b == nil {
		// The bucket was idle (or never existed) and is recreated with this
		// one entry. Reclaim a few dead neighbours first, so that a flood
		// of new keys pays for the old keys' memory as it goes.
		s.sweep(nowMs, sweepPerCall)
		b = &bucket{key: key, base: nowMs, window: winMs, ring: make([]uint32, ringStart(limit))}
		b.push(0)
		s.buckets[key] = b
		s.idle.pushBack(b)
		if len(s.buckets) > s.peak {
			s.peak = len(s.buckets)
		}
		return true, 0
	}

	b.window = winMs
	// A caller's clock may run slightly behind another's (now is read
	// before the lock). Counting it at the bucket's newest time keeps the
	// log sorted, which eviction relies on.
	if newest := b.newest(); nowMs < newest {
		nowMs = newest
	}
	b.evict(nowMs - winMs)
	if int(b.n) >= limit {
		// With a limit lowered by a reload, more than limit entries may be
		// live: the (n-limit)th oldest must leave before one more fits.
		waitUntil := b.at(int(b.n)-limit) + winMs
		s.sweep(nowMs, sweepPerCall)
		return false, time.Duration(waitUntil-nowMs) * time.Millisecond
	}
	if b.n == 0 {
		b.base = nowMs
	}
	b.rebase(nowMs)
	b.grow(limit)
	b.push(uint32(nowMs - b.base))
	s.idle.moveToBack(b)
	s.sweep(nowMs, sweepPerCall)
	return true, 0
}

// Sweep reclaims every bucket whose newest entry is older than its window
// at now and returns how many it removed. It works shard by shard, at
// most sweepChunk buckets per lock hold, so callers keep flowing while it
// runs. Allow reclaims as it goes; Sweep is for a periodic job or tests.
func (l *Limiter) Sweep(now time.Time) int {
	nowMs := now.UnixMilli()
	removed := 0
	for i := range l.shards {
		s := &l.shards[i]
		for {
			s.mu.Lock()
			n := s.sweep(nowMs, sweepChunk)
			s.mu.Unlock()
			removed += n
			if n < sweepChunk {
				break
			}
		}
	}
	return removed
}

// Len returns the number of buckets held, live or not yet reclaimed.
func (l *Limiter) Len() int {
	n := 0
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		n += len(s.buckets)
		s.mu.Unlock()
	}
	return n
}

// sweep removes up to max buckets from the idle end of the list whose
// newest entry has left their window, and shrinks the map when it has
// become mostly empty. It stops at the first live bucket: the list is
// ordered by newest entry, so everything behind it is younger. Buckets of
// a longer window can hold back the reclaiming of shorter ones behind
// them, for at most the difference of the windows. s.mu must be held.
func (s *shard) sweep(nowMs int64, max int) int {
	removed := 0
	for removed < max {
		b := s.idle.front
		if b == nil || nowMs-b.newest() < b.window {
			break
		}
		s.idle.remove(b)
		delete(s.buckets, b.key)
		removed++
	}
	if removed > 0 && s.peak >= shrinkMinPeak && len(s.buckets)*shrinkRatio < s.peak {
		fresh := make(map[string]*bucket, len(s.buckets))
		for k, b := range s.buckets {
			fresh[k] = b
		}
		s.buckets = fresh
		s.peak = len(fresh)
	}
	return removed
}

// ringStart is the initial ring capacity: small, because most callers of
// most buckets make one or two requests per window; it doubles up to the
// limit as needed.
func ringStart(limit int) int {
	if limit < 2 {
		return 1
	}
	return 2
}

// at returns the i-th oldest live entry as Unix milliseconds.
func (b *bucket) at(i int) int64 {
	return b.base + int64(b.ring[(int(b.head)+i)%len(b.ring)])
}

// newest returns the newest entry as Unix milliseconds; the bucket must
// hold at least one entry.
func (b *bucket) newest() int64 { return b.at(int(b.n) - 1) }

// evict drops entries at or before cutoff: an entry logged at t counts
// while now - t < window.
func (b *bucket) evict(cutoff int64) {
	for b.n > 0 && b.at(0) <= cutoff {
		b.head = int32((int(b.head) + 1) % len(b.ring))
		b.n--
	}
}

// rebase moves base forward when nowMs would not fit in a 32-bit offset.
// Live entries are younger than MaxWindow, so they always fit after it.
func (b *bucket) rebase(nowMs int64) {
	if nowMs-b.base <= 1<<32-1 {
		return
	}
	newBase := nowMs
	if b.n > 0 {
		newBase = b.at(0)
	}
	shift := uint32(newBase - b.base)
	for i := 0; i < int(b.n); i++ {
		j := (int(b.head) + i) % len(b.ring)
		b.ring[j] -= shift
	}
	b.base = newBase
}

// grow makes room for one more entry, doubling the ring up to limit.
func (b *bucket) grow(limit int) {
	if int(b.n) < len(b.ring) {
		return
	}
	size := min(max(2*len(b.ring), 1), max(limit, int(b.n)+1))
	ring := make([]uint32, size)
	for i := 0; i < int(b.n); i++ {
		ring[i] = b.ring[(int(b.head)+i)%len(b.ring)]
	}
	b.ring, b.head = ring, 0
}

// push appends an offset; the ring must have room.
func (b *bucket) push(off uint32) {
	b.ring[(int(b.head)+int(b.n))%len(b.ring)] = off
	b.n++
}

// bucketList is an intrusive doubly linked list of buckets.
type bucketList struct {
	front, back *bucket
}

func (l *bucketList) pushBack(b *bucket) {
	b.prev, b.next = l.back, nil
	if l.back != nil {
		l.back.next = b
	} else {
		l.front = b
	}
	l.back = b
}

func (l *bucketList) remove(b *bucket) {
	if b.prev != nil {
		b.prev.next = b.next
	} else {
		l.front = b.next
	}
	if b.next != nil {
		b.next.prev = b.prev
	} else {
		l.back = b.prev
	}
	b.prev, b.next = nil, nil
}

func (l *bucketList) moveToBack(b *bucket) {
	if l.back == b {
		return
	}
	l.remove(b)
	l.pushBack(b)
}
