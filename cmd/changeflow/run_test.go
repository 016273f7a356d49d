package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"

	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"changeflow/internal/store/storetest"
)

// syncBuffer is an io.Writer that tests can read while run writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// instance is one in-process `changeflow serve`.
type instance struct {
	base   string
	stdout *syncBuffer
	stderr *syncBuffer
	cancel context.CancelFunc
	done   chan error
}

// startServe runs `changeflow serve --config file` in-process and waits
// until /healthz answers, the way a deployment probe would.
func startServe(t *testing.T, file string, env map[string]string, extra ...string) *instance {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	in := &instance{stdout: &syncBuffer{}, stderr: &syncBuffer{}, cancel: cancel, done: make(chan error, 1)}
	getenv := func(k string) string { return env[k] }
	go func() {
		in.done <- run(ctx, append([]string{"changeflow", "serve", "--config", file}, extra...), getenv, in.stdout, in.stderr)
	}()
	t.Cleanup(func() { in.stop(t) })

	addr := regexp.MustCompile(`serving on (http://\S+)`)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-in.done:
			in.done <- err
			t.Fatalf("serve exited early: %v\nstderr:\n%s", err, in.stderr.String())
		default:
		}
		if m := addr.FindStringSubmatch(in.stdout.String()); m != nil {
			in.base = m[1]
			if resp, err := procClient.Get(in.base + "/healthz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					return in
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("serve did not become healthy in time\nstderr:\n%s", in.stderr.String())
	return nil
}

func (in *instance) stop(t *testing.T) {
	t.Helper()
	in.cancel()
	select {
	case err := <-in.done:
		if err != nil {
			t.Errorf("serve returned %v on shutdown", err)
		}
		in.done <- nil
	case <-time.After(15 * time.Second):
		t.Errorf("serve did not stop within 15s of cancellation")
	}
}

func (in *instance) get(t *testing.T, path string) (int, map[string]any) {
	t.Helper()
	resp, err := procClient.Get(in.base + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("GET %s: decode: %v", path, err)
	}
	return resp.StatusCode, body
}

func writeConfig(t *testing.T, path, content string) {
	t.Helper()
	// Write-then-rename, as editors and config-management tools do, so
	// the watcher never reads a half-written file.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func sqliteConfig(t *testing.T, dir, extra string) string {
	t.Helper()
	return fmt.Sprintf(`server:
  listen: 127.0.0.1:0
database:
  driver: sqlite
  dsn: file:%s
%s`, filepath.Join(dir, "cf.db"), extra)
}

func TestServeIsHealthyAndReadyOnSQLite(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "changeflow.yaml")
	writeConfig(t, file, sqliteConfig(t, dir, ""))
	in := startServe(t, file, nil)

	if code, body := in.get(t, "/readyz"); code != 200 || body["code"] != "OK" {
		t.Fatalf("readyz = %d %v", code, body)
	}
	resp, err := procClient.Get(in.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "changeflow_http_requests_total") {
		t.Fatalf("metrics = %d, body lacks the HTTP series", resp.StatusCode)
	}
}

func TestServeStopsGracefullyWithAnInFlightRequest(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "changeflow.yaml")
	writeConfig(t, file, sqliteConfig(t, dir, ""))
	in := startServe(t, file, nil)
	in.stop(t)
	if _, err := procClient.Get(in.base + "/healthz"); err == nil {
		t.Fatal("server still answers after shutdown")
	}
	if !strings.Contains(in.stderr.String(), `"msg":"stopped"`) {
		t.Fatalf("no clean-stop log line:\n%s", in.stderr.String())
	}
}

