package config

import (
	"cmp"
	"log/slog"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"
)

// Resolution says how one item got its effective value. It is what
// /ops/config and the startup log print, so Value never carries a secret.
type Resolution struct {
	// Key is the full dotted key, e.g. "targets.prod-console.accessMode".
	Key string `json:"key"`
	// Value is the effective value as text, secrets masked.
	Value string `json:"value"`
	// Source is the layer whose value was considered: default, file, env,
	// etcd or overlay. When FellBack is true it names the layer holding the
	// bad value, which is where an operator has to fix it.
	Source string `json:"source"`
	// FellBack is true when the configured value was missing where one is
	// needed, or unusable, and the documented fallback applies instead.
	FellBack bool `json:"fellBack"`
	// Reason explains a fall-back ("fell back: value 'OPNE' unknown →
	// CLOSED") or says "built-in default"; empty when a configured value was
	// used as is.
	Reason string `json:"reason,omitempty"`
}

// Snapshot is one immutable, fully resolved configuration. Readers get it
// from Manager.Current and may keep it for the duration of a request: every
// map is private and every accessor returns copies, so nothing can change
// it after construction.
type Snapshot struct {
	version  uint64
	loadedAt time.Time
	// fingerprint identifies the merged raw input (values and sources), so
	// a reload that changes nothing does not produce a new version.
	fingerprint string

	res  map[string]Resolution
	vals map[string]any // flat items: typed value by key

	targets    map[string]Target
	targetKeys []string
	buckets    map[string]int
	routes     map[string][]string
	gitlabTok  map[string]string
	callbacks  map[string]string
	httpTO     map[string]time.Duration
	unknown    []string
	restartKey map[string]bool
	refused    []RefusedSecret // sorted by key (refuseWeakSecrets)
}

// Version increments with each reload that changed the effective input;
// the snapshot built by Load is version 1.
func (s *Snapshot) Version() uint64 { return s.version }

// LoadedAt is when this snapshot was built.
func (s *Snapshot) LoadedAt() time.Time { return s.loadedAt }

// Effective lists every known item, every configured target field, rate
// limit bucket, route, token and dependency timeout, sorted by key, secrets
// masked. It feeds GET /ops/config and the startup log.
func (s *Snapshot) Effective() []Resolution {
	out := make([]Resolution, 0, len(s.res))
	for _, r := range s.res {
		out = append(out, r)
	}
	// Keys are unique, so any sort gives this order; SortFunc swaps
	// without reflection, which sort.Slice does for every swap.
	slices.SortFunc(out, func(a, b Resolution) int { return cmp.Compare(a.Key, b.Key) })
	return out
}

// FellBack lists only the items that fell back, sorted by key: what an
// operator should look at first.
func (s *Snapshot) FellBack() []Resolution {
	var out []Resolution
	for _, r := range s.Effective() {
		if r.FellBack {
			out = append(out, r)
		}
	}
	return out
}

// Unknown lists keys that some source set but no item knows, sorted —
// usually misspellings ("workflow.aproveFirst"). They are ignored, and
// logged at warn on every load.
func (s *Snapshot) Unknown() []string { return slices.Clone(s.unknown) }

// Resolution returns how key was resolved; ok is false for a key that is
// neither an item nor a configured family entry.
func (s *Snapshot) Resolution(key string) (Resolution, bool) {
	r, ok := s.res[key]
	return r, ok
}

// RestartRequired reports whether key is read once at startup (server.*,
// database.*, …): a new value shows in Effective() but takes effect only
// after a restart.
func (s *Snapshot) RestartRequired(key string) bool { return s.restartKey[key] }

// unknownKey is the Resolution of an accessor asked for a key it does not
// know: a programming error, reported instead of panicking in a request.
func unknownKey(key string) Resolution {
	return Resolution{Key: key, Source: SourceDefault, FellBack: true, Reason: "fell back: unknown key → zero value"}
}

// Duration returns a duration item (e.g. KeyBatchInterval).
func (s *Snapshot) Duration(key string) (time.Duration, Resolution) {
	d, ok := s.vals[key].(time.Duration)
	if !ok {
		return 0, unknownKey(key)
	}
	return d, s.res[key]
}

