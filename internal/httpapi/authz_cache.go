package httpapi

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"
)

// Bounds of the permission cache. They are not configuration: the size
// only has to hold every active operator's few rule sets with room to
// spare, and the deny cap is what makes "a deny is never cached longer
// than an allow" also mean "a rule just granted works within seconds".
const (
	// permCacheMaxEntries bounds the cache's memory whatever the number of
	// callers: at the bound, expired entries are swept and, if none were,
	// one entry is dropped per insertion (the map's order picks which).
	permCacheMaxEntries = 10000
	// permCacheDenyCap is the longest a deny is kept.
	permCacheDenyCap = 10 * time.Second
)

// cachedPermissions is the authorization link's permission checker with a
// per-account cache of the service's answers (authz.cacheTTL), wrapped
// around the real client by NewServer. The attack it answers: every
// /api/me and /ops/* call of a caller with no rights cost a round trip to
// the permission service, so a flood of them could slow it into its
// breaker, and an open breaker denies every operator. With the cache, a
// caller's repeated calls cost one check per TTL (and the authz bucket
// bounds the calls themselves).
//
// Decisions, each a trade-off:
//   - An answer is reused for the same account and the same rule codes
//     only. A configuration reload empties the cache: whatever changed —
//     rule codes, the permission service's address or deadline, the TTL
//     — the next check asks the service under the new configuration.
//     The TTL is read on every call, and 0 turns the cache off.
//   - A deny is kept for the shorter of the TTL and permCacheDenyCap:
//     never longer than an allow, and short enough that someone just
//     given a rule does not wait the whole TTL.
//   - A failed check (service down, slow, breaker open) is not cached: it
//     denies this call, and the next one asks again (or fails fast at the
//     breaker).
//   - While the service is down a cached answer is still served until it
//     expires — an operator in the middle of something keeps working for
//     at most the TTL — and never after: no stale answer is served, so the
//     outage then denies (fail closed), as it does at once for every
//     account without a fresh answer. The same bound is what a rule
//     revoked at the service costs: it keeps working for up to the TTL
//     (an operator who cannot wait reloads the configuration, which
//     empties the cache).
type cachedPermissions struct {
	next PermissionChecker
	// settings is the TTL in force and the configuration it came from
	// (the snapshot, compared by identity: a reload is a new one).
	settings func() (ttl time.Duration, generation any)
	now      func() time.Time

	mu      sync.Mutex
	entries map[string]permEntry
	// seen is the generation the entries were answered under.
	seen any
}

// permEntry is one cached answer: the codes the service granted, when it
// answered, and whether that granted none of the codes asked (a deny).
type permEntry struct {
	granted []string
	at      time.Time
	deny    bool
}

// newCachedPermissions wraps next; settings is read per call (a TTL ≤ 0
// bypasses the cache, a new generation empties it); now nil means
// time.Now.
func newCachedPermissions(next PermissionChecker, settings func() (time.Duration, any), now func() time.Time) *cachedPermissions {
	if now == nil {
		now = time.Now
	}
	return &cachedPermissions{next: next, settings: settings, now: now, entries: map[string]permEntry{}}
}

// permKey is the cache key: the account and the sorted rule codes, joined
// by a byte neither can contain.
func permKey(subject string, ruleCodes []string) string {
	codes := slices.Clone(ruleCodes)
	slices.Sort(codes)
	return subject + "\x00" + strings.Join(codes, "\x00")
}

// Check answers from the cache when it holds a fresh answer for subject
// and ruleCodes, else asks the service and keeps its answer.
func (c *cachedPermissions) Check(ctx context.Context, subject string, ruleCodes []string) ([]string, error) {
	ttl, gen := c.settings()
	c.mu.Lock()
	if gen != c.seen || ttl <= 0 {
		// A reload (or the cache turned off): nothing answered under the
		// old configuration is served under the new one.
		if len(c.entries) > 0 {
			c.entries = map[string]permEntry{}
		}
		c.seen = gen
	}
	if ttl <= 0 {
		c.mu.Unlock()
		return c.next.Check(ctx, subject, ruleCodes)
	}
	key := permKey(subject, ruleCodes)
	now := c.now()
	if e, ok := c.entries[key]; ok {
		if now.Sub(e.at) < e.life(ttl) && !now.Before(e.at) {
			c.mu.Unlock()
			return slices.Clone(e.granted), nil
		}
		delete(c.entries, key)
	}
	c.mu.Unlock()

	granted, err := c.next.Check(ctx, subject, ruleCodes)
	if err != nil {
		return nil, err
	}
	deny := true
	for _, g := range granted {
		if slices.Contains(ruleCodes, g) {
			deny = false
			break
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen != gen {
		return granted, nil // reloaded while asking: keep nothing of the old one
	}
	if len(c.entries) >= permCacheMaxEntries {
		c.evictLocked(now, ttl)
	}
	c.entries[key] = permEntry{granted: slices.Clone(granted), at: now, deny: deny}
	return granted, nil
}

// life is how long e may be served under ttl.
func (e permEntry) life(ttl time.Duration) time.Duration {
	if e.deny {
		return min(ttl, permCacheDenyCap)
	}
	return ttl
}

// evictLocked makes room for one entry: every expired entry goes; if none
// had expired, one arbitrary entry does.
func (c *cachedPermissions) evictLocked(now time.Time, ttl time.Duration) {
	for k, e := range c.entries {
		if now.Sub(e.at) >= e.life(ttl) || now.Before(e.at) {
			delete(c.entries, k)
		}
	}
	if len(c.entries) < permCacheMaxEntries {
		return
	}
	for k := range c.entries {
		delete(c.entries, k)
		return
	}
}

// len is the number of cached answers (tests).
func (c *cachedPermissions) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
