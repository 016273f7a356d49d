package config

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"changeflow/internal/domain"
)

// testEtcd returns a client to the throwaway etcd that
// scripts/test-services.sh starts, and a key prefix unique to this test.
func testEtcd(t *testing.T) (endpoint, prefix string, cli *clientv3.Client) {
	t.Helper()
	endpoint = os.Getenv("CHANGEFLOW_TEST_ETCD")
	if endpoint == "" {
		if os.Getenv("CHANGEFLOW_TEST_REQUIRE_SERVICES") == "1" {
			t.Fatal("etcd: CHANGEFLOW_TEST_ETCD not set but CHANGEFLOW_TEST_REQUIRE_SERVICES=1")
		}
		t.Skip("etcd: CHANGEFLOW_TEST_ETCD not set — run scripts/test-services.sh go test ./internal/config/...")
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	prefix = fmt.Sprintf("/cftest/%s-%d", strings.ReplaceAll(t.Name(), "/", "_"), time.Now().UnixNano())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = cli.Delete(ctx, prefix, clientv3.WithPrefix())
	})
	return endpoint, prefix, cli
}

func put(t *testing.T, cli *clientv3.Client, key, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := cli.Put(ctx, key, value)
	require.NoError(t, err)
}

func etcdOptions(t *testing.T, endpoint, prefix, file string) Options {
	o := testOptions(file)
	o.Environ = []string{"CHANGEFLOW_CONFIG_ETCD_ENDPOINTS=" + endpoint, "CHANGEFLOW_CONFIG_ETCD_PREFIX=" + prefix + "/"}
	return o
}

func TestEtcdValuesAreReadAtLoad(t *testing.T) {
	ep, prefix, cli := testEtcd(t)
	put(t, cli, prefix+"/workflow/approveFirst", "true")           // slash form
	put(t, cli, prefix+"/batch.maxRequests", "7")                  // dotted form maps the same way
	put(t, cli, prefix+"/targets/prod-console/accessMode", "open") // families
	put(t, cli, prefix+"/ratelimit/apply/limit", "-1")             // fallbacks apply to etcd values too
	put(t, cli, prefix+"/config/etcd/prefix", "/elsewhere")        // etcd cannot redirect itself
	put(t, cli, prefix+"-staging/workflow/approveFirst", "false")  // a sibling prefix is not ours
	put(t, cli, prefix+"/reconcile/minAge", "")                    // an empty etcd value is set, and falls back

	s := mustLoad(t, etcdOptions(t, ep, prefix, "")).Current()
	approve, r := s.Bool(KeyWorkflowApproveFirst)
	require.True(t, approve)
	require.Equal(t, SourceEtcd, r.Source)
	require.Equal(t, 7, s.Batch().MaxRequests)
	tg, ok := s.Target("prod-console")
	require.True(t, ok)
	require.Equal(t, domain.AccessOpen, tg.AccessMode)
	limit, _, r := s.RateLimit("apply")
	require.Zero(t, limit)
	require.Equal(t, SourceEtcd, r.Source)
	require.Equal(t, "fell back: value '-1' ≤ 0 → no limiting", r.Reason)
	pfx, _ := s.String(KeyEtcdPrefix)
	require.Equal(t, prefix, pfx)
	require.Contains(t, s.Unknown(), "etcd: config.etcd.prefix (config.etcd.* cannot come from etcd)")
	_, r = s.Duration(KeyReconcileMinAge)
	require.True(t, r.FellBack)
	require.Equal(t, SourceEtcd, r.Source)
}

