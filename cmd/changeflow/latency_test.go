package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// The latency harness (docs/benchmarks.md, "Latency"): the real binary
// against the simulators at fixed delays — the approver decides 1 s after
// the submission, a check pipeline runs 1 s, the deployment calls back 1 s
// after the merge — with the production defaults otherwise (batch.interval
// 30 s, batch.gatherWindow 2 s, webhooks for pipelines). A request's added
// latency is the time from its submission to VALIDATED (both on the
// database clock: the operation's created_at and the VALIDATED step's)
// minus those 3 s: what changeflow itself adds.
//
// It is a measurement, not a test with a timed assertion: it reports
// p50/p95/max and fails only when a request does not reach VALIDATED or the
// binding files disagree with the database. It is slow (tens of seconds
// per case) and so runs only with CHANGEFLOW_LATENCY=1:
//
//	CHANGEFLOW_LATENCY=1 go test ./cmd/changeflow -run TestLatencyHarness -v -count=1
//
// with CHANGEFLOW_TEST_MYSQL_DSN set (scripts/test-services.sh) for the
// three-instance MariaDB cases.
func TestLatencyHarness(t *testing.T) {
	if os.Getenv("CHANGEFLOW_LATENCY") != "1" {
		t.Skip("the latency harness runs with CHANGEFLOW_LATENCY=1 (docs/benchmarks.md)")
	}
	for _, c := range []struct {
		name      string
		driver    string
		instances int
	}{
		{"sqlite-1", store.DriverSQLite, 1},
		{"mariadb-3", store.DriverMySQL, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newLatencyWorld(t, c.driver, c.instances)
			t.Run("single-sequential", func(t *testing.T) {
				var added []time.Duration
				for i := range 10 {
					id := fmt.Sprintf("lat-s-%d", i)
					w.submit(t, i, "solo", id)
					w.untilValidated(t, id)
					added = append(added, w.added(t, id))
				}
				report(t, c.name+" single, 10 one after another", added)
			})
			t.Run("batched-at-once", func(t *testing.T) {
				ids := make([]string, 10)
				var wg sync.WaitGroup
				for i := range ids {
					ids[i] = fmt.Sprintf("lat-b-%d", i)
					wg.Go(func() { w.submit(t, i, "grouped", ids[i]) })
				}
				wg.Wait()
				var added []time.Duration
				for _, id := range ids {
					w.untilValidated(t, id)
					added = append(added, w.added(t, id))
				}
				report(t, c.name+" batched, 10 at once", added)
			})
			w.sim.filesExact(t, w.st, []string{"solo", "grouped"}, w.all)
		})
	}
}

// latencyWorld is one simulator process and n serve processes on one
// database.
type latencyWorld struct {
	st    *store.Store
	sim   *simProc
	serve []*serveProc
	mu    sync.Mutex
	all   []string
}

// fixedDelay is each outside system's delay.
const fixedDelay = time.Second

