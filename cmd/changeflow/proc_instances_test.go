package main

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"changeflow/internal/bindingfile"
)

// Shape of TestServeThreeInstances300Requests: 100 accounts × 3 batching
// targets (three binding files) = 300 requests.
const (
	manyUsers   = 100
	manyTargets = 3
)

// TestServeThreeInstances300Requests runs three `changeflow serve` OS
// processes on one MariaDB database and one `changeflow sim` process. 300
// requests for batching targets are submitted concurrently, spread over
// the three instances' HTTP APIs (each caller authenticated by the auth
// proxy's header, trusted from loopback), approved by the approval
// simulator's automatic policy and delivered round robin to the three;
// every instance runs rounds every batch.interval. Then:
//
//   - every request is VALIDATED, flipped once (step history), and the
//     three instances' success metrics add up to 300;
//   - each request is in exactly one SUCCEEDED batch (membership
//     history), and every batch that succeeded has its own MR;
//   - a sampler reading the batch table throughout never sees two active
//     batches of the project;
//   - each binding file on main holds exactly that target's requests'
//     entries — no more, no less, each with its operationId.
func TestServeThreeInstances300Requests(t *testing.T) {
	t.Parallel()
	start := time.Now()
	dsn, st := mariaDB(t)
	dir := t.TempDir()
	ports := []int{freePort(t), freePort(t), freePort(t)}
	var urls []string
	for _, p := range ports {
		urls = append(urls, fmt.Sprintf("http://127.0.0.1:%d", p))
	}
	sim := startSim(t, dir, urls)
	sim.must(t, http.MethodPost, "/approval/_control/policy", map[string]any{"mode": "auto", "delayMs": 50}, nil)
	sim.must(t, http.MethodPost, "/deploy/_control/faults", map[string]any{"delayMs": 20}, nil)
	sim.must(t, http.MethodPut, "/gitlab/_control/settings",
		map[string]any{"mergeability_delay": "50ms", "pipeline_start_delay": "10ms", "pipeline_duration": "100ms"}, nil)

	targets := make([]string, manyTargets)
	targetsYAML := "targets:\n"
	for i := range targets {
		targets[i] = fmt.Sprintf("grouped-%d", i+1)
		targetsYAML += fmt.Sprintf("  %s: {accessMode: OPEN, batching: true, maxDays: 30}\n", targets[i])
	}
	file := filepath.Join(dir, "changeflow.yaml")
	// Batches of up to 30 (three files per commit; at least ten batches);
	// rounds on every instance every 100 ms; a pool and queue that take
	// the whole burst.
	writeConfig(t, file, procConfig(dsn, sim.base, `workflow:
  approveFirst: true
  workers: 8
  queueSize: 400
  leaseDuration: 10s
batch:
  interval: 100ms
  maxRequests: 30
reconcile:
  interval: 1s
  minAge: 30s
ratelimit:
  apply:
    limit: 100
`+targetsYAML))
	instances := make([]*serveProc, len(ports))
	for i, port := range ports {
		instances[i] = startServeProc(t, dir, file, fmt.Sprintf("inst-%d", i+1), port)
	}
	t.Logf("world up in %v", time.Since(start).Round(time.Millisecond))

	// The sampler: the project's active batches, throughout.
	stop := make(chan struct{})
	var (
		sampler   sync.WaitGroup
		maxActive atomic.Int64
		samples   atomic.Int64
		sampleErr atomic.Value
	)
	sampler.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			var n int64
			if err := st.DB().QueryRowContext(context.Background(),
				"SELECT COUNT(*) FROM merge_batch WHERE project_id = 1 AND status IN (1, 4)").Scan(&n); err != nil {
				sampleErr.Store(err)
				return
			}
			samples.Add(1)
			if n > maxActive.Load() {
				maxActive.Store(n)
			}
		}
	})
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		sampler.Wait()
	}()

	// 300 submissions from 30 concurrent callers, round robin over the
	// three instances.
	type req struct{ user, op, target string }
	var reqs []req
	byTarget := map[string]map[string]string{} // target → subject → operationId
	for _, tgt := range targets {
		byTarget[tgt] = map[string]string{}
	}
	for u := range manyUsers {
		for _, tgt := range targets {
			r := req{user: fmt.Sprintf("user-%03d", u), op: fmt.Sprintf("op-%03d-%s", u, tgt), target: tgt}
			reqs = append(reqs, r)
			byTarget[tgt][r.user] = r.op
		}
	}
	submitStart := time.Now()
	work := make(chan int)
	var callers sync.WaitGroup
	errs := make(chan string, len(reqs))
	for range 30 {
		callers.Go(func() {
			for i := range work {
				r := reqs[i]
				if code, body := instances[i%len(instances)].submitOnce(r.user, r.op, r.target); code != http.StatusAccepted {
					errs <- fmt.Sprintf("%s: %d %s", r.op, code, body)
				}
			}
		})
	}
	for i := range reqs {
		work <- i
	}
	close(work)
	callers.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("submit %s", e)
	}
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("%d submitted in %v", len(reqs), time.Since(submitStart).Round(time.Millisecond))

	// Every request VALIDATED.
	waitFor(t, 3*time.Minute, "every request VALIDATED", func() bool {
		if sampler := sampleErr.Load(); sampler != nil {
			t.Fatalf("sampler: %v", sampler)
		}
		failed := countSQL(t, st, "SELECT COUNT(*) FROM binding WHERE status IN ('CREATE_FAILED', 'HANDLE_FAILED', 'REJECTED')")
		if failed > 0 {
			t.Fatalf("%d requests failed", failed)
		}
		return countSQL(t, st, "SELECT COUNT(*) FROM binding WHERE status = 'VALIDATED'") == len(reqs)
	})
	validatedAt := time.Since(submitStart)
	close(stop)
	sampler.Wait()
	t.Logf("all %d VALIDATED %v after the first submission; %d batches; %d samples of the batch table",
		len(reqs), validatedAt.Round(time.Millisecond), countSQL(t, st, "SELECT COUNT(*) FROM merge_batch"), samples.Load())

	if n := maxActive.Load(); n > 1 {
		t.Fatalf("a sample saw %d active batches of the project", n)
	}
	if samples.Load() < 10 {
		t.Fatalf("only %d samples of the batch table", samples.Load())
	}
	if n := countSQL(t, st, "SELECT COUNT(*) FROM operation_step WHERE to_binding_status = 'VALIDATED'"); n != len(reqs) {
		t.Fatalf("%d flips to VALIDATED in the step history, want %d (one each)", n, len(reqs))
	}
	if n := countSQL(t, st, "SELECT COUNT(DISTINCT operation_id) FROM operation_step WHERE to_binding_status = 'VALIDATED'"); n != len(reqs) {
		t.Fatalf("%d requests flipped, want %d", n, len(reqs))
	}
	// Each request in exactly one SUCCEEDED batch.
	if n := countSQL(t, st, "SELECT COUNT(*) FROM (SELECT h.operation_id FROM merge_batch_history h JOIN merge_batch b ON b.id = h.batch_id"+
		" WHERE b.status = 2 GROUP BY h.operation_id HAVING COUNT(*) = 1) x"); n != len(reqs) {
		t.Fatalf("%d requests are in exactly one succeeded batch, want %d", n, len(reqs))
	}
	if n := countSQL(t, st, "SELECT COUNT(*) FROM (SELECT h.operation_id FROM merge_batch_history h JOIN merge_batch b ON b.id = h.batch_id"+
		" WHERE b.status = 2 GROUP BY h.operation_id HAVING COUNT(*) > 1) x"); n != 0 {
		t.Fatalf("%d requests are in more than one succeeded batch", n)
	}
	// Every succeeded batch has its own MR, and each batch branch one MR.
	succeeded := countSQL(t, st, "SELECT COUNT(*) FROM merge_batch WHERE status = 2")
	if n := countSQL(t, st, "SELECT COUNT(DISTINCT mr_iid) FROM merge_batch WHERE status = 2"); n != succeeded {
		t.Fatalf("%d succeeded batches share %d MRs", succeeded, n)
	}
	branches := map[string]int{}
	for _, mr := range sim.allMRs(t) {
		branches[mr.SourceBranch]++
	}
	for b, n := range branches {
		if n != 1 {
			t.Fatalf("branch %s has %d MRs", b, n)
		}
	}
	// The success metric: once per request, wherever the flip happened.
	waitFor(t, 30*time.Second, "the metrics to add up", func() bool {
		sum := 0
		for _, in := range instances {
			sum += in.validatedMetric(t)
		}
		if sum > len(reqs) {
			t.Fatalf("the instances counted %d validated requests, want %d", sum, len(reqs))
		}
		return sum == len(reqs)
	})
	// Work ran on all three instances.
	for _, in := range instances {
		if n := countSQL(t, st, "SELECT COUNT(*) FROM operation_step WHERE actor = ? OR actor LIKE ?", in.id, in.id+"#%"); n == 0 {
			t.Errorf("%s ran no step", in.id)
		}
	}
	// The binding files on main: exactly the members' entries.
	for _, tgt := range targets {
		f, err := bindingfile.Parse([]byte(sim.fileOnMain(t, tgt)))
		if err != nil {
			t.Fatalf("binding file of %s on main: %v", tgt, err)
		}
		got := map[string]string{}
		for _, e := range f.Entries {
			got[e.Subject] = e.OperationID
		}
		if !maps.Equal(got, byTarget[tgt]) {
			var extra, missing []string
			for s := range got {
				if _, ok := byTarget[tgt][s]; !ok {
					extra = append(extra, s)
				}
			}
			for s, op := range byTarget[tgt] {
				if got[s] != op {
					missing = append(missing, s+"/"+op)
				}
			}
			slices.Sort(extra)
			slices.Sort(missing)
			t.Fatalf("binding file of %s on main: %d entries, want %d; extra %v, missing or wrong %v",
				tgt, len(got), len(byTarget[tgt]), extra, missing)
		}
	}
	t.Logf("wall time %v", time.Since(start).Round(time.Millisecond))
}
