package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// TestStatusReadLoad is the status-read load comparison
// (docs/benchmarks.md, "Status read"): wrk drives, in one run and with the
// same threads and connections, a bare net/http server that answers every
// request with the bytes (status, headers, body) the real status read
// answered, and GET /api/requests/{operationId} on a real `changeflow
// serve` process — full middleware chain, production log level (one access
// log line per request to the process's log file), default pools — on
// SQLite and, with CHANGEFLOW_TEST_MYSQL_DSN set, on MariaDB. Bare and full
// run back to back, twice, so a change of the machine's load shows as two
// different ratios instead of one wrong one. It reports requests per second
// of each and the ratio; it fails only when a run answered anything but 200
// or the answer changed. A measurement, not a timed assertion: it runs with
// CHANGEFLOW_READBENCH=1 and without -race (the bare server runs in this
// process):
//
//	CHANGEFLOW_READBENCH=1 ./scripts/test-services.sh go test ./cmd/changeflow -run TestStatusReadLoad -v -count=1
//
// CHANGEFLOW_READBENCH_DURATION (default 10s) is each wrk run's length;
// CHANGEFLOW_READBENCH_PERF=DIR also records the serve process during the
// first full run with perf (DIR/<driver>.perf.data; read it with `perf
// report -i FILE --no-children --sort symbol`).
func TestStatusReadLoad(t *testing.T) {
	if os.Getenv("CHANGEFLOW_READBENCH") != "1" {
		t.Skip("a measurement: runs with CHANGEFLOW_READBENCH=1 (docs/benchmarks.md)")
	}
	if raceEnabled {
		t.Skip("the bare server runs in the test process: measure without -race")
	}
	wrk, err := osexec.LookPath("wrk")
	if err != nil {
		t.Fatalf("the load generator wrk is not installed: %v", err)
	}
	dur := 10 * time.Second
	if v := os.Getenv("CHANGEFLOW_READBENCH_DURATION"); v != "" {
		if dur, err = time.ParseDuration(v); err != nil {
			t.Fatalf("CHANGEFLOW_READBENCH_DURATION: %v", err)
		}
	}
	for _, driver := range []string{store.DriverSQLite, store.DriverMySQL} {
		t.Run(driver, func(t *testing.T) {
			if driver == store.DriverMySQL && os.Getenv("CHANGEFLOW_TEST_MYSQL_DSN") == "" {
				t.Skip("MariaDB: set CHANGEFLOW_TEST_MYSQL_DSN (scripts/test-services.sh)")
			}
			full, st := startReadBenchServe(t, driver)
			const id, user = "readbench-1", "alice"
			full.submit(t, user, id, "solo")
			waitFor(t, 60*time.Second, id+" VALIDATED", func() bool {
				b, err := st.BindingGetByOperation(t.Context(), id)
				return err == nil && b.Status == domain.BindingValidated
			})
			url := full.base + "/api/requests/" + id
			answer := getAnswer(t, url, user)
			bare := startBareServer(t, answer)
			t.Logf("READBENCH %s: %d-byte answer; load before: %s", driver, len(answer.body), loadAverage())
			for pair := 1; pair <= 2; pair++ {
				c0 := cpuTicks(t, os.Getpid())
				b := runWrk(t, wrk, bare+"/api/requests/"+id, user, dur)
				bareCPU := cpuPerRequest(t, os.Getpid(), c0, b)
				var stopPerf func()
				if dir := os.Getenv("CHANGEFLOW_READBENCH_PERF"); dir != "" && pair == 1 {
					stopPerf = recordPerf(t, full.cmd.Process.Pid, filepath.Join(dir, driver+".perf.data"))
				}
				c0 = cpuTicks(t, full.cmd.Process.Pid)
				f := runWrk(t, wrk, url, user, dur)
				fullCPU := cpuPerRequest(t, full.cmd.Process.Pid, c0, f)
				if stopPerf != nil {
					stopPerf()
				}
				t.Logf("READBENCH %s pair %d: bare %.0f req/s, full chain %.0f req/s: %.1f %% of bare (p50 %s / %s); "+
					"server CPU per request: bare %.1f µs, full %.1f µs (bare/full %.1f %%); load after: %s",
					driver, pair, b.rps, f.rps, 100*f.rps/b.rps, b.p50, f.p50,
					bareCPU, fullCPU, 100*bareCPU/fullCPU, loadAverage())
			}
			if again := getAnswer(t, url, user); !bytes.Equal(again.body, answer.body) {
				t.Fatalf("the answer changed during the run:\n%s\n%s", answer.body, again.body)
			}
		})
	}
}

