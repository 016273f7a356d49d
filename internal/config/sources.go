package config

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"
)

// envPrefix is the prefix of every environment variable changeflow reads.
const envPrefix = "CHANGEFLOW_"

// envTestPrefix names variables reserved for the test harness
// (CHANGEFLOW_TEST_ETCD, …); they are not configuration and not "unknown".
const envTestPrefix = envPrefix + "TEST_"

// errEmptyFile marks a configuration file that exists but holds nothing.
var errEmptyFile = errors.New("configuration file is empty")

// layer is one source's values under canonical keys.
type layer struct {
	source   string
	values   map[string]any
	declared []string // targets declared with no fields (`name: {}`)
	unknown  []string // keys no item knows, as the source spelled them
}

// newLayer canonicalizes a flat map read from a source. A target named
// with no fields (`legacy-ftp: {}`), or only with misspelled ones, is still
// declared: it exists with every field at its fallback (TEST_WINDOW, so
// restricted), and the misspelling is reported as unknown.
func newLayer(source string, flat map[string]any, km *keymap) layer {
	l := layer{source: source, values: map[string]any{}}
	for _, k := range sortedKeys(flat) {
		canon, declare, ok := km.canonical(k)
		switch {
		case ok && declare != "" && isBlank(flat[k]):
			l.declared = append(l.declared, declare)
		case ok && declare == "":
			l.values[canon] = flat[k]
		default:
			l.unknown = append(l.unknown, source+": "+k)
			if parts := strings.Split(k, "."); len(parts) >= 3 && strings.EqualFold(parts[0], famTargets) {
				l.declared = append(l.declared, parts[1])
			}
		}
	}
	return l
}

// defaultsLayer is the first layer: every item's default, the default rate
// limit bucket, the ops routes' rule codes and the dependency timeouts.
func defaultsLayer(items []item) layer {
	v := map[string]any{}
	for _, it := range items {
		if it.def != "" && !it.noLayer {
			v[it.key] = it.def
		}
	}
	for b, n := range defaultBuckets() {
		v[famRateLimit+"."+strings.ToLower(b)+".limit"] = n // bucket names are case-insensitive
	}
	for r, rules := range defaultRoutes() {
		v[famRoutes+"."+r+".rules"] = rules
	}
	for d, to := range defaultHTTPTimeouts() {
		v[famHTTP+"."+d] = fmtDur(to)
	}
	return layer{source: SourceDefault, values: v}
}

