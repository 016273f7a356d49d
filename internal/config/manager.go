package config

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Options says where configuration comes from. Everything the package
// would otherwise take from the process (environment, host name, pid,
// clock) is injected, so tests are deterministic and parallel.
type Options struct {
	// File is the YAML file (changeflow.yaml); "" means no file.
	File string
	// Getenv looks up one variable; it is asked for every flat item's
	// CHANGEFLOW_ name. May be nil. Never os.Getenv directly: tests inject.
	Getenv func(string) string
	// Environ is a "KEY=VALUE" list scanned for CHANGEFLOW_* names,
	// including families (targets, buckets, routes, tokens). May be nil.
	Environ []string
	// Logger receives fall-back, reload and etcd messages; nil discards.
	Logger *slog.Logger
	// Overlay holds the program's own values, highest priority (e.g. the
	// --local profile). Keys may be dotted or nested. Optional.
	Overlay map[string]any

	// Hostname and Pid compute the default instance.id; nil means
	// os.Hostname and os.Getpid.
	Hostname func() (string, error)
	Pid      func() int
	// Now stamps LoadedAt; nil means time.Now.
	Now func() time.Time
	// RefuseWeakSecrets refuses (falls back to unset) every token that is
	// one of the simulators' well-known values, shorter than its minimum,
	// or the same as another token, and lists it in
	// Snapshot.RefusedSecrets. serve sets it outside --local and refuses to
	// start on such a snapshot; on reload the refusal is the fallback.
	RefuseWeakSecrets bool
	// Debounce is how long Watch waits after the last file or etcd event
	// before reloading, so an editor's burst of writes is read once; 0
	// means 200ms.
	Debounce time.Duration
}