func TestEtcdSitsBetweenEnvAndOverlay(t *testing.T) {
	ep, prefix, cli := testEtcd(t)
	put(t, cli, prefix+"/batch/maxRequests", "30")
	file := writeFile(t, t.TempDir(), "changeflow.yaml", "batch:\n  maxRequests: 10\n  maxSplitDepth: 2\n")

	o := etcdOptions(t, ep, prefix, file)
	o.Environ = append(o.Environ, "CHANGEFLOW_BATCH_MAXREQUESTS=20", "CHANGEFLOW_BATCH_MAXSPLITDEPTH=4")
	s := mustLoad(t, o).Current()
	n, r := s.Int(KeyBatchMaxRequests)
	require.Equal(t, 30, n, "etcd beats env and file")
	require.Equal(t, SourceEtcd, r.Source)
	d, r := s.Int(KeyBatchMaxSplitDepth)
	require.Equal(t, 4, d, "env still beats the file where etcd is silent")
	require.Equal(t, SourceEnv, r.Source)

	o.Overlay = map[string]any{"batch.maxRequests": 40}
	n, r = mustLoad(t, o).Current().Int(KeyBatchMaxRequests)
	require.Equal(t, 40, n, "the overlay beats etcd")
	require.Equal(t, SourceOverlay, r.Source)
}

func TestEtcdWatchAppliesChanges(t *testing.T) {
	t.Parallel()
	ep, prefix, cli := testEtcd(t)
	file := writeFile(t, t.TempDir(), "changeflow.yaml", "batch:\n  maxRequests: 10\n")
	logs := &logBuffer{}
	o := etcdOptions(t, ep, prefix, file)
	o.Logger = logs.logger()
	m := mustLoad(t, o)
	ch := swaps(m)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, m.Watch(ctx))

	put(t, cli, prefix+"/batch/maxRequests", "11")
	waitFor(t, ch, "etcd value 11 applies", func(s *Snapshot) bool { return s.Batch().MaxRequests == 11 })

	put(t, cli, prefix+"/database/driver", "oracle")
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "database.driver 'oracle' (from etcd)") }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, 11, m.Current().Batch().MaxRequests, "a bad deployment key from etcd keeps the last good snapshot")

	delCtx, delCancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer delCancel()
	_, err := cli.Delete(delCtx, prefix+"/", clientv3.WithPrefix())
	require.NoError(t, err)
	s := waitFor(t, ch, "deleting the etcd keys falls back to the file", func(s *Snapshot) bool { return s.Batch().MaxRequests == 10 })
	_, r := s.Int(KeyBatchMaxRequests)
	require.Equal(t, SourceFile, r.Source)
}

// TestEtcdReadFailingWhileWatchingIsRetried: the reload an etcd event
// kicks fails to read etcd (a Get timing out on a loaded host, injected
// here) while the watch itself stays healthy. The watch has delivered that
// event and will not again, so the loop must retry the read on its own:
// the new value applies without a further change. (Seen as a flake of
// TestEtcdThatComesUpLaterIsPickedUp under load, where the Get's 300 ms
// dial timeout expired.)
func TestEtcdReadFailingWhileWatchingIsRetried(t *testing.T) {
	t.Parallel()
	ep, prefix, cli := testEtcd(t)
	m := mustLoad(t, etcdOptions(t, ep, prefix, ""))
	ch := swaps(m)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, m.Watch(ctx))
	put(t, cli, prefix+"/batch/maxRequests", "21")
	waitFor(t, ch, "the watch is live: 21 applies", func(s *Snapshot) bool { return s.Batch().MaxRequests == 21 })

	m.etcd.failGets.Store(1)
	put(t, cli, prefix+"/batch/maxRequests", "22")
	waitFor(t, ch, "22 applies after the failed read, with no further change", func(s *Snapshot) bool { return s.Batch().MaxRequests == 22 })
	require.LessOrEqual(t, m.etcd.failGets.Load(), int32(0), "the injected failure was met")
}

func TestEtcdOutageKeepsItsLastValues(t *testing.T) {
	t.Parallel()
	ep, prefix, cli := testEtcd(t)
	put(t, cli, prefix+"/workflow/approveFirst", "true")
	file := writeFile(t, t.TempDir(), "changeflow.yaml", "batch:\n  maxRequests: 10\n")
	logs := &logBuffer{}
	o := etcdOptions(t, ep, prefix, file)
	// The first read must reach etcd: with 500 ms it timed out on a loaded
	// CI machine and the load fell back to the file. The outage below
	// fails at once (a closed client), so a longer timeout costs nothing.
	o.Environ = append(o.Environ, "CHANGEFLOW_CONFIG_ETCD_DIALTIMEOUT=5s")
	o.Logger = logs.logger()
	m := mustLoad(t, o)
	require.True(t, m.Current().Workflow().ApproveFirst, "the first load read etcd")

	// Simulate the outage by closing the manager's client: every Get fails.
	require.NoError(t, m.etcd.cli.Close())
	writeFile(t, filepath.Dir(file), filepath.Base(file), "batch:\n  maxRequests: 12\n")
	require.NoError(t, m.Reload(context.Background()))
	s := m.Current()
	require.Equal(t, 12, s.Batch().MaxRequests, "file changes still apply")
	approve, r := s.Bool(KeyWorkflowApproveFirst)
	require.True(t, approve, "etcd's last known values stay")
	require.Equal(t, SourceEtcd, r.Source)
	require.Contains(t, logs.String(), "etcd unreachable; using its last known values")
}