// TestIdleInstanceStatements is the idle cost (docs/benchmarks.md, "Status
// read"): the statements per second one idle `changeflow serve` process
// sends to MariaDB, counted by the server itself (SHOW GLOBAL STATUS, so
// every statement the process sends is seen whatever path it took), over
// a window after a request reached VALIDATED and one status read prepared
// the hot reads. Run it alone (the counters are the server's) with
// CHANGEFLOW_READBENCH=1 under scripts/test-services.sh;
// CHANGEFLOW_READBENCH_IDLE (default 60s) is the window.
func TestIdleInstanceStatements(t *testing.T) {
	if os.Getenv("CHANGEFLOW_READBENCH") != "1" {
		t.Skip("a measurement: runs with CHANGEFLOW_READBENCH=1 (docs/benchmarks.md)")
	}
	window := time.Minute
	if v := os.Getenv("CHANGEFLOW_READBENCH_IDLE"); v != "" {
		var err error
		if window, err = time.ParseDuration(v); err != nil {
			t.Fatalf("CHANGEFLOW_READBENCH_IDLE: %v", err)
		}
	}
	full, st := startReadBenchServe(t, store.DriverMySQL)
	const id, user = "idle-1", "alice"
	full.submit(t, user, id, "solo")
	waitFor(t, 60*time.Second, id+" VALIDATED", func() bool {
		b, err := st.BindingGetByOperation(t.Context(), id)
		return err == nil && b.Status == domain.BindingValidated
	})
	getAnswer(t, full.base+"/api/requests/"+id, user)
	counters := func() map[string]int64 {
		rows, err := st.DB().QueryContext(t.Context(), "SHOW GLOBAL STATUS WHERE Variable_name IN "+
			"('Questions', 'Com_select', 'Com_insert', 'Com_update', 'Com_delete', 'Com_stmt_prepare', 'Com_stmt_execute', 'Com_stmt_close', 'Com_begin', 'Com_commit')")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string]int64{}
		for rows.Next() {
			var k string
			var v int64
			if err := rows.Scan(&k, &v); err != nil {
				t.Fatal(err)
			}
			out[k] = v
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	c0 := counters()
	time.Sleep(window) // the measurement window itself, not a wait for a state
	c1 := counters()
	per := func(k string) float64 { return float64(c1[k]-c0[k]) / window.Seconds() }
	// The second SHOW is one question of the window (a text statement:
	// it has no arguments). Prepares, executes and closes are counted to
	// show whether anything uses server-side prepared statements.
	t.Logf("IDLE mariadb, one instance, %v: %.2f statements/s (Questions, less our own SHOW); "+
		"select %.2f/s, insert %.2f/s, update %.2f/s, delete %.2f/s, begin %.2f/s, commit %.2f/s; "+
		"prepare %.2f/s, execute %.2f/s, close %.2f/s (per kind, as the server counts them)",
		window, (float64(c1["Questions"]-c0["Questions"])-1)/window.Seconds(),
		per("Com_select"), per("Com_insert"), per("Com_update"), per("Com_delete"), per("Com_begin"), per("Com_commit"),
		per("Com_stmt_prepare"), per("Com_stmt_execute"), per("Com_stmt_close"))
}

// startReadBenchServe starts one serve process on a fresh database of
// driver with the simulators, production defaults otherwise (log level
// info: the access log writes a line per request), and returns it with a
// store on the same database for the test's own reads.
func startReadBenchServe(t *testing.T, driver string) (*serveProc, *store.Store) {
	t.Helper()
	dir := t.TempDir()
	var (
		dsn string
		st  *store.Store
	)
	if driver == store.DriverMySQL {
		dsn, st = mariaDB(t)
	} else {
		dsn = storetest.NewMigratedDatabase(t, driver)
		st = storetest.OpenDSN(t, driver, dsn)
		if _, err := st.Migrate(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	port := freePort(t)
	sim := startSim(t, dir, []string{fmt.Sprintf("http://127.0.0.1:%d", port)})
	sim.must(t, http.MethodPost, "/approval/_control/policy", map[string]any{"mode": "auto"}, nil)
	file := filepath.Join(dir, "changeflow.yaml")
	cfg := strings.Replace(latencyConfig(driver, dsn, sim.base), "log:\n  level: warn\n", "", 1)
	writeConfig(t, file, cfg)
	return startServeProc(t, dir, file, "readbench", port), st
}

// recordedAnswer is one HTTP answer as the bare server replays it.
type recordedAnswer struct {
	status int
	header http.Header
	body   []byte
}

// getAnswer reads url as user once and wants 200.
func getAnswer(t *testing.T, url, user string) recordedAnswer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("X-Auth-Request-User", user)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d %s", url, resp.StatusCode, body)
	}
	return recordedAnswer{status: resp.StatusCode, header: resp.Header.Clone(), body: body}
}

// startBareServer serves a on every path from a plain net/http server in
// this process: the same status, headers (but Date and Content-Length,
// which net/http writes itself) and body — the floor any handler that
// answers those bytes over HTTP stands on.
func startBareServer(t *testing.T, a recordedAnswer) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := a.header.Clone()
	h.Del("Date")
	h.Del("Content-Length")
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		for k, v := range h {
			w.Header()[k] = v
		}
		w.WriteHeader(a.status)
		_, _ = w.Write(a.body)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// wrkResult is what one wrk run reported.
type wrkResult struct {
	rps      float64
	requests int64
	p50      string
}

var (
	wrkRPS     = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	wrkTotal   = regexp.MustCompile(`(\d+) requests in `)
	wrkP50     = regexp.MustCompile(`(?m)^\s+50%\s+(\S+)`)
	wrkNon2xx  = regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`)
	wrkSockErr = regexp.MustCompile(`Socket errors: .*`)
)

// runWrk drives url as user with 2 threads and 16 connections for dur and
// fails on any answer that is not 2xx (a 429 or 500 would be cheaper than
// the read it replaces) or a socket error.
func runWrk(t *testing.T, wrk, url, user string, dur time.Duration) wrkResult {
	t.Helper()
	out, err := osexec.Command(wrk, "-t2", "-c16", "-d"+strconv.Itoa(int(dur.Seconds()))+"s", "--latency",
		"-H", "X-Auth-Request-User: "+user, url).CombinedOutput()
	if err != nil {
		t.Fatalf("wrk %s: %v\n%s", url, err, out)
	}
	if m := wrkNon2xx.FindSubmatch(out); m != nil {
		t.Fatalf("wrk %s: %s answers were not 2xx:\n%s", url, m[1], out)
	}
	if m := wrkSockErr.Find(out); m != nil {
		t.Fatalf("wrk %s: %s\n%s", url, m, out)
	}
	m := wrkRPS.FindSubmatch(out)
	if m == nil {
		t.Fatalf("wrk %s: no Requests/sec line:\n%s", url, out)
	}
	rps, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	res := wrkResult{rps: rps}
	if m := wrkTotal.FindSubmatch(out); m != nil {
		res.requests, _ = strconv.ParseInt(string(m[1]), 10, 64)
	}
	if res.requests == 0 {
		t.Fatalf("wrk %s: no requests counted:\n%s", url, out)
	}
	if p := wrkP50.FindSubmatch(out); p != nil {
		res.p50 = string(p[1])
	}
	return res
}

// recordPerf samples pid's stacks with perf into file until the returned
// function is called.
func recordPerf(t *testing.T, pid int, file string) func() {
	t.Helper()
	cmd := osexec.Command("perf", "record", "-F", "499", "-g", "-o", file, "-p", strconv.Itoa(pid))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("perf record: %v", err)
	}
	return func() {
		_ = cmd.Process.Signal(os.Interrupt)
		if err := cmd.Wait(); err != nil {
			t.Logf("perf record: %v\n%s", err, out.String())
		}
	}
}

// cpuTicks is the user plus system CPU time pid has used so far, in clock
// ticks (/proc/PID/stat fields 14 and 15).
func cpuTicks(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("CPU time of %d: %v", pid, err)
	}
	// The command name (field 2) may hold spaces; fields count from its ')'.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("CPU time of %d: %q", pid, b)
	}
	return utime + stime
}

// clockTicks is Linux's USER_HZ, the unit of /proc/PID/stat's CPU times
// on every architecture Go supports.
const clockTicks = 100

// cpuPerRequest is the CPU time in microseconds pid spent per request of
// run since it had used since ticks: unlike requests per second, it does
// not depend on how much of the machine the server got.
func cpuPerRequest(t *testing.T, pid int, since int64, run wrkResult) float64 {
	t.Helper()
	used := float64(cpuTicks(t, pid)-since) / clockTicks
	return 1e6 * used / float64(run.requests)
}

// loadAverage is the machine's 1/5/15-minute load average, for the record.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
