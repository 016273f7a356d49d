package config

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdSource reads one key prefix of an etcd cluster. Keys map to dotted
// configuration keys by their path below the prefix: with prefix
// /changeflow, /changeflow/workflow/approveFirst is workflow.approveFirst
// (a dotted last segment, /changeflow/workflow.approveFirst, maps the same
// way). Values are text, parsed like environment values.
type etcdSource struct {
	cli     *clientv3.Client
	prefix  string        // without trailing "/"
	timeout time.Duration // per Get
	rev     atomic.Int64  // header revision of the last successful Get
	fresh   atomic.Bool   // the last Get succeeded and no watch broke since
	// stale is signalled (never blocking) when a Get fails, so that the
	// watch loop, which otherwise only hears about etcd changes, retries
	// the read instead of serving the cached layer until the next change.
	stale chan struct{}
	// failGets, when positive, fails that many Gets before they are sent
	// (tests: a transient read failure while the watch is healthy).
	failGets atomic.Int32
}

// connectEtcd creates the client when config.etcd.endpoints is set by the
// layers below etcd (defaults, file, env, overlay); etcd cannot configure
// its own connection. The client dials lazily, so this never blocks.
//
// It returns the snapshot of those layers it read the settings from (nil
// when they do not build): without an etcd client it is the snapshot
// assemble would build from the same layers, and Load keeps it instead of
// merging and building a second time.
func (m *Manager) connectEtcd(b base) (*Snapshot, error) {
	mg, err := merge(b.defaults, b.file, b.env, b.overlay)
	if err != nil {
		return nil, err
	}
	s, err := m.b.build(mg, m.opts.Now())
	if err != nil {
		// The full build reports the same error with the etcd layer added.
		return nil, nil
	}
	endpoints, _ := s.List(KeyEtcdEndpoints)
	if len(endpoints) == 0 {
		return s, nil
	}
	prefix, _ := s.String(KeyEtcdPrefix)
	timeout, _ := s.Duration(KeyEtcdDialTimeout)
	user, _ := s.String(KeyEtcdUsername)
	pass, _ := s.String(KeyEtcdPassword)
	tlsCfg, err := etcdTLS(s, endpoints)
	if err != nil {
		return s, err
	}
	if tlsCfg == nil && user != "" {
		m.log.Warn("config: etcd password authentication without TLS; the password crosses the network in clear (set config.etcd.tls.*)")
	}
	cli, err := clientv3.New(clientv3.Config{
		TLS:                  tlsCfg,
		Endpoints:            endpoints,
		DialTimeout:          timeout,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: timeout,
		Username:             user,
		Password:             pass,
		// The client's own zap logging would bypass slog; its errors reach
		// us through Get and Watch, which we log.
		Logger: zap.NewNop(),
	})
	if err != nil {
		return s, fmt.Errorf("etcd client for %v: %w", endpoints, err)
	}
	m.etcd = &etcdSource{cli: cli, prefix: prefix, timeout: timeout, stale: make(chan struct{}, 1)}
	m.log.Info("config: etcd config center", "endpoints", endpoints, "prefix", prefix+"/", "tls", tlsCfg != nil, "auth", user != "")
	return s, nil
}

// fetch reads every key under the prefix, bounded by the dial timeout so an
// unreachable cluster cannot hang Load or Reload.
func (e *etcdSource) fetch(ctx context.Context, km *keymap) (layer, error) {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	var (
		resp *clientv3.GetResponse
		err  error
	)
	if e.failGets.Add(-1) >= 0 {
		err = errors.New("injected failure")
	} else {
		e.failGets.Store(0)
		resp, err = e.cli.Get(ctx, e.prefix+"/", clientv3.WithPrefix())
	}
	if err != nil {
		e.fresh.Store(false)
		select {
		case e.stale <- struct{}{}:
		default:
		}
		return layer{}, fmt.Errorf("etcd get %s/: %w", e.prefix, err)
	}
	flat := make(map[string]any, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		rel := strings.Trim(strings.TrimPrefix(string(kv.Key), e.prefix+"/"), "/")
		if rel == "" {
			continue
		}
		flat[strings.ReplaceAll(rel, "/", ".")] = string(kv.Value)
	}
	l := newLayer(SourceEtcd, flat, km)
	for k := range l.values {
		if strings.HasPrefix(k, "config.etcd.") {
			delete(l.values, k)
			l.unknown = append(l.unknown, "etcd: "+k+" (config.etcd.* cannot come from etcd)")
		}
	}
	e.rev.Store(resp.Header.Revision)
	e.fresh.Store(true)
	return l, nil
}

