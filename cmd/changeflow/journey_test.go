package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// freePort returns a loopback port nobody listens on right now, and one
// this test binary has never handed out before. The port is free only
// until the child process binds it: two parallel tests asking at nearly
// the same time could otherwise both get it, and then one's instance
// "answers" /healthz from the other's server (a submit then met a
// simulator's 404). Never handing a port out twice closes that window
// among this package's own processes.
func freePort(t *testing.T) int {
	t.Helper()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if _, taken := handedOutPorts.LoadOrStore(port, true); !taken {
			return port
		}
	}
	t.Fatal("no loopback port this test binary has not handed out already")
	return 0
}

// handedOutPorts are the ports freePort returned (port → true).
var handedOutPorts sync.Map

// TestLocalJourneyReachesValidated is the composition root's end-to-end
// check: the local profile's shape (embedded simulators, auto-approval,
// deployment callback) with the real binary's wiring. bob asks for a
// non-batching target and the request reaches VALIDATED with nobody
// touching anything, through the approval callback, a real MR in the
// simulated GitLab, its pipeline, two bot approvals, the merge and the
// deployment callback.
func TestLocalJourneyReachesValidated(t *testing.T) {
	in, simPort := startLocalProfile(t)

	call := func(method, path, body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, in.base+path, bytes.NewBufferString(body))
		req.Header.Set("X-Auth-Request-User", "E10024") // bob, by employee ID
		req.Header.Set("Content-Type", "application/json")
		resp, err := procClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		var env map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
			t.Fatalf("%s %s: decode: %v", method, path, err)
		}
		return resp.StatusCode, env
	}

	code, env := call("POST", "/api/requests", `{"operationId":"journey-1","targetKey":"billing-dashboard","reason":"month-end close","days":2}`)
	if code != 202 || env["code"] != "ACCEPTED" {
		t.Fatalf("submit = %d %v", code, env)
	}
	deadline := time.Now().Add(60 * time.Second)
	var last map[string]any
	for time.Now().Before(deadline) {
		_, env := call("GET", "/api/requests/journey-1", "")
		last, _ = env["data"].(map[string]any)
		if last != nil && last["status"] == "VALIDATED" {
			break
		}
		if last != nil && last["hint"] == "CONTACT_MAINTAINERS" {
			t.Fatalf("request failed deterministically: %v", last)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if last == nil || last["status"] != "VALIDATED" {
		t.Fatalf("request did not reach VALIDATED within 60s; last state %v\nstderr:\n%s", last, in.stderr.String())
	}
	if subject := last["subject"]; subject != "bob" {
		t.Fatalf("subject = %v, want the canonical account bob", subject)
	}
	mr, _ := last["mr"].(map[string]any)
	if mr == nil || mr["iid"] == nil {
		t.Fatalf("a validated request names its MR; got %v", last)
	}

	// The change is really in the config repository's default branch.
	req, _ := http.NewRequest("GET", fmt.Sprintf("http://127.0.0.1:%d/gitlab/api/v4/projects/1/repository/files/bindings%%2Fbilling-dashboard.yaml/raw?ref=main", simPort), nil)
	req.Header.Set("PRIVATE-TOKEN", "local-maintainer-token")
	resp, err := procClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(buf.String(), "bob") || !strings.Contains(buf.String(), "journey-1") {
		t.Fatalf("bindings file on main = %d %q; want bob's entry with operation journey-1", resp.StatusCode, buf.String())
	}

	// The success metric counted the flip exactly once. It is emitted
	// after the flip commits (I9), so it may trail the state by a moment.
	var lines string
	for {
		mresp, err := procClient.Get(in.base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		buf.Reset()
		_, _ = buf.ReadFrom(mresp.Body)
		mresp.Body.Close()
		if lines = grepLines(buf.String(), "changeflow_requests_validated_total{"); lines != "" || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if lines != `changeflow_requests_validated_total{target="billing-dashboard"} 1` {
		t.Fatalf("validated metric not counted exactly once:\n%s", lines)
	}
}

// startLocalProfile runs serve --local on the local profile, moved to
// free ports and a temporary directory, and returns the instance and the
// simulators' port.
func startLocalProfile(t *testing.T) (*instance, int) {
	t.Helper()
	dir := t.TempDir()
	simPort := freePort(t)
	local, err := localFiles.ReadFile("local/changeflow.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dirFile, err := localFiles.ReadFile("local/directory.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "directory.yaml"), dirFile, 0o644); err != nil {
		t.Fatal(err)
	}
	// The local profile, moved to free ports and a temporary directory.
	// Only sim.listen names the simulators' port: every simulator URL is
	// derived from it, so this journey also proves that one setting moves
	// them all.
	cfg := string(local)
	for old, repl := range map[string]string{
		"listen: 127.0.0.1:8080": "listen: 127.0.0.1:0",
		"127.0.0.1:8090":         fmt.Sprintf("127.0.0.1:%d", simPort),
		"file:var/changeflow.db": "file:" + filepath.Join(dir, "cf.db"),
		"var/directory.yaml":     filepath.Join(dir, "directory.yaml"),
		"level: info":            "level: warn",
	} {
		if !strings.Contains(cfg, old) {
			t.Fatalf("local profile no longer contains %q", old)
		}
		cfg = strings.ReplaceAll(cfg, old, repl)
	}
	file := filepath.Join(dir, "changeflow.yaml")
	writeConfig(t, file, cfg)
	// --local: the local profile runs on the simulators' published tokens,
	// which serve refuses under any other profile.
	in := startServe(t, file, nil, "--local")
	return in, simPort
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
