package storetest

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"changeflow/internal/store"
)

// Environment variables of the Galera cluster scripts/test-galera.sh
// starts (through scripts/test-services.sh).
const (
	// EnvGaleraDSNs is one DSN per node, comma-separated.
	EnvGaleraDSNs = "CHANGEFLOW_TEST_GALERA_DSNS"
	// EnvGaleraDir is the cluster's work directory: nodeN/start restarts
	// node N, nodeN/mysqld.pid is its process.
	EnvGaleraDir = "CHANGEFLOW_TEST_GALERA_DIR"
	// EnvGaleraProxy is the host:port of an HAProxy in front of the nodes.
	EnvGaleraProxy = "CHANGEFLOW_TEST_GALERA_PROXY"
	// EnvGalera set to 0 opts out of the cluster (test-services.sh does
	// not start it); the Galera tests then skip even in CI mode.
	EnvGalera = "CHANGEFLOW_TEST_GALERA"
)

// galeraSkipNotice: see skipNotice.
var galeraSkipNotice sync.Once

// GaleraDSNs returns the server DSN (no database) of every node of the
// test cluster. Without a cluster the test skips with one loud line, or
// fails when CHANGEFLOW_TEST_REQUIRE_SERVICES=1 — unless
// CHANGEFLOW_TEST_GALERA=0 opted out on purpose.
func GaleraDSNs(t testing.TB) []string {
	t.Helper()
	raw := os.Getenv(EnvGaleraDSNs)
	if raw == "" {
		msg := "storetest: " + EnvGaleraDSNs + " is not set — Galera tests SKIPPED; run them with scripts/test-services.sh (needs Debian's galera-4)"
		if os.Getenv(EnvGalera) == "0" {
			msg = "storetest: " + EnvGalera + "=0 — Galera tests SKIPPED"
		} else if os.Getenv(EnvRequireServices) == "1" {
			t.Fatal(msg + " (" + EnvRequireServices + "=1 requires them)")
		}
		galeraSkipNotice.Do(func() { fmt.Fprintln(os.Stderr, msg) })
		t.Skip(msg)
	}
	dsns := strings.Split(raw, ",")
	if len(dsns) < 2 {
		t.Fatalf("storetest: %s names %d node(s), want at least 2", EnvGaleraDSNs, len(dsns))
	}
	return dsns
}

// NewGaleraDatabase creates an empty database on the cluster (the DDL
// replicates to every node) and returns its DSN on each node, in node
// order; it is dropped when the test ends.
func NewGaleraDatabase(t testing.TB) []string {
	t.Helper()
	nodes := GaleraDSNs(t)
	cfg, err := mysql.ParseDSN(nodes[0])
	if err != nil {
		t.Fatalf("storetest: %s: %v", EnvGaleraDSNs, err)
	}
	cfg.DBName = ""
	name := databaseName(t.Name())
	exec := func(ctx context.Context, q string) error {
		admin, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			return err
		}
		defer admin.Close()
		_, err = admin.ExecContext(ctx, q)
		return err
	}
	if err := exec(testContext(t), "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		t.Fatalf("storetest: create Galera database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := exec(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
			t.Errorf("storetest: drop Galera database %s: %v", name, err)
		}
	})
	out := make([]string, len(nodes))
	for i, n := range nodes {
		c, err := mysql.ParseDSN(n)
		if err != nil {
			t.Fatalf("storetest: %s: %v", EnvGaleraDSNs, err)
		}
		c.DBName = name
		out[i] = c.FormatDSN()
		// DDL replicates in total order but is applied on the other nodes
		// a moment after the creating node answered: wait until node i
		// has it, or opening the store there fails with 1049.
		WaitApplied(t, out[i])
	}
	return out
}

// WaitApplied returns once the Galera node of dsn has applied every write
// the cluster committed before the call (a read under wsrep_sync_wait).
func WaitApplied(t testing.TB, dsn string) {
	t.Helper()
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	c.DBName = ""
	if c.Params == nil {
		c.Params = map[string]string{}
	}
	c.Params["wsrep_sync_wait"] = "1"
	db, err := sql.Open("mysql", c.FormatDSN())
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	defer db.Close()
	var one int
	if err := db.QueryRowContext(testContext(t), "SELECT 1").Scan(&one); err != nil {
		t.Fatalf("storetest: wait for Galera node %s: %v", c.Addr, err)
	}
}

