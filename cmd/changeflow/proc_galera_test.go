package main

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	osexec "os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// TestServeThreeInstancesOnGaleraNodeKilled runs the three-instance world
// on the 3-node Galera test cluster, every instance behind the HAProxy of
// the documented single-writer topology (database.syncWait 1):
//
//   - three `changeflow migrate` processes, one per node, migrate the
//     fresh database at once (the lease lock the cluster certifies);
//   - 150 requests (50 accounts × 3 batching targets) are submitted, and
//     while their rounds run the node behind the proxy is killed -9 and
//     restarted (IST); meanwhile every instance is polled for a request's
//     status: each answer is 200 or 503 RETRY_LATER, never a 500;
//   - each request's status is read through another instance right after
//     its 202: never a stale 404;
//   - then everything converges as on one server: every request VALIDATED
//     and flipped once, each in exactly one SUCCEEDED batch, never two
//     active batches in the sampler, the binding files on main exact;
//   - the instances answer again within seconds of the loss (logged).
//
// Not parallel: other tests of this binary must not see the node go.
func TestServeThreeInstancesOnGaleraNodeKilled(t *testing.T) {
	runGaleraWorld(t, false)
}

// TestServeThreeInstancesDirectOnThreeGaleraNodes is the multi-writer
// topology: each instance's DSN names its own node, so rounds, callbacks,
// settlements and flips of the same batches are written on three nodes at
// once and every cross-node conflict is a certification abort (1213)
// re-run by the store. Concurrent migrations on the three nodes, 150
// requests each read back at once through another node (no stale 404:
// database.syncWait), the same convergence and the same files on main; no
// node is killed (the loss is the proxied test's).
func TestServeThreeInstancesDirectOnThreeGaleraNodes(t *testing.T) {
	runGaleraWorld(t, true)
}