// TestUnreachableEtcdDoesNotBlockStartup needs no etcd: it points at a
// port nobody listens on.
func TestUnreachableEtcdDoesNotBlockStartup(t *testing.T) {
	t.Parallel()
	file := writeFile(t, t.TempDir(), "changeflow.yaml", "batch:\n  maxRequests: 10\nconfig:\n  etcd:\n    endpoints: [\"http://127.0.0.1:1\"]\n    dialTimeout: 300ms\n")
	logs := &logBuffer{}
	o := testOptions(file)
	o.Logger = logs.logger()
	start := time.Now()
	m := mustLoad(t, o)
	require.Less(t, time.Since(start), 5*time.Second, "Load waits at most about one dial timeout")
	require.Equal(t, 10, m.Current().Batch().MaxRequests)
	require.Contains(t, logs.String(), "etcd unreachable")

	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, m.Watch(ctx))
	// The watch loop keeps retrying in the background; a file change still
	// applies meanwhile.
	ch := swaps(m)
	writeFile(t, filepath.Dir(file), filepath.Base(file), "batch:\n  maxRequests: 11\nconfig:\n  etcd:\n    endpoints: [\"http://127.0.0.1:1\"]\n    dialTimeout: 300ms\n")
	waitFor(t, ch, "the file change applies while etcd is down", func(s *Snapshot) bool { return s.Batch().MaxRequests == 11 })
	cancel()
	closed := make(chan error, 1)
	go func() { closed <- m.Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Close hung while etcd was unreachable")
	}
}

// TestEtcdThatComesUpLaterIsPickedUp starts with etcd unreachable (a port
// nobody listens on), then opens a TCP proxy to the real etcd on that port:
// the watch loop's retries must load the etcd values without a restart.
func TestEtcdThatComesUpLaterIsPickedUp(t *testing.T) {
	t.Parallel()
	ep, prefix, cli := testEtcd(t)
	put(t, cli, prefix+"/batch/maxRequests", "33")
	upstream := strings.TrimPrefix(ep, "http://")

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // nothing listens there now

	o := etcdOptions(t, "http://"+addr, prefix, "")
	// The timeout also bounds each read once etcd is up: 300 ms made the
	// reload after the watch's event time out on a loaded machine, and
	// the retries' backoff outlasted waitFor. 2 s is still a short start
	// (nothing listens: Load gives up after it).
	o.Environ = append(o.Environ, "CHANGEFLOW_CONFIG_ETCD_DIALTIMEOUT=2s")
	m := mustLoad(t, o)
	require.Equal(t, 50, m.Current().Batch().MaxRequests, "started without etcd")
	ch := swaps(m)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, m.Watch(ctx))

	l, err = net.Listen("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	go proxy(l, upstream)

	waitFor(t, ch, "etcd values arrive once it is reachable", func(s *Snapshot) bool { return s.Batch().MaxRequests == 33 })
	put(t, cli, prefix+"/batch/maxRequests", "34")
	waitFor(t, ch, "and the watch follows changes", func(s *Snapshot) bool { return s.Batch().MaxRequests == 34 })
}

// proxy forwards every connection accepted on l to upstream.
func proxy(l net.Listener, upstream string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			u, err := net.Dial("tcp", upstream)
			if err != nil {
				return
			}
			defer u.Close()
			go func() { _, _ = io.Copy(u, c) }()
			_, _ = io.Copy(c, u)
		}()
	}
}