// OpenGalera returns one store per cluster node on one fresh database,
// migrated (from the first store), closed and dropped when the test ends:
// the twin tests give each contender a store on its own node, as two
// instances of changeflow on two nodes.
func OpenGalera(t testing.TB, opts ...store.Option) []*store.Store {
	t.Helper()
	GaleraDSNs(t)
	GaleraShare(t, false)
	dsns := NewGaleraDatabase(t)
	stores := make([]*store.Store, len(dsns))
	for i, dsn := range dsns {
		stores[i] = OpenDSN(t, store.DriverMySQL, dsn, opts...)
		if !stores[i].Galera() {
			t.Fatalf("storetest: node %d of %s is not a Galera node", i+1, EnvGaleraDSNs)
		}
	}
	if _, err := stores[0].Migrate(testContext(t)); err != nil {
		t.Fatalf("storetest: migrate Galera database: %v", err)
	}
	for _, dsn := range dsns {
		WaitApplied(t, dsn)
	}
	return stores
}

// GaleraProxyDSN returns dsn (a DSN of the test cluster) pointed at the
// HAProxy in front of the cluster instead of at its node.
func GaleraProxyDSN(t testing.TB, dsn string) string {
	t.Helper()
	proxy := os.Getenv(EnvGaleraProxy)
	if proxy == "" {
		msg := "storetest: " + EnvGaleraProxy + " is not set — the Galera proxy test SKIPPED (apt-get install -y haproxy)"
		if os.Getenv(EnvRequireServices) == "1" {
			t.Fatal(msg + " (" + EnvRequireServices + "=1 requires it)")
		}
		t.Skip(msg)
	}
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	c.Addr = proxy
	return c.FormatDSN()
}

// GaleraNodeDir returns the work directory of node n (1-based) of the
// test cluster: its start script and pid file.
func GaleraNodeDir(t testing.TB, n int) string {
	t.Helper()
	dir := os.Getenv(EnvGaleraDir)
	if dir == "" {
		t.Fatalf("storetest: %s is not set", EnvGaleraDir)
	}
	return fmt.Sprintf("%s/node%d", dir, n)
}

// WaitGaleraEvicted waits (up to a minute) until the node of survivorDSN
// sees a primary component of size nodes: the killed node evicted. A node
// restarted before that joins a membership that still lists its own dead
// incarnation, and on a loaded machine it failed to reach a primary view
// and aborted ("failed to open gcomm backend connection: 110") — seen in
// CI. An operator restarting a node waits for the same thing.
//
// A timeout is an error, not a stop: the caller restarts the node all the
// same, so the shared cluster gets its node back for the tests after it.
// The error carries the survivor's own account (its log) and what it
// last reported.
func WaitGaleraEvicted(t testing.TB, survivorDSN string, size int) bool {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	last := "no answer"
	for {
		st, err := store.Open(context.Background(), store.DriverMySQL, survivorDSN)
		if err == nil {
			state, _, err := st.ClusterReady(context.Background())
			_ = st.Close()
			if err == nil && state.Status == "Primary" && state.Size == size {
				return true
			}
			last = fmt.Sprintf("%+v (err %v)", state, err)
		}
		if time.Now().After(deadline) {
			t.Errorf("storetest: the surviving node never saw a primary component of %d; it last said %s\n%s",
				size, last, GaleraNodeLogs(t, 2))
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// GaleraNodeLogs is the end of node n's error log and of its last
// position recovery, for the message of a test that waited in vain for the
// node to rejoin: without them a failed rejoin on a CI machine says only
// "not Synced", and the cause (IST refused, SST fallback, a port taken,
// InnoDB recovery) is lost with the machine.
func GaleraNodeLogs(t testing.TB, n int) string {
	t.Helper()
	dir := GaleraNodeDir(t, n)
	var b strings.Builder
	for _, name := range []string{"recover.log", "error.log"} {
		data, err := os.ReadFile(dir + "/" + name)
		if err != nil {
			fmt.Fprintf(&b, "--- %s: %v\n", name, err)
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		keep := 15
		if name == "error.log" {
			keep = 60
		}
		fmt.Fprintf(&b, "--- last %d lines of node%d/%s\n%s\n", min(keep, len(lines)), n, name, strings.Join(lines[max(0, len(lines)-keep):], "\n"))
	}
	return b.String()
}

// GaleraShare takes the test cluster for the rest of the test, shared with
// other tests, or exclusively (a test that kills a node). Test binaries of
// several packages run at once and share the cluster; the lock is an flock
// on a file in the cluster's directory, so a node killed by one package's
// test never fails another package's. OpenGalera takes it shared.
func GaleraShare(t testing.TB, exclusive bool) {
	t.Helper()
	dir := os.Getenv(EnvGaleraDir)
	if dir == "" {
		return // no cluster: GaleraDSNs skips or fails
	}
	f, err := os.OpenFile(dir+"/tests.lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("storetest: cluster lock: %v", err)
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		t.Fatalf("storetest: cluster lock: %v", err)
	}
	t.Cleanup(func() { _ = f.Close() }) // closing releases the lock
}