// runGaleraWorld is both tests: direct puts instance i on node i, else all
// three sit behind the proxy and node 1 is killed mid-run.
func runGaleraWorld(t *testing.T, direct bool) {
	storetest.GaleraDSNs(t)
	storetest.GaleraShare(t, true) // it kills a node of the shared cluster
	dsns := storetest.NewGaleraDatabase(t)
	proxied := storetest.GaleraProxyDSN(t, dsns[0])

	// Concurrent migrations, one per node, as three instances starting at
	// once would run them.
	var wg sync.WaitGroup
	outs := make([]string, len(dsns))
	errs := make([]error, len(dsns))
	for i, dsn := range dsns {
		wg.Go(func() {
			dir := t.TempDir()
			file := dir + "/migrate.yaml"
			writeConfig(t, file, fmt.Sprintf("database:\n  driver: mysql\n  dsn: %q\n", dsn))
			cmd := osexec.Command(changeflowBinary(t), "migrate", "--config", file)
			cmd.Env = childEnv()
			out, err := cmd.CombinedOutput()
			outs[i], errs[i] = string(out), err
		})
	}
	wg.Wait()
	applied := 0
	for i := range dsns {
		if errs[i] != nil {
			t.Fatalf("migrate on node %d: %v\n%s", i+1, errs[i], outs[i])
		}
		if strings.Contains(outs[i], "applied") {
			applied++
		}
	}
	if applied != 1 {
		t.Fatalf("%d of the concurrent migrators applied migrations, want exactly 1:\n%s", applied, strings.Join(outs, "\n"))
	}

	st := storetest.OpenDSN(t, store.DriverMySQL, proxied, store.WithSyncWait(1))
	env := []string{"CHANGEFLOW_DATABASE_DSN=" + proxied, "CHANGEFLOW_DATABASE_SYNCWAIT=1"}
	envs := [][]string{env, env, env}
	if direct {
		for i, dsn := range dsns {
			envs[i] = []string{"CHANGEFLOW_DATABASE_DSN=" + dsn, "CHANGEFLOW_DATABASE_SYNCWAIT=1"}
		}
	}
	w := newManyWorldOn(t, 50, `workflow:
  approveFirst: true
  workers: 4
  queueSize: 200
  leaseDuration: 5s
batch:
  interval: 100ms
  maxRequests: 10
`, []string{"grouped-1", "grouped-2", "grouped-3"}, true, proxied, st, envs, !direct)
	w.readBack = true
	w.submitAll()
	// database.syncWait 1: a status read through another instance (direct:
	// another node) right after the 202 sees the request.
	if n := w.staleReads.Load(); n > 0 {
		t.Errorf("%d of %d status reads right after the 202, through another instance, answered 404", n, len(w.reqs))
	}
	if direct {
		w.untilAllValidated()
		w.assertConverged()
		t.Logf("150 requests through three instances direct on three nodes: wall time %v", time.Since(w.start).Round(time.Millisecond))
		return
	}

	// Poll every instance for one request's status throughout the loss.
	var polls, unavailable, failures atomic.Int64
	var lastOK atomic.Int64 // unix nanos of the last 200
	stopPoll := make(chan struct{})
	var pollers sync.WaitGroup
	var stopOnce sync.Once
	stopPollers := func() { stopOnce.Do(func() { close(stopPoll) }); pollers.Wait() }
	t.Cleanup(stopPollers) // before the instances stop: a shutdown is not a node loss
	for _, in := range w.instances {
		pollers.Go(func() {
			r := w.reqs[0]
			for {
				select {
				case <-stopPoll:
					return
				case <-time.After(20 * time.Millisecond):
				}
				req, _ := http.NewRequest(http.MethodGet, in.base+"/api/requests/"+r.op, nil)
				req.Header.Set("X-Auth-Request-User", r.user)
				resp, err := procClient.Do(req)
				if err != nil {
					continue
				}
				resp.Body.Close()
				polls.Add(1)
				switch {
				case resp.StatusCode == http.StatusOK:
					lastOK.Store(time.Now().UnixNano())
				case resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "":
					unavailable.Add(1)
				default:
					failures.Add(1)
					t.Errorf("%s answered %d during the node loss", in.id, resp.StatusCode)
				}
			}
		})
	}

	dir := storetest.GaleraNodeDir(t, 1)
	pid, err := os.ReadFile(dir + "/mysqld.pid")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := osexec.Command("kill", "-9", strings.TrimSpace(string(pid))).CombinedOutput(); err != nil {
		t.Fatalf("kill node 1: %v %s", err, out)
	}
	killed := time.Now()
	restarted := false
	restart := func() {
		if restarted {
			return
		}
		restarted = true
		storetest.WaitGaleraEvicted(t, dsns[1], 2)
		if out, err := osexec.Command(dir + "/start").CombinedOutput(); err != nil {
			t.Errorf("restart node 1: %v %s", err, out)
		}
	}
	// Whatever happens, the shared cluster gets its node back (cleanups
	// run last-in first-out: before the database is dropped).
	t.Cleanup(func() {
		restart()
		waitRejoined(t, dsns[0])
	})
	waitFor(t, time.Minute, "a 200 through the next node", func() bool { return lastOK.Load() > killed.UnixNano() })
	t.Logf("node 1 killed: instances answered 200 again after %v", time.Unix(0, lastOK.Load()).Sub(killed).Round(time.Millisecond))
	restart()
	w.untilAllValidated()
	stopPollers()
	w.assertConverged()
	waitRejoined(t, dsns[0])
	t.Logf("%d status polls during the run: %d × 503 RETRY_LATER, %d other failures; wall time %v",
		polls.Load(), unavailable.Load(), failures.Load(), time.Since(w.start).Round(time.Millisecond))
}

// waitRejoined waits for the restarted node 1 to serve again; if it does
// not within a minute the failure carries the node's own account of why.
func waitRejoined(t *testing.T, dsn string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !nodeSynced(t, dsn) {
		if time.Now().After(deadline) {
			t.Fatalf("node 1 not Synced again within a minute of its restart\n%s", storetest.GaleraNodeLogs(t, 1))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// nodeSynced reports whether the Galera node of dsn serves: Synced in the
// primary component (what /readyz checks).
func nodeSynced(t *testing.T, dsn string) bool {
	s, err := store.Open(context.Background(), store.DriverMySQL, dsn)
	if err != nil {
		return false
	}
	defer s.Close()
	_, ok, err := s.ClusterReady(context.Background())
	return err == nil && ok
}

// connectionLost reports whether err is the loss of the connection to the
// database rather than an answer from it.
func connectionLost(err error) bool {
	var ne *net.OpError
	return errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, driver.ErrBadConn) || errors.As(err, &ne)
}