func newLatencyWorld(t *testing.T, driver string, n int) *latencyWorld {
	t.Helper()
	dir := t.TempDir()
	var dsn string
	w := &latencyWorld{}
	switch driver {
	case store.DriverMySQL:
		dsn, w.st = mariaDB(t)
	default:
		dsn = storetest.NewMigratedDatabase(t, driver)
		w.st = storetest.OpenDSN(t, driver, dsn)
		if _, err := w.st.Migrate(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	ports := make([]int, n)
	urls := make([]string, n)
	for i := range ports {
		ports[i] = freePort(t)
		urls[i] = fmt.Sprintf("http://127.0.0.1:%d", ports[i])
	}
	w.sim = startSim(t, dir, urls)
	w.sim.must(t, http.MethodPost, "/approval/_control/policy", map[string]any{"mode": "auto", "delayMs": fixedDelay.Milliseconds()}, nil)
	w.sim.must(t, http.MethodPost, "/deploy/_control/faults", map[string]any{"delayMs": fixedDelay.Milliseconds()}, nil)
	w.sim.must(t, http.MethodPut, "/gitlab/_control/settings",
		map[string]any{"mergeability_delay": "50ms", "pipeline_start_delay": "10ms", "pipeline_duration": fixedDelay.String()}, nil)
	file := filepath.Join(dir, "changeflow.yaml")
	writeConfig(t, file, latencyConfig(driver, dsn, w.sim.base))
	for i, port := range ports {
		w.serve = append(w.serve, startServeProc(t, dir, file, "lat-"+strconv.Itoa(i+1), port))
	}
	return w
}

// latencyConfig is the local run's configuration (production defaults:
// batch.interval 30 s, gatherWindow 2 s, pipeline polling 5 s behind the
// webhooks) on driver/dsn and the simulators at simURL.
func latencyConfig(driver, dsn, simURL string) string {
	return fmt.Sprintf(`database:
  driver: %s
  dsn: %q
log:
  level: warn
gitlab:
  baseURL: %[3]s/gitlab/
  projects: [1]
  tokens:
    committer: %[4]s
    approver1: %[5]s
    approver2: %[6]s
approval:
  baseURL: %[3]s/approval/
permission:
  baseURL: %[3]s/permission/
callbacks:
  tokens:
    approval: %[7]s
    deploy: %[8]s
    gitlab: %[9]s
identity:
  trustedProxies: [127.0.0.1/32]
workflow:
  approveFirst: true
ratelimit:
  apply:
    limit: 1000
targets:
  solo: {accessMode: OPEN, batching: false, maxDays: 30}
  grouped: {accessMode: OPEN, batching: true, maxDays: 30}
`, driver, dsn, simURL, procCommitterToken, procApprover1Token, procApprover2Token,
		procApprovalToken, procDeployToken, procWebhookToken)
}

// submit asks for target as user i on instance i mod n.
func (w *latencyWorld) submit(t *testing.T, i int, target, id string) {
	t.Helper()
	w.mu.Lock()
	w.all = append(w.all, id)
	w.mu.Unlock()
	w.serve[i%len(w.serve)].submit(t, fmt.Sprintf("user-%d", i), id, target)
}

func (w *latencyWorld) untilValidated(t *testing.T, id string) {
	t.Helper()
	waitFor(t, 120*time.Second, id+" VALIDATED", func() bool {
		b, err := w.st.BindingGetByOperation(t.Context(), id)
		return err == nil && b.Status == domain.BindingValidated
	})
}

// added is id's submission → VALIDATED on the database clock, minus the
// outside systems' three delays.
func (w *latencyWorld) added(t *testing.T, id string) time.Duration {
	t.Helper()
	op, err := w.st.OperationGet(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	steps, err := w.st.OperationStepList(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("CHANGEFLOW_LATENCY_TRACE") == "1" {
		// Where the time goes: each step after the submission.
		for _, s := range steps {
			t.Logf("TRACE %s +%6.3fs %s → %s %s %s", id, s.CreatedAt.Sub(op.CreatedAt).Seconds(),
				domain.StepStatus(s.FromStep), domain.StepStatus(s.ToStep), s.ToBinding, s.Actor)
		}
	}
	for _, s := range steps {
		if s.ToBinding == domain.BindingValidated {
			return s.CreatedAt.Sub(op.CreatedAt) - 3*fixedDelay
		}
	}
	t.Fatalf("%s: no VALIDATED step", id)
	return 0
}

// report logs p50, p95 and max of d (nearest rank).
func report(t *testing.T, what string, d []time.Duration) {
	t.Helper()
	s := slices.Clone(d)
	slices.Sort(s)
	rank := func(p float64) time.Duration {
		i := int(p*float64(len(s))+0.999999) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	t.Logf("LATENCY %s: added p50 %.2fs, p95 %.2fs, max %.2fs (n=%d)", what,
		rank(0.50).Seconds(), rank(0.95).Seconds(), s[len(s)-1].Seconds(), len(s))
}
