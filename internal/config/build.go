package config

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"changeflow/internal/domain"
)

// builder turns merged layers into a Snapshot. It holds only the item table
// and its key map; it is safe for concurrent use because it is never
// modified after newBuilder.
type builder struct {
	items []item
	km    *keymap
	// refuseWeak makes every weak token fall back (refuseWeakSecrets);
	// Options.RefuseWeakSecrets sets it, outside the local profile.
	refuseWeak bool
}

func newBuilder(instanceID string) *builder {
	items := itemTable(instanceID)
	return &builder{items: items, km: newKeymap(items)}
}

// rawOf returns the merged raw value of key.
func rawOf(m merged, key string) raw {
	v, ok := m.values[key]
	if !ok {
		return raw{}
	}
	src := m.sources[key]
	if src == "" {
		src = SourceDefault
	}
	return raw{v: v, set: true, source: src}
}

// build resolves every item. The error is non-nil (wrapping ErrInvalid)
// only for deployment keys the program must not run on.
func (b *builder) build(m merged, now time.Time) (*Snapshot, error) {
	s := &Snapshot{
		loadedAt:    now,
		fingerprint: m.fingerprint(),
		res:         map[string]Resolution{},
		vals:        map[string]any{},
		targets:     map[string]Target{},
		buckets:     map[string]int{},
		routes:      map[string][]string{},
		gitlabTok:   map[string]string{},
		callbacks:   map[string]string{},
		httpTO:      map[string]time.Duration{},
		restartKey:  map[string]bool{},
	}
	put := func(key string, r raw, res result) {
		src := r.source
		if !r.set {
			src = SourceDefault
		}
		s.res[key] = Resolution{Key: key, Value: res.text, Source: src, FellBack: res.fellBack, Reason: res.reason}
	}

	var errs []error
	for i := range b.items {
		it := &b.items[i]
		r := rawOf(m, it.key)
		res := it.resolve(it, r, s.vals)
		if res.err != nil {
			errs = append(errs, res.err)
			continue
		}
		s.vals[it.key] = res.val
		put(it.key, r, res)
		if it.restart {
			s.restartKey[it.key] = true
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	b.pairs(s)

	for _, key := range sortedKeys(m.values) {
		r := rawOf(m, key)
		parts := strings.Split(key, ".")
		switch {
		case strings.HasPrefix(key, famRateLimit+".") && len(parts) == 3 && parts[2] == "limit":
			res := resolveBucket(r)
			s.buckets[parts[1]] = res.val.(int)
			s.vals[key] = res.val
			put(key, r, res)
		case strings.HasPrefix(key, famRoutes+"."):
			res := resolveRules(r)
			s.routes[parts[2]] = res.val.([]string)
			s.vals[key] = res.val
			put(key, r, res)
		case strings.HasPrefix(key, famGitLabTok+"."):
			res := resolveToken(r, "no token")
			s.gitlabTok[parts[2]] = res.val.(string)
			s.vals[key] = res.val
			put(key, r, res)
			s.restartKey[key] = true
		case strings.HasPrefix(key, famCallbacks+"."):
			res := resolveToken(r, "reject every callback")
			if cur, ok := strings.CutSuffix(parts[2], previousSuffix); ok && callbackEntries()[cur] == cur {
				res = resolvePreviousToken(r, cur)
			}
			s.callbacks[parts[2]] = res.val.(string)
			s.vals[key] = res.val
			put(key, r, res)
		case strings.HasPrefix(key, famHTTP+"."):
			def, ok := defaultHTTPTimeouts()[parts[2]]
			if !ok {
				def = fallbackHTTPTimeout
			}
			it := durItem(key, def, time.Millisecond, time.Second, false, "")
			res := resolveDuration(&it, r, nil)
			s.httpTO[parts[2]] = res.val.(time.Duration)
			s.vals[key] = res.val
			put(key, r, res)
		}
	}
	// Callback tokens are always listed: a missing one means every callback
	// of that kind is rejected, which an operator must be able to see.
	for _, name := range []string{CallbackApproval, CallbackDeploy, CallbackGitLab} {
		key := famCallbacks + "." + name
		if _, ok := s.res[key]; !ok {
			put(key, raw{}, resolveToken(raw{}, "reject every callback"))
		}
	}
	if b.refuseWeak {
		b.refuseWeakSecrets(s)
	}
	b.buildTargets(s, m, put)
	s.unknown = append([]string(nil), m.unknown...)
	return s, nil
}

// pairs applies the rules that relate two items: an inverted pair falls
// back to both defaults, because there is no telling which half is wrong.
func (b *builder) pairs(s *Snapshot) {
	pair := func(loKey, hiKey, rel string) {
		lo, _ := s.vals[loKey].(time.Duration)
		hi, _ := s.vals[hiKey].(time.Duration)
		if lo < hi {
			return
		}
		var loDef, hiDef time.Duration
		for _, it := range b.items {
			switch it.key {
			case loKey:
				loDef, _ = parseDuration(it.def, time.Second)
			case hiKey:
				hiDef, _ = parseDuration(it.def, time.Second)
			}
		}
		why := fellBack("%s %s %s %s %s → both defaults (%s, %s)", loKey, fmtDur(lo), rel, hiKey, fmtDur(hi), fmtDur(loDef), fmtDur(hiDef))
		for key, def := range map[string]time.Duration{loKey: loDef, hiKey: hiDef} {
			s.vals[key] = def
			r := s.res[key]
			r.Value, r.FellBack, r.Reason = fmtDur(def), true, why
			s.res[key] = r
		}
	}
	pair(KeyReconcileMinAge, KeyReconcileMaxAge, "≥")
	pair(KeyInstanceHeartbeatInterval, KeyInstanceLiveAfter, "≥")
}

// resolveBucket: a missing, empty, non-positive or unparsable threshold
// means no limiting (docs/configuration.md: blocking legitimate traffic is the worse
// failure).
func resolveBucket(r raw) result {
	off := func(why string) result {
		return result{val: 0, text: "0", fellBack: true, reason: fellBack("%s → no limiting", why)}
	}
	if !r.set {
		return off("missing")
	}
	if isBlank(r.v) {
		return off("empty")
	}
	n, why := parseInt(r.v)
	switch {
	case why != "":
		return off(fmt.Sprintf("value %s %s", quoted(text(r.v)), why))
	case n <= 0:
		return off(fmt.Sprintf("value %s ≤ 0", quoted(text(r.v))))
	case n > 1<<31-1:
		n = 1<<31 - 1
	}
	return result{val: int(n), text: fmt.Sprint(n), reason: builtinOr(r)}
}

// resolveRules: missing or empty means deny; blank entries are dropped.
func resolveRules(r raw) result {
	if !r.set || isBlank(r.v) {
		what := "missing"
		if r.set {
			what = "empty"
		}
		return result{val: []string{}, text: "", fellBack: true, reason: fellBack("%s → deny", what)}
	}
	rules, blanks := parseList(r.v)
	if rules == nil {
		rules = []string{}
	}
	res := result{val: rules, text: strings.Join(rules, ", "), reason: builtinOr(r)}
	switch {
	case len(rules) == 0:
		res.fellBack, res.reason = true, fellBack("only blank entries → deny")
	case blanks > 0:
		res.fellBack, res.reason = true, fellBack("dropped %d blank entr%s", blanks, plural(blanks, "y", "ies"))
	}
	return res
}

// resolveToken: secrets are trimmed and never echoed; blank means none.
func resolveToken(r raw, consequence string) result {
	if !r.set {
		return result{val: "", fellBack: true, reason: fellBack("missing → %s", consequence)}
	}
	s := strings.TrimSpace(text(r.v))
	if s == "" {
		return result{val: "", fellBack: true, reason: fellBack("empty → %s", consequence)}
	}
	return result{val: s, text: masked, reason: builtinOr(r)}
}

// resolvePreviousToken resolves callbacks.tokens.<current>Previous. Unlike
// a current token, blank is not a fallback: no previous value is the
// normal state outside a rotation, and an operator clears a finished
// rotation by setting it empty as often as by removing it, so neither may
// raise a start-up warning.
func resolvePreviousToken(r raw, current string) result {
	v := strings.TrimSpace(text(r.v))
	if !r.set || v == "" {
		return result{val: "", reason: "empty → only callbacks.tokens." + current + " is accepted"}
	}
	return result{val: v, text: masked, reason: builtinOr(r)}
}

// buildTargets resolves every target named by a key or a declaration.
func (b *builder) buildTargets(s *Snapshot, m merged, put func(string, raw, result)) {
	keys := map[string]bool{}
	for d := range m.declared {
		keys[d] = true
	}
	for k := range m.values {
		if parts := strings.Split(k, "."); parts[0] == famTargets && len(parts) >= 3 {
			keys[parts[1]] = true
		}
	}
	loc, _ := s.vals[KeyAccessTimezone].(*time.Location)
	for _, key := range sortedKeys(keys) {
		p := famTargets + "." + key + "."
		t := Target{Key: key}

		r := rawOf(m, p+"title")
		title := stringItem(p+"title", key, false, "", "")
		res := resolveString(&title, r, nil)
		t.Title = res.val.(string)
		put(p+"title", r, res)

		r = rawOf(m, p+"file")
		res = resolveTargetFile(key, r)
		t.File = res.val.(string)
		put(p+"file", r, res)

		r = rawOf(m, p+"accessMode")
		res = resolveAccessMode(r)
		t.AccessMode = res.val.(domain.AccessMode)
		put(p+"accessMode", r, res)

		rs, re := rawOf(m, p+"window.start"), rawOf(m, p+"window.end")
		var ress, rese result
		t.Window, ress, rese = resolveWindow(rs, re, loc, t.AccessMode == domain.AccessTestWindow, t.AccessMode)
		put(p+"window.start", rs, ress)
		put(p+"window.end", re, rese)

		r = rawOf(m, p+"batching")
		batching := boolItem(p+"batching", true, false, "")
		res = resolveBool(&batching, r, nil)
		t.Batching = res.val.(bool)
		put(p+"batching", r, res)

		r = rawOf(m, p+"maxDays")
		maxDays := intItem(p+"maxDays", 30, 1, 3650, false, "")
		res = resolveInt(&maxDays, r, nil)
		t.MaxDays = res.val.(int)
		put(p+"maxDays", r, res)

		b.buildReview(&t, m, p, put)

		s.targets[key] = t
		s.targetKeys = append(s.targetKeys, key)
	}
}