// TestConfigFileChangesApplyWithoutRestart changes log.level in the file of
// a running server: the access log's INFO lines stop, with no restart. A
// broken file then keeps the last good value (still no INFO lines) and the
// reason is logged.
func TestConfigFileChangesApplyWithoutRestart(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "changeflow.yaml")
	writeConfig(t, file, sqliteConfig(t, dir, "log:\n  level: info\n"))
	in := startServe(t, file, nil)

	countAccess := func() int { return strings.Count(in.stderr.String(), `"msg":"http request"`) }
	in.get(t, "/healthz")
	if countAccess() == 0 {
		t.Fatal("at log.level info the access log should have a line")
	}

	writeConfig(t, file, sqliteConfig(t, dir, "log:\n  level: warn\n"))
	waitForLog(t, in.stderr, `"config":{"version":2`, 1)
	// Subscribers run just after the "loaded" line, so the new level may
	// lag it by a moment: poll until a request leaves no access line.
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := countAccess()
		in.get(t, "/healthz")
		if countAccess() == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("log.level warn from the changed file never took effect")
		}
		time.Sleep(10 * time.Millisecond)
	}
	before := countAccess()
	in.get(t, "/healthz")
	if got := countAccess(); got != before {
		t.Fatalf("after switching to warn, access lines went %d → %d", before, got)
	}

	writeConfig(t, file, "log: [this is: not yaml\n")
	waitForLog(t, in.stderr, `reload failed; keeping the last good configuration`, 1)
	in.get(t, "/healthz")
	if got := countAccess(); got != before {
		t.Fatalf("a broken file must keep log.level warn; access lines went %d → %d", before, got)
	}
	if code, _ := in.get(t, "/readyz"); code != 200 {
		t.Fatalf("readyz after a broken config file = %d", code)
	}
}

// waitForLog waits until needle appears at least n times in buf.
func waitForLog(t *testing.T, buf *syncBuffer, needle string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if strings.Count(buf.String(), needle) >= n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("log never showed %q\n%s", needle, buf.String())
}

func TestMigrateTwice(t *testing.T) {
	run2 := func(t *testing.T, driver, dsn string) {
		dir := t.TempDir()
		file := filepath.Join(dir, "changeflow.yaml")
		writeConfig(t, file, fmt.Sprintf("database:\n  driver: %s\n  dsn: %q\n", driver, dsn))
		var outs []string
		for i := 0; i < 2; i++ {
			var out, errb syncBuffer
			if err := run(context.Background(), []string{"changeflow", "migrate", "--config", file},
				func(string) string { return "" }, &out, &errb); err != nil {
				t.Fatalf("migrate #%d: %v\n%s", i+1, err, errb.String())
			}
			outs = append(outs, out.String())
		}
		if !strings.Contains(outs[0], "applied") {
			t.Fatalf("first migrate should apply migrations, said %q", outs[0])
		}
		if !strings.Contains(outs[1], "schema is current") {
			t.Fatalf("second migrate should apply nothing, said %q", outs[1])
		}
	}
	for _, driver := range storetest.Drivers() {
		t.Run(driver, func(t *testing.T) { run2(t, driver, storetest.NewDatabase(t, driver)) })
	}
}

// TestServeNoMigrateWaitsForTheMigrator: `serve --no-migrate` on a fresh
// database leaves the schema alone and does not serve until a designated
// `changeflow migrate` has run; then it serves, ready.
func TestServeNoMigrateWaitsForTheMigrator(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "changeflow.yaml")
	writeConfig(t, file, sqliteConfig(t, dir, ""))
	waiting := make(chan struct{})
	var stderr syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// The migrator runs once serve said it is waiting: proof that serve
		// did not migrate by itself.
		for !strings.Contains(stderr.String(), "waiting for the schema") {
			if ctx.Err() != nil {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		close(waiting)
	}()
	var out syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"changeflow", "serve", "--no-migrate", "--config", file}, func(string) string { return "" }, &out, &stderr)
	}()
	select {
	case <-waiting:
	case err := <-done:
		t.Fatalf("serve --no-migrate exited before waiting: %v\n%s", err, stderr.String())
	}
	if strings.Contains(out.String(), "serving on") {
		t.Fatal("serve --no-migrate served before the schema was migrated")
	}
	var mout, merr syncBuffer
	if err := run(context.Background(), []string{"changeflow", "migrate", "--config", file}, func(string) string { return "" }, &mout, &merr); err != nil {
		t.Fatalf("migrate: %v\n%s", err, merr.String())
	}
	if !strings.Contains(mout.String(), "applied") {
		t.Fatalf("the migrator applied nothing (did serve migrate?): %q", mout.String())
	}
	addr := regexp.MustCompile(`serving on (http://\S+)`)
	for m := addr.FindStringSubmatch(out.String()); m == nil; m = addr.FindStringSubmatch(out.String()) {
		select {
		case err := <-done:
			t.Fatalf("serve exited: %v\n%s", err, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	in := &instance{base: addr.FindStringSubmatch(out.String())[1]}
	if code, body := in.get(t, "/readyz"); code != 200 {
		t.Fatalf("readyz after the migrator ran = %d %v", code, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve returned %v on shutdown", err)
	}
}

func TestCommandLine(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr bool
		wantOut string
	}{
		{"version prints the version", []string{"changeflow", "version"}, false, "changeflow dev"},
		{"help prints usage", []string{"changeflow", "help"}, false, "Usage:"},
		{"no command is a usage error", []string{"changeflow"}, true, ""},
		{"unknown command is a usage error", []string{"changeflow", "frobnicate"}, true, ""},
		{"unknown flag is an error", []string{"changeflow", "serve", "--nope"}, true, ""},
		{"stray arguments are an error", []string{"changeflow", "migrate", "extra"}, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb syncBuffer
			err := run(context.Background(), tt.args, func(string) string { return "" }, &out, &errb)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if !strings.Contains(out.String(), tt.wantOut) {
				t.Fatalf("stdout %q lacks %q", out.String(), tt.wantOut)
			}
		})
	}
}

func TestServeRefusesAnUnusableDatabaseDriver(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "changeflow.yaml")
	writeConfig(t, file, "database:\n  driver: oracle\n")
	var out, errb syncBuffer
	err := run(context.Background(), []string{"changeflow", "serve", "--config", file},
		func(string) string { return "" }, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "database.driver") {
		t.Fatalf("err = %v, want a database.driver error", err)
	}
}