func (e *etcdSource) close() error {
	// Close reports the cancellation of our own watches; that is not a
	// failure.
	if err := e.cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("close etcd client: %w", err)
	}
	return nil
}

// etcdLoop keeps the etcd layer current: while the last Get failed it
// retries (through Reload) with capped exponential backoff; once fresh it
// watches the prefix from the next revision and turns every event into a
// debounced reload. A broken watch (compaction, cluster loss) marks the
// layer stale so the next round re-reads everything before watching again.
// So does a failed Get while the watch is healthy — the reload an event
// kicked timed out, say: the watch has delivered that event and will not
// again, so waiting on it would serve the cached layer until the next
// change; the loop leaves the watch and retries the read at once.
func (m *Manager) etcdLoop(ctx context.Context) {
	defer m.wg.Done()
	const first, most = 250 * time.Millisecond, 30 * time.Second
	backoff := first
	wait := func() bool {
		t := time.NewTimer(backoff)
		defer t.Stop()
		backoff = min(backoff*2, most)
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	for ctx.Err() == nil {
		if !m.etcd.fresh.Load() {
			_ = m.Reload(ctx) // logs its own failures
			if !m.etcd.fresh.Load() {
				if !wait() {
					return
				}
				continue
			}
		}
		backoff = first
		rev := m.etcd.rev.Load()
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		wc := m.etcd.cli.Watch(wctx, m.etcd.prefix+"/", clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		stale := m.watchEtcd(wc)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if stale {
			// fresh is false: the top of the loop re-reads now, then
			// watches from that read's revision (nothing is missed).
			m.log.Warn("config: etcd read failed while watching; re-reading", "prefix", m.etcd.prefix+"/")
			continue
		}
		m.etcd.fresh.Store(false)
		if !wait() {
			return
		}
	}
}

// watchEtcd turns the watch's events into kicks until the watch ends or
// breaks (false) or a Get failed meanwhile and left the layer stale (true).
// A stale signal from a failure a later Get already repaired is ignored.
func (m *Manager) watchEtcd(wc clientv3.WatchChan) (stale bool) {
	for {
		select {
		case resp, ok := <-wc:
			if !ok {
				return false
			}
			if err := resp.Err(); err != nil {
				m.log.Warn("config: etcd watch broke; re-reading", "prefix", m.etcd.prefix+"/", "err", err)
				return false
			}
			if len(resp.Events) > 0 {
				m.kick()
			}
		case <-m.etcd.stale:
			if !m.etcd.fresh.Load() {
				return true
			}
		}
	}
}

// etcdTLS is the client's TLS configuration from config.etcd.tls.*, nil
// for plaintext. TLS is on when any endpoint is https:// or a CA or client
// certificate is configured. Every setting that cannot be honoured — an
// unreadable file, a CA file without a certificate, a certificate without
// its key, an http:// endpoint next to TLS settings — is an error, so the
// config center is not used at all rather than reached in plaintext or
// without the identity the operator configured.
func etcdTLS(s *Snapshot, endpoints []string) (*tls.Config, error) {
	ca, _ := s.String(KeyEtcdTLSCA)
	cert, _ := s.String(KeyEtcdTLSCert)
	key, _ := s.String(KeyEtcdTLSKey)
	https, plain := false, false
	for _, e := range endpoints {
		switch {
		case strings.HasPrefix(e, "https://"):
			https = true
		case strings.HasPrefix(e, "http://"):
			plain = true
		}
	}
	if !https && ca == "" && cert == "" && key == "" {
		return nil, nil
	}
	if plain {
		return nil, fmt.Errorf("%s: an http:// endpoint with TLS configured; use https:// or host:port", KeyEtcdEndpoints)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", KeyEtcdTLSCA, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: %s holds no PEM certificate", KeyEtcdTLSCA, ca)
		}
		cfg.RootCAs = pool
	}
	switch {
	case cert != "" && key != "":
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", KeyEtcdTLSCert, KeyEtcdTLSKey, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	case cert != "" || key != "":
		return nil, fmt.Errorf("%s and %s must be set together", KeyEtcdTLSCert, KeyEtcdTLSKey)
	}
	return cfg, nil
}