// Int returns an integer item (e.g. KeyBatchMaxRequests).
func (s *Snapshot) Int(key string) (int, Resolution) {
	n, ok := s.vals[key].(int)
	if !ok {
		return 0, unknownKey(key)
	}
	return n, s.res[key]
}

// Bool returns a boolean item (e.g. KeyWorkflowApproveFirst).
func (s *Snapshot) Bool(key string) (bool, Resolution) {
	b, ok := s.vals[key].(bool)
	if !ok {
		return false, unknownKey(key)
	}
	return b, s.res[key]
}

// String returns a text item (URLs, paths, ids, database.driver,
// database.dsn). Secrets are returned in clear: this is the value to use,
// the Resolution is the value to show.
func (s *Snapshot) String(key string) (string, Resolution) {
	v, ok := s.vals[key].(string)
	if !ok {
		return "", unknownKey(key)
	}
	return v, s.res[key]
}

// List returns a list item (gitlab.projects, config.etcd.endpoints).
func (s *Snapshot) List(key string) ([]string, Resolution) {
	v, ok := s.vals[key].([]string)
	if !ok {
		return nil, unknownKey(key)
	}
	return slices.Clone(v), s.res[key]
}

// LogLevel returns log.level.
func (s *Snapshot) LogLevel() (slog.Level, Resolution) {
	l, _ := s.vals[KeyLogLevel].(slog.Level)
	return l, s.res[KeyLogLevel]
}

// Location returns access.timezone; nil when the zone is unknown, in which
// case every test window is outside.
func (s *Snapshot) Location() (*time.Location, Resolution) {
	l, _ := s.vals[KeyAccessTimezone].(*time.Location)
	return l, s.res[KeyAccessTimezone]
}

// TrustedProxies returns ratelimit.trustedProxies as prefixes (a single IP
// is a /32 or /128). The client address is the right-most X-Forwarded-For
// hop not inside one of them.
func (s *Snapshot) TrustedProxies() ([]netip.Prefix, Resolution) {
	p, _ := s.vals[KeyRateLimitTrustedProxies].([]netip.Prefix)
	return slices.Clone(p), s.res[KeyRateLimitTrustedProxies]
}

// IdentityTrustedProxies returns the peers whose auth-proxy login headers
// are believed; empty means none.
func (s *Snapshot) IdentityTrustedProxies() ([]netip.Prefix, Resolution) {
	p, _ := s.vals[KeyIdentityTrustedProxies].([]netip.Prefix)
	return slices.Clone(p), s.res[KeyIdentityTrustedProxies]
}

// RateLimit returns the limit of a bucket per window. limit 0 means no
// limiting: the fallback for a missing, empty, non-positive or unparsable
// threshold, because a broken threshold must not block legitimate traffic.
// Bucket names are case-insensitive.
func (s *Snapshot) RateLimit(bucket string) (limit int, window time.Duration, res Resolution) {
	b := strings.ToLower(bucket)
	window, _ = s.Duration(KeyRateLimitWindow)
	key := famRateLimit + "." + b + ".limit"
	if r, ok := s.res[key]; ok {
		return s.buckets[b], window, r
	}
	return 0, window, Resolution{Key: key, Source: SourceDefault, FellBack: true, Value: "0", Reason: fellBack("missing → no limiting")}
}

// Buckets lists the configured rate-limit bucket names, sorted.
func (s *Snapshot) Buckets() []string { return sortedKeys(s.buckets) }

// RouteRules returns the rule codes that grant access to route (any of
// them). An empty list means deny: missing rules must never mean
// unauthorized access. Route names are case-insensitive.
func (s *Snapshot) RouteRules(route string) ([]string, Resolution) {
	r := strings.ToLower(route)
	key := famRoutes + "." + r + ".rules"
	if res, ok := s.res[key]; ok {
		return slices.Clone(s.routes[r]), res
	}
	return []string{}, Resolution{Key: key, Source: SourceDefault, FellBack: true, Reason: fellBack("missing → deny")}
}

