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
				b := runWrk(t, wrk, bare+"/api/requests/"+id, user, dur)
				var stopPerf func()
				if dir := os.Getenv("CHANGEFLOW_READBENCH_PERF"); dir != "" && pair == 1 {
					stopPerf = recordPerf(t, full.cmd.Process.Pid, filepath.Join(dir, driver+".perf.data"))
				}
				f := runWrk(t, wrk, url, user, dur)
				if stopPerf != nil {
					stopPerf()
				}
				t.Logf("READBENCH %s pair %d: bare %.0f req/s, full chain %.0f req/s: %.1f %% of bare (p50 %s / %s); load after: %s",
					driver, pair, b.rps, f.rps, 100*f.rps/b.rps, b.p50, f.p50, loadAverage())
			}
			if again := getAnswer(t, url, user); !bytes.Equal(again.body, answer.body) {
				t.Fatalf("the answer changed during the run:\n%s\n%s", answer.body, again.body)
			}
		})
	}
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
		dsn = storetest.NewDatabase(t, driver)
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
	rps float64
	p50 string
}

var (
	wrkRPS     = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
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
