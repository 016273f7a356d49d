package main

import (
	"bufio"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeShutdownEndsOpenEventStreams: a serve process with an open live
// status stream exits promptly on SIGTERM, the stream ending cleanly —
// with server.shutdownTimeout at an hour, a stream that held the
// graceful shutdown would keep the process alive until the harness's
// forced kill.
func TestServeShutdownEndsOpenEventStreams(t *testing.T) {
	t.Parallel()
	dsn, _ := mariaDB(t)
	dir := t.TempDir()
	port := freePort(t)
	sim := startSim(t, dir, []string{"http://127.0.0.1:" + strconv.Itoa(port)})
	file := filepath.Join(dir, "changeflow.yaml")
	writeConfig(t, file, procConfig(dsn, sim.base, `server:
  shutdownTimeout: 1h
workflow:
  approveFirst: true
targets:
  solo: {accessMode: OPEN, batching: false, maxDays: 30}
`))
	s := startServeProc(t, dir, file, "ev-1", port)
	s.submit(t, "alice", "ev-shutdown", "solo")

	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, s.base+"/api/requests/ev-shutdown/events", nil)
	req.Header.Set("X-Auth-Request-User", "alice")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %d", resp.StatusCode)
	}
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	for l := range lines {
		if strings.HasPrefix(l, "event: request") {
			break
		}
	}

	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the process to exit on SIGTERM with a stream open", s.exited)
	if code := s.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit code %d:\n%s", code, tail(s.output(), 2000))
	}
	ended := time.After(10 * time.Second)
	for {
		select {
		case _, open := <-lines:
			if !open {
				return // the stream ended
			}
		case <-ended:
			t.Fatal("the stream did not end with the process")
		}
	}
}