func TestLocalProfileIsWrittenOnceAndKept(t *testing.T) {
	dir := t.TempDir()
	f, err := prepareLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f, []byte("# edited by the user\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := prepareLocal(dir); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(f)
	if string(b) != "# edited by the user\n" {
		t.Fatal("prepareLocal overwrote the user's edits")
	}
	sc := bufio.NewScanner(bytes.NewReader(mustRead(t, filepath.Join(dir, "directory.yaml"))))
	found := false
	for sc.Scan() {
		if strings.Contains(sc.Text(), "E10023") {
			found = true
		}
	}
	if !found {
		t.Fatal("local directory lacks alice's employee id E10023")
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestServeStartsEmbeddedSimulators is the local run's shape: sim.embedded
// starts every simulator beside the service, and the simulated GitLab
// answers its REST API with the local world's tokens.
func TestServeStartsEmbeddedSimulators(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "changeflow.yaml")
	writeConfig(t, file, sqliteConfig(t, dir, "sim:\n  embedded: true\n  listen: 127.0.0.1:0\n"))
	in := startServe(t, file, nil)
	m := regexp.MustCompile(`simulators on (http://\S+)`).FindStringSubmatch(in.stdout.String())
	if m == nil {
		t.Fatalf("no simulators line on stdout:\n%s", in.stdout.String())
	}
	assertLocalGitLab(t, m[1])
}

func TestSimCommandServesTheLocalWorld(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	out, errb := &syncBuffer{}, &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"changeflow", "sim", "--listen", "127.0.0.1:0", "--callback-url", "http://127.0.0.1:1"},
			func(string) string { return "" }, out, errb)
	}()
	re := regexp.MustCompile(`simulators on (http://\S+)`)
	deadline := time.Now().Add(20 * time.Second)
	var base string
	for base == "" && time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			base = m[1]
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if base == "" {
		cancel()
		t.Fatalf("sim never reported its address\n%s", errb.String())
	}
	assertLocalGitLab(t, base)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("sim returned %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("sim did not stop after cancellation")
	}
}

// assertLocalGitLab checks the simulated GitLab at base serves project 1
// (config/bindings) to the committer bot and refuses an unknown token.
func assertLocalGitLab(t *testing.T, base string) {
	t.Helper()
	get := func(token string) (int, map[string]any) {
		req, _ := http.NewRequest("GET", base+"/gitlab/api/v4/projects/1", nil)
		req.Header.Set("PRIVATE-TOKEN", token)
		resp, err := procClient.Do(req)
		if err != nil {
			t.Fatalf("GET project: %v", err)
		}
		defer resp.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body
	}
	code, body := get("local-committer-token")
	if code != 200 || body["path_with_namespace"] != "config/bindings" || body["default_branch"] != "main" {
		t.Fatalf("project 1 = %d %v", code, body)
	}
	if code, _ := get("no-such-token"); code != 401 {
		t.Fatalf("unknown token = %d, want 401", code)
	}
}