// Manager owns the current Snapshot and reloads it. Current is lock-free;
// reloads are serialized.
type Manager struct {
	opts Options
	log  *slog.Logger
	b    *builder
	cur  atomic.Pointer[Snapshot]

	mu           sync.Mutex // serializes reloads; guards the fields below
	lastFileFull bool       // the last accepted file had content
	etcd         *etcdSource
	etcdCache    layer // last good etcd layer, used while etcd is unreachable

	subMu sync.Mutex
	subs  []func(old, new *Snapshot)

	trigger   chan struct{}
	watching  atomic.Bool
	stopMu    sync.Mutex
	stop      context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// Load reads every source and returns a Manager holding snapshot version 1.
// It fails only when the program must not start: the file is unreadable
// or not valid YAML, or a deployment key is unusable (database.driver not
// sqlite|mysql, no DSN for mysql). Every other problem falls back and is
// reported in the snapshot. An unreachable etcd does not fail Load: it
// waits at most config.etcd.dialTimeout, starts from the other sources,
// and Watch keeps retrying.
func Load(ctx context.Context, opts Options) (*Manager, error) {
	opts = withDefaults(opts)
	m := &Manager{
		opts:    opts,
		log:     opts.Logger,
		b:       newBuilder(instanceID(opts)),
		trigger: make(chan struct{}, 1),
	}
	m.b.refuseWeak = opts.RefuseWeakSecrets
	base, err := m.readBase(true)
	if err != nil {
		return nil, fmt.Errorf("load configuration: %w", err)
	}
	s, err := m.connectEtcd(base)
	if err != nil {
		m.log.Error("config: etcd client not created; continuing without the config center", "err", err)
	}
	// Without an etcd layer the snapshot connectEtcd built is the one
	// assemble would build again; merging and building are most of a
	// Load's CPU.
	if m.etcd != nil || s == nil {
		if s, err = m.assemble(ctx, base); err != nil {
			_ = m.Close()
			return nil, fmt.Errorf("load configuration: %w", err)
		}
	}
	s.version = 1
	m.lastFileFull = base.fileFull
	m.cur.Store(s)
	m.logLoaded(s)
	return m, nil
}

func withDefaults(o Options) Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Hostname == nil {
		o.Hostname = os.Hostname
	}
	if o.Pid == nil {
		o.Pid = os.Getpid
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Debounce <= 0 {
		o.Debounce = 200 * time.Millisecond
	}
	return o
}

// instanceID is host name + "-" + pid: unique per process on one host, and
// readable in logs and lease rows.
func instanceID(o Options) string {
	host, err := o.Hostname()
	if err != nil || host == "" {
		host = "changeflow"
	}
	return host + "-" + strconv.Itoa(o.Pid())
}

// Current returns the snapshot in force. It is an atomic load: call it per
// request and read everything for that request from the one snapshot.
func (m *Manager) Current() *Snapshot { return m.cur.Load() }

// Subscribe registers fn to be called after each successful swap, in
// order, from the goroutine that reloaded. fn must be quick and must not
// call Reload (reloads are serialized and it would deadlock).
func (m *Manager) Subscribe(fn func(old, new *Snapshot)) {
	m.subMu.Lock()
	m.subs = append(m.subs, fn)
	m.subMu.Unlock()
}

// Reload re-reads every source now. On an invalid file or an unusable
// deployment key it keeps the last good snapshot, logs why at error and
// returns the error. A reload that changes nothing keeps the current
// snapshot and notifies nobody.
func (m *Manager) Reload(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	base, err := m.readBase(false)
	if err != nil {
		m.log.Error("config: reload failed; keeping the last good configuration", "version", m.cur.Load().version, "err", err)
		return fmt.Errorf("reload configuration: %w", err)
	}
	s, err := m.assemble(ctx, base)
	if err != nil {
		m.log.Error("config: reload failed; keeping the last good configuration", "version", m.cur.Load().version, "err", err)
		return fmt.Errorf("reload configuration: %w", err)
	}
	m.lastFileFull = base.fileFull
	old := m.cur.Load()
	if s.fingerprint == old.fingerprint {
		return nil
	}
	s.version = old.version + 1
	m.cur.Store(s)
	m.logRestartOnly(old, s)
	m.logLoaded(s)

	m.subMu.Lock()
	subs := slices.Clone(m.subs)
	m.subMu.Unlock()
	for _, fn := range subs {
		fn(old, s)
	}
	return nil
}

// base is the layers below etcd, plus the overlay that goes above it.
type base struct {
	defaults, file, env, overlay layer
	fileFull                     bool
}

// readBase reads defaults, file, env and overlay. startup says whether an
// empty file is acceptable: at startup it is a valid (empty) configuration;
// on reload, after a file with content, it is almost always an editor's
// truncate-then-write caught half way, and swapping to defaults would
// close every target for a moment.
func (m *Manager) readBase(startup bool) (base, error) {
	var b base
	b.defaults = defaultsLayer(m.b.items)
	b.file = layer{source: SourceFile, values: map[string]any{}}
	if m.opts.File != "" {
		l, err := readFileLayer(m.opts.File, m.b.km)
		switch {
		case errors.Is(err, errEmptyFile):
			if !startup && m.lastFileFull {
				return base{}, fmt.Errorf("%w: %s is empty (partial write?)", ErrInvalid, m.opts.File)
			}
		case err != nil:
			return base{}, err
		default:
			b.fileFull = true
		}
		b.file = l
	}
	var err error
	b.env, err = envLayer(m.opts.Environ, m.opts.Getenv, m.b.km, m.b.items, entriesOf(b.defaults, b.file))
	if err != nil {
		return base{}, err
	}
	b.overlay, err = overlayLayer(m.opts.Overlay, m.b.km)
	if err != nil {
		return base{}, err
	}
	return b, nil
}

// assemble adds the etcd layer (fresh, or the last good one while etcd is
// unreachable) and builds the snapshot.
func (m *Manager) assemble(ctx context.Context, b base) (*Snapshot, error) {
	layers := []layer{b.defaults, b.file, b.env}
	if m.etcd != nil {
		l, err := m.etcd.fetch(ctx, m.b.km)
		if err != nil {
			m.log.Warn("config: etcd unreachable; using its last known values", "prefix", m.etcd.prefix, "keys", len(m.etcdCache.values), "err", err)
			l = m.etcdCache
		} else {
			m.etcdCache = l
		}
		layers = append(layers, l)
	}
	layers = append(layers, b.overlay)
	mg, err := merge(layers...)
	if err != nil {
		return nil, err
	}
	return m.b.build(mg, m.opts.Now())
}

// logLoaded logs a new snapshot: one line, plus one warning per fall-back
// and per unknown key, so misconfiguration is visible where operators look.
func (m *Manager) logLoaded(s *Snapshot) {
	m.log.Info("config: loaded", "config", s)
	for _, r := range s.FellBack() {
		m.log.Warn("config: item fell back", "key", r.Key, "value", r.Value, "source", r.Source, "reason", r.Reason)
	}
	for _, k := range s.unknown {
		m.log.Warn("config: unknown key ignored (misspelled?)", "key", k)
	}
}

// logRestartOnly warns about changed keys that are read once at startup:
// the snapshot shows the new value, the process still runs on the old.
func (m *Manager) logRestartOnly(old, s *Snapshot) {
	for _, key := range sortedKeys(s.restartKey) {
		if !reflect.DeepEqual(old.vals[key], s.vals[key]) {
			m.log.Warn("config: changed value takes effect after a restart", "key", key, "value", s.res[key].Value)
		}
	}
}

// Close stops Watch and releases the etcd client. Safe to call more than
// once.
func (m *Manager) Close() error {
	var err error
	m.closeOnce.Do(func() {
		m.stopMu.Lock()
		if m.stop != nil {
			m.stop()
		}
		m.stopMu.Unlock()
		m.wg.Wait()
		if m.etcd != nil {
			err = m.etcd.close()
		}
	})
	return err
}