// CallbackToken returns the shared token for a callback source (approval,
// deploy, gitlab). ok false means no usable token is configured and every
// callback of that kind must be rejected. Compare tokens in constant time.
func (s *Snapshot) CallbackToken(name string) (token string, ok bool, res Resolution) {
	n := strings.ToLower(name)
	key := famCallbacks + "." + n
	tok := s.callbacks[n]
	r, found := s.res[key]
	if !found {
		r = Resolution{Key: key, Source: SourceDefault, FellBack: true, Reason: fellBack("missing → reject every callback")}
	}
	return tok, tok != "", r
}

// CallbackPreviousToken returns callbacks.tokens.<name>Previous, the value
// a callback of kind name is accepted with besides its current token while
// a rotation is under way. ok false means only the current token is
// accepted. It is never a reason to accept a callback whose current token
// is unset: CallbackToken decides whether the kind is accepted at all.
func (s *Snapshot) CallbackPreviousToken(name string) (token string, ok bool) {
	cur, known := callbackEntries()[strings.ToLower(name)]
	if !known || strings.HasSuffix(cur, previousSuffix) {
		return "", false
	}
	tok := s.callbacks[cur+previousSuffix]
	return tok, tok != ""
}

// GitLabToken returns the bot token called name (e.g. committer,
// approver1). ok false means it is not configured.
func (s *Snapshot) GitLabToken(name string) (token string, ok bool, res Resolution) {
	n := strings.ToLower(name)
	key := famGitLabTok + "." + n
	tok := s.gitlabTok[n]
	r, found := s.res[key]
	if !found {
		r = Resolution{Key: key, Source: SourceDefault, FellBack: true, Reason: fellBack("missing → no token")}
	}
	return tok, tok != "", r
}

// GitLabTokenNames lists the configured bot token names, sorted.
func (s *Snapshot) GitLabTokenNames() []string { return sortedKeys(s.gitlabTok) }

// HTTPTimeout returns the deadline for outbound calls to dependency.
// It is never 0: every call has a deadline.
func (s *Snapshot) HTTPTimeout(dependency string) (time.Duration, Resolution) {
	d := strings.ToLower(dependency)
	key := famHTTP + "." + d
	if r, ok := s.res[key]; ok {
		return s.httpTO[d], r
	}
	return fallbackHTTPTimeout, Resolution{Key: key, Value: fmtDur(fallbackHTTPTimeout), Source: SourceDefault,
		Reason: reasonBuiltin + " for unlisted dependencies"}
}

// Targets returns every configured target, sorted by key.
func (s *Snapshot) Targets() []Target {
	out := make([]Target, 0, len(s.targetKeys))
	for _, k := range s.targetKeys {
		out = append(out, s.targets[k])
	}
	return out
}

// Target returns the target called key (exact spelling); ok is false when
// no such target is configured.
func (s *Snapshot) Target(key string) (Target, bool) {
	t, ok := s.targets[key]
	return t, ok
}

// LogValue makes a snapshot loggable as one group: version, the fallen-back
// items with their reasons, unknown keys and every item's effective value —
// the startup log line.
func (s *Snapshot) LogValue() slog.Value {
	attrs := []slog.Attr{slog.Uint64("version", s.version)}
	var fb []string
	for _, r := range s.FellBack() {
		fb = append(fb, r.Key+"="+r.Value+" ("+r.Reason+", source "+r.Source+")")
	}
	attrs = append(attrs, slog.Int("items", len(s.res)), slog.Any("fellBack", fb))
	// Every item's effective value (secrets masked), so the startup line
	// alone answers "what is this instance running with" (docs/configuration.md).
	eff := make([]slog.Attr, 0, len(s.res))
	for _, r := range s.Effective() {
		eff = append(eff, slog.String(r.Key, r.Value))
	}
	attrs = append(attrs, slog.Attr{Key: "effective", Value: slog.GroupValue(eff...)})
	if len(s.unknown) > 0 {
		attrs = append(attrs, slog.Any("unknownKeys", s.unknown))
	}
	return slog.GroupValue(attrs...)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
