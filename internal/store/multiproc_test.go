package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// Environment of a worker process of TestBatchInvariantsAcrossProcesses.
const (
	envWorkerDSN    = "CHANGEFLOW_BATCH_WORKER_DSN"    // the shared database; set means "be a worker"
	envWorkerName   = "CHANGEFLOW_BATCH_WORKER_NAME"   // unique prefix of the worker's fresh operationIds
	envWorkerOut    = "CHANGEFLOW_BATCH_WORKER_OUT"    // file the worker writes its tally to (JSON)
	envWorkerMillis = "CHANGEFLOW_BATCH_WORKER_MILLIS" // how long the worker runs
)

// workerProcesses is how many OS processes share the database, like three
// instances of the service.
const workerProcesses = 3

// TestBatchInvariantsAcrossProcesses is the race test across OS processes:
// the test binary re-executes itself three times in worker mode
// (TestBatchWorkerProcess), each process with its own connection pool
// running claim rounds, fresh and repeated admissions (the repeated pool is
// shared by all processes), settlements and sweeps against one MariaDB
// database, while this process samples the invariants. The workers' tallies
// are merged and checked like the in-process race test's.
func TestBatchInvariantsAcrossProcesses(t *testing.T) {
	t.Parallel()
	for _, driver := range storetest.Drivers() {
		t.Run(driver, func(t *testing.T) {
			if driver == store.DriverSQLite {
				t.Skip("SQLite is the single-instance embedded database (docs/storage.md): " +
					"several processes on one file are not a deployment we support, so there is nothing to prove")
			}
			dsn := storetest.NewMigratedDatabase(t, driver)
			s := storetest.OpenDSN(t, driver, dsn)
			_, err := s.Migrate(t.Context())
			require.NoError(t, err)

			ctx := t.Context()
			dir := t.TempDir()
			tl := newBatchTally()
			stop := make(chan struct{})
			var samples int
			var sampler sync.WaitGroup
			sampler.Go(func() { samples = sampleBatchInvariants(ctx, s, stop, tl) })

			type worker struct {
				cmd *osexec.Cmd
				out string
			}
			var workers []worker
			for i := range workerProcesses {
				out := filepath.Join(dir, fmt.Sprintf("worker-%d.json", i))
				cmd := osexec.CommandContext(ctx, os.Args[0], "-test.run=^TestBatchWorkerProcess$", "-test.count=1")
				cmd.Env = append(os.Environ(),
					envWorkerDSN+"="+dsn,
					envWorkerName+"="+fmt.Sprintf("proc%d", i),
					envWorkerOut+"="+out,
					envWorkerMillis+"=2500",
				)
				require.NoError(t, cmd.Start())
				workers = append(workers, worker{cmd, out})
			}
			for i, w := range workers {
				err := w.cmd.Wait()
				require.NoError(t, err, "worker %d", i)
			}
			close(stop)
			sampler.Wait()

			for i, w := range workers {
				raw, err := os.ReadFile(w.out)
				require.NoError(t, err, "worker %d wrote no tally", i)
				wt := newBatchTally()
				require.NoError(t, json.Unmarshal(raw, wt))
				t.Logf("worker %d: %s", i, wt.summary())
				tl.merge(wt)
			}
			t.Logf("%d processes, %d samples; total: %s", workerProcesses, samples, tl.summary())
			require.Positive(t, samples)
			require.Positive(t, tl.Ops["claim/claimed"])
			checkBatchInvariants(t, s, tl)
		})
	}
}

// TestBatchWorkerProcess is the worker of
// TestBatchInvariantsAcrossProcesses; run directly, it skips.
func TestBatchWorkerProcess(t *testing.T) {
	dsn := os.Getenv(envWorkerDSN)
	if dsn == "" {
		t.Skip("worker process of TestBatchInvariantsAcrossProcesses")
	}
	millis, err := strconv.Atoi(os.Getenv(envWorkerMillis))
	require.NoError(t, err)
	// Plain Open: this process is one more instance, with its own pool.
	s, err := store.Open(t.Context(), store.DriverMySQL, dsn)
	require.NoError(t, err)
	defer s.Close()

	tl := newBatchTally()
	stop := make(chan struct{})
	time.AfterFunc(time.Duration(millis)*time.Millisecond, func() { close(stop) })
	mix := batchWorkloadMix{Claimers: 3, FreshAdmitters: 3, DupAdmitters: 3, Settlers: 2, Sweepers: 1}
	runBatchWorkload(context.WithoutCancel(t.Context()), s, mix, os.Getenv(envWorkerName), stop, tl)

	raw, err := json.Marshal(tl)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(os.Getenv(envWorkerOut), raw, 0o600))
}