// readFileLayer reads and parses the YAML file with koanf's file provider
// and YAML parser. A zero-length (or whitespace-only) file returns
// errEmptyFile together with an empty layer, so the caller can decide:
// at startup it is a valid empty configuration, on reload it is most likely
// an editor's truncate-then-write caught half way.
func readFileLayer(path string, km *keymap) (layer, error) {
	b, err := file.Provider(path).ReadBytes()
	if err != nil {
		return layer{}, fmt.Errorf("%w: read %s: %w", ErrInvalid, path, err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return layer{source: SourceFile, values: map[string]any{}}, errEmptyFile
	}
	m, err := yaml.Parser().Unmarshal(b)
	if err != nil {
		return layer{}, fmt.Errorf("%w: parse %s: %w", ErrInvalid, path, err)
	}
	k := koanf.New(".")
	if err := k.Load(confmap.Provider(m, ""), nil); err != nil {
		return layer{}, fmt.Errorf("%w: load %s: %w", ErrInvalid, path, err)
	}
	return newLayer(SourceFile, k.All(), km), nil
}

// envLayer reads CHANGEFLOW_* variables through koanf's env provider.
// environ is scanned for every name (families included); getenv is asked
// for each flat item by name, for callers that only have a getenv. An
// empty value counts as unset: a stray `CHANGEFLOW_DATABASE_DSN=` in a
// compose file must not wipe the file's DSN.
func envLayer(environ []string, getenv func(string) string, km *keymap, items []item, declared *entrySet) (layer, error) {
	list := append([]string(nil), environ...)
	if getenv != nil {
		ask := func(name string) {
			if v := getenv(name); v != "" {
				list = append(list, name+"="+v) // later entries win in the provider
			}
		}
		for _, it := range items {
			ask(envPrefix + envName(it.key))
		}
		// A caller with only a getenv (the binary's run) cannot scan the
		// environment, so families are asked for by name too, for every
		// entry a lower layer declares: CHANGEFLOW_RATELIMIT_APPLY_LIMIT
		// and CHANGEFLOW_TARGETS_PAYMENTS_DB_READONLY_ACCESSMODE then
		// work without Environ. Only new entries need Environ.
		for _, f := range km.envFamilies() {
			for entry := range f.entries(declared) {
				ask(envPrefix + f.prefix + strings.ToUpper(strings.ReplaceAll(entry, "-", "_")) + f.suffix)
			}
		}
	}
	var unknown []string
	p := env.Provider(".", env.Opt{
		Prefix:      envPrefix,
		EnvironFunc: func() []string { return list },
		TransformFunc: func(name, value string) (string, any) {
			if value == "" || strings.HasPrefix(strings.ToUpper(name), envTestPrefix) {
				return "", nil
			}
			key, ok := km.fromEnv(strings.TrimPrefix(name, envPrefix), declared)
			if !ok {
				unknown = append(unknown, "env: "+name)
				return "", nil
			}
			return key, value
		},
	})
	k := koanf.New(".")
	if err := k.Load(p, nil); err != nil {
		return layer{}, fmt.Errorf("read environment: %w", err)
	}
	l := newLayer(SourceEnv, k.All(), km)
	sort.Strings(unknown)
	l.unknown = append(unknown, l.unknown...)
	return l, nil
}

// overlayLayer is the program's own highest-priority values (e.g. the
// --local profile), nested or dotted.
func overlayLayer(overlay map[string]any, km *keymap) (layer, error) {
	if len(overlay) == 0 {
		return layer{source: SourceOverlay, values: map[string]any{}}, nil
	}
	k := koanf.New(".")
	if err := k.Load(confmap.Provider(overlay, "."), nil); err != nil {
		return layer{}, fmt.Errorf("load overlay: %w", err)
	}
	return newLayer(SourceOverlay, k.All(), km), nil
}

// merged is the result of layering: values by canonical key, the source of
// each, declared targets and unknown keys.
type merged struct {
	values   map[string]any
	sources  map[string]string
	declared map[string]bool
	unknown  []string
}

// merge layers in order (later wins) with koanf and records which layer
// each key came from.
func merge(layers ...layer) (merged, error) {
	k := koanf.New(".")
	m := merged{sources: map[string]string{}, declared: map[string]bool{}}
	for _, l := range layers {
		if err := k.Load(confmap.Provider(l.values, "."), nil); err != nil {
			return merged{}, fmt.Errorf("merge %s: %w", l.source, err)
		}
		for key := range l.values {
			m.sources[key] = l.source
		}
		for _, d := range l.declared {
			m.declared[d] = true
		}
		m.unknown = append(m.unknown, l.unknown...)
	}
	m.values = k.All()
	return m, nil
}

// entriesOf lists the family entries present in some layers, for env-name
// matching.
func entriesOf(layers ...layer) *entrySet {
	e := newEntrySet()
	for _, l := range layers {
		for k := range l.values {
			e.add(k)
		}
		for _, d := range l.declared {
			e.targets[d] = true
		}
	}
	return e
}

// fingerprint identifies merged input, secrets included (it never leaves
// memory), so an unchanged reload is recognised and skipped.
func (m merged) fingerprint() string {
	var b strings.Builder
	for _, k := range sortedKeys(m.values) {
		fmt.Fprintf(&b, "%s=%#v@%s\n", k, m.values[k], m.sources[k])
	}
	for _, d := range sortedKeys(m.declared) {
		fmt.Fprintf(&b, "declare %s\n", d)
	}
	return b.String()
}
