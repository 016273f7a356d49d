package config

import (
	"slices"
	"strings"
)

// keymap maps spellings from any source onto canonical keys. Keys are
// camelCase in the docs, but YAML written by hand, env names and etcd paths
// lose or change case, and a mis-cased key that is silently ignored is a
// trap; so fixed key parts are matched case-insensitively everywhere.
type keymap struct {
	flat   map[string]string // lower-case key → canonical key
	fields map[string]string // lower-case target field → canonical field
	envs   map[string]string // ENV_NAME (without CHANGEFLOW_) → canonical flat key
}

func newKeymap(items []item) *keymap {
	km := &keymap{flat: map[string]string{}, fields: map[string]string{}, envs: map[string]string{}}
	for _, it := range items {
		km.flat[strings.ToLower(it.key)] = it.key
		km.envs[envName(it.key)] = it.key
	}
	for _, f := range targetFields() {
		km.fields[strings.ToLower(f)] = f
	}
	return km
}

// EnvName is the environment variable that sets key, e.g.
// CHANGEFLOW_SERVER_LISTEN for server.listen; error messages name it.
func EnvName(key string) string { return envPrefix + envName(key) }

// envName is the environment spelling of a key, without the CHANGEFLOW_
// prefix: upper-cased, "." → "_".
func envName(key string) string {
	return strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// canonical maps a dotted key from a source onto a known key. It returns
// declare != "" for a bare "targets.<key>" (a target declared with all
// defaults, e.g. `legacy-ftp: {}` in YAML), and ok false for unknown keys.
func (km *keymap) canonical(key string) (canon string, declare string, ok bool) {
	if c, ok := km.flat[strings.ToLower(key)]; ok {
		return c, "", true
	}
	parts := strings.Split(key, ".")
	for _, p := range parts {
		if strings.TrimSpace(p) == "" {
			return "", "", false
		}
	}
	lp := strings.Split(strings.ToLower(key), ".")
	if lp[0] == famTargets {
		return km.targetKey(parts, lp)
	}
	for _, f := range entryKeyFamilies() {
		if c, ok := f.match(lp); ok {
			return c, "", true
		}
	}
	return "", "", false
}

// targetKey is canonical for a key of the targets family: the target's
// name keeps its case (it is the target's key), its field is matched
// case-insensitively; two parts declare the target.
func (km *keymap) targetKey(parts, lp []string) (canon string, declare string, ok bool) {
	switch n := len(parts); {
	case n == 2:
		return "", parts[1], true
	case n >= 3:
		if f, ok := km.fields[strings.Join(lp[2:], ".")]; ok {
			return famTargets + "." + parts[1] + "." + f, "", true
		}
	}
	return "", "", false
}

// entryKeyFamily is a family of keys "<family>.<entry><suffix>" whose
// entry, like the rest of the key, is matched lower-cased.
type entryKeyFamily struct {
	family string // canonical dotted prefix, e.g. "authz.routes"
	suffix string // canonical dotted suffix after the entry, e.g. ".rules"; "" for none
	// entry, when set, maps the lower-cased entry onto its canonical
	// spelling (the callback token names have capitals).
	entry func(lower string) string
}

// entryKeyFamilies are the families canonical matches besides targets.
func entryKeyFamilies() []entryKeyFamily {
	return []entryKeyFamily{
		{family: famRateLimit, suffix: ".limit"},
		{family: famRoutes, suffix: ".rules"},
		{family: famGitLabTok},
		{family: famCallbacks, entry: callbackEntry},
		{family: famHTTP},
	}
}

// match returns the canonical key for lp, the lower-cased parts of a
// key, when it is exactly family, one entry and suffix.
func (f entryKeyFamily) match(lp []string) (string, bool) {
	head := strings.Split(f.family, ".")
	var tail []string
	if f.suffix != "" {
		tail = strings.Split(strings.TrimPrefix(f.suffix, "."), ".")
	}
	if len(lp) != len(head)+1+len(tail) ||
		!slices.Equal(lp[:len(head)], head) || !slices.Equal(lp[len(head)+1:], tail) {
		return "", false
	}
	entry := lp[len(head)]
	if f.entry != nil {
		entry = f.entry(entry)
	}
	return f.family + "." + entry + f.suffix, true
}

// callbackEntry is the canonical name of a callback token entry given
// lower-cased; an unknown name stays as given.
func callbackEntry(lower string) string {
	if c, ok := callbackEntries()[lower]; ok {
		return c
	}
	return lower
}

// envFamily is one family as seen in an environment name: NAME = prefix +
// entry + suffix, e.g. TARGETS_ + PAYMENTS-DB-READONLY + _ACCESSMODE.
type envFamily struct {
	prefix, suffix string
	key            func(entry string) string
	entries        func(e *entrySet) map[string]bool
}

// entrySet is what lower layers (defaults, file) already declared, so an
// env name can be matched back to an entry whose key has a dash or capitals.
type entrySet struct {
	targets, buckets, routes, gitlab, callbacks, http map[string]bool
}

func newEntrySet() *entrySet {
	return &entrySet{targets: map[string]bool{}, buckets: map[string]bool{}, routes: map[string]bool{},
		gitlab: map[string]bool{}, callbacks: map[string]bool{}, http: map[string]bool{}}
}

// add records the entry a canonical key belongs to.
func (e *entrySet) add(canon string) {
	parts := strings.Split(canon, ".")
	switch {
	case parts[0] == famTargets && len(parts) >= 3:
		e.targets[parts[1]] = true
	case parts[0] == famRateLimit && len(parts) == 3:
		e.buckets[parts[1]] = true
	case strings.HasPrefix(canon, famRoutes+".") && len(parts) == 4:
		e.routes[parts[2]] = true
	case strings.HasPrefix(canon, famGitLabTok+"."):
		e.gitlab[parts[2]] = true
	case strings.HasPrefix(canon, famCallbacks+"."):
		e.callbacks[parts[2]] = true
	case strings.HasPrefix(canon, famHTTP+"."):
		e.http[parts[2]] = true
	}
}

func (km *keymap) envFamilies() []envFamily {
	var fams []envFamily
	// Longer suffixes first, so _WINDOW_START is not read as entry "x_window" + "_START".
	for _, f := range []string{"window.start", "window.end", "review.every", "review.dueIn", "accessMode", "maxDays", "batching", "owners", "title", "file"} {
		field := f
		fams = append(fams, envFamily{prefix: "TARGETS_", suffix: "_" + envName(field),
			key:     func(entry string) string { return famTargets + "." + entry + "." + field },
			entries: func(e *entrySet) map[string]bool { return e.targets }})
	}
	fams = append(fams,
		envFamily{prefix: "RATELIMIT_", suffix: "_LIMIT",
			key:     func(entry string) string { return famRateLimit + "." + entry + ".limit" },
			entries: func(e *entrySet) map[string]bool { return e.buckets }},
		envFamily{prefix: "AUTHZ_ROUTES_", suffix: "_RULES",
			key:     func(entry string) string { return famRoutes + "." + entry + ".rules" },
			entries: func(e *entrySet) map[string]bool { return e.routes }},
		envFamily{prefix: "GITLAB_TOKENS_",
			key:     func(entry string) string { return famGitLabTok + "." + entry },
			entries: func(e *entrySet) map[string]bool { return e.gitlab }},
		envFamily{prefix: "CALLBACKS_TOKENS_",
			key:     func(entry string) string { return famCallbacks + "." + entry },
			entries: func(e *entrySet) map[string]bool { return e.callbacks }},
		envFamily{prefix: "HTTP_TIMEOUT_",
			key:     func(entry string) string { return famHTTP + "." + entry },
			entries: func(e *entrySet) map[string]bool { return e.http }},
	)
	return fams
}

// normEntry is how an env entry is compared with declared entries:
// case-insensitive, and "_" equals "-" (shell names cannot contain "-").
func normEntry(s string) string {
	return strings.ReplaceAll(strings.ToLower(s), "-", "_")
}

// fromEnv maps an environment name (prefix already removed) onto a
// canonical key. Flat items win; then families, whose entry segment is
// matched against entries declared by lower layers (so
// TARGETS_PAYMENTS_DB_READONLY_ACCESSMODE reaches payments-db-readonly),
// and otherwise taken lower-cased as written.
func (km *keymap) fromEnv(name string, declared *entrySet) (string, bool) {
	up := strings.ToUpper(name)
	if k, ok := km.envs[up]; ok {
		return k, true
	}
	for _, f := range km.envFamilies() {
		if !strings.HasPrefix(up, f.prefix) || !strings.HasSuffix(up, f.suffix) || len(up) <= len(f.prefix)+len(f.suffix) {
			continue
		}
		entry := name[len(f.prefix) : len(name)-len(f.suffix)]
		want := normEntry(entry)
		match := ""
		for e := range f.entries(declared) {
			if normEntry(e) == want && (match == "" || e < match) {
				match = e
			}
		}
		if match == "" {
			match = strings.ToLower(entry)
		}
		canon, _, ok := km.canonical(f.key(match))
		return canon, ok
	}
	return "", false
}
