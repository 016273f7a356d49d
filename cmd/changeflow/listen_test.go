package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeLocalOnPortsOfYourChoice is the README's "change the ports":
// `serve --local --listen A --sim-listen B` in a fresh directory serves
// the product on A and every simulator on B, and the product talks to the
// simulators on B (the URLs are derived, not the 8090 defaults).
func TestServeLocalOnPortsOfYourChoice(t *testing.T) {
	t.Chdir(t.TempDir()) // --local writes ./var
	appAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	simAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	ctx, cancel := context.WithCancel(context.Background())
	out, errb := &syncBuffer{}, &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"changeflow", "serve", "--local", "--listen", appAddr, "--sim-listen", simAddr},
			func(string) string { return "" }, out, errb)
	}()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve returned %v on shutdown", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop after cancellation")
		}
	}()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(out.String(), "serving on http://"+appAddr) {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("serve exited early: %v\nstderr:\n%s", err, errb.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no serving line for %s:\n%s\nstderr:\n%s", appAddr, out.String(), errb.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(out.String(), "simulators on http://"+simAddr) {
		t.Fatalf("simulators not on %s:\n%s", simAddr, out.String())
	}
	assertLocalGitLab(t, "http://"+simAddr)

	// The web app is told the simulators' real address, and the effective
	// configuration shows every dependency URL derived from sim.listen.
	var appCfg struct {
		Data struct {
			OIDC       struct{ Issuer string }
			Simulators struct{ Index string }
		}
	}
	getJSON(t, "http://"+appAddr+"/api/app-config", nil, &appCfg)
	if appCfg.Data.OIDC.Issuer != "http://"+simAddr+"/oidc/" || appCfg.Data.Simulators.Index != "http://"+simAddr+"/" {
		t.Fatalf("app config = %+v, want the simulators on %s", appCfg.Data, simAddr)
	}
	var opsCfg struct {
		Data struct {
			Items []struct{ Key, Value, Reason string }
		}
	}
	getJSON(t, "http://"+appAddr+"/ops/config", map[string]string{"X-Auth-Request-User": "olivia"}, &opsCfg)
	want := map[string]string{
		"server.listen": appAddr, "sim.listen": simAddr,
		"gitlab.baseURL": "http://" + simAddr + "/gitlab/", "approval.baseURL": "http://" + simAddr + "/approval/",
		"permission.baseURL": "http://" + simAddr + "/permission/", "oidc.issuer": "http://" + simAddr + "/oidc/",
	}
	for _, it := range opsCfg.Data.Items {
		if w, ok := want[it.Key]; ok {
			if it.Value != w {
				t.Errorf("%s = %q (%s), want %q", it.Key, it.Value, it.Reason, w)
			}
			delete(want, it.Key)
		}
	}
	if len(want) > 0 {
		t.Fatalf("/ops/config lacks %v (items %d)", want, len(opsCfg.Data.Items))
	}
	// The product really talks to the simulators on simAddr: a permission
	// check through the permission simulator lets olivia read the config
	// above, and alice (no rule) is denied.
	code := status(t, "http://"+appAddr+"/ops/config", map[string]string{"X-Auth-Request-User": "alice"})
	if code != http.StatusForbidden {
		t.Fatalf("alice on /ops/config = %d, want 403", code)
	}
}

// TestServeRefusesABusyPort: a port another process holds ends serve
// before it serves or migrates, with an error naming the flag, the key
// and its environment variable — for the service's port and for the
// simulators'.
func TestServeRefusesABusyPort(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyAddr := busy.Addr().String()
	free := fmt.Sprintf("127.0.0.1:%d", freePort(t))

	for _, tc := range []struct {
		name  string
		extra string
		args  []string
		want  []string
	}{
		{"server.listen from the file", "", []string{"--listen", busyAddr},
			[]string{busyAddr, "--listen", "server.listen", "CHANGEFLOW_SERVER_LISTEN", "already in use"}},
		{"sim.listen from the flag", "sim:\n  embedded: true\n", []string{"--listen", free, "--sim-listen", busyAddr},
			[]string{busyAddr, "--sim-listen", "sim.listen", "CHANGEFLOW_SIM_LISTEN", "already in use"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "changeflow.yaml")
			writeConfig(t, file, sqliteConfig(t, dir, tc.extra))
			out, errb := &syncBuffer{}, &syncBuffer{}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			err := run(ctx, append([]string{"changeflow", "serve", "--config", file}, tc.args...), func(string) string { return "" }, out, errb)
			if err == nil {
				t.Fatal("serve on a busy port returned nil")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
			if strings.Contains(out.String(), "serving on") || strings.Contains(errb.String(), "migrations applied") {
				t.Fatalf("serve got as far as serving or migrating:\nstdout:\n%s\nstderr:\n%s", out.String(), errb.String())
			}
		})
	}
}

func TestServeRefusesAMalformedListenFlag(t *testing.T) {
	err := run(context.Background(), []string{"changeflow", "serve", "--listen", "8081"}, func(string) string { return "" }, &syncBuffer{}, &syncBuffer{})
	if err == nil || !strings.Contains(err.Error(), "--listen") || !strings.Contains(err.Error(), "host:port") {
		t.Fatalf("serve --listen 8081 = %v, want a usage error naming --listen and host:port", err)
	}
}

func getJSON(t *testing.T, url string, headers map[string]string, v any) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for k, val := range headers {
		req.Header.Set(k, val)
	}
	resp, err := procClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s = %d", url, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: decode: %v", url, err)
	}
}

func status(t *testing.T, url string, headers map[string]string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for k, val := range headers {
		req.Header.Set(k, val)
	}
	resp, err := procClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestHealthcheckAsksTheConfiguredListener: `changeflow healthcheck` (the
// image's health check, which has no shell) finds the instance from
// server.listen in the environment, succeeds while it is ready and fails
// once nothing listens there.
func TestHealthcheckAsksTheConfiguredListener(t *testing.T) {
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	file := filepath.Join(dir, "changeflow.yaml")
	writeConfig(t, file, strings.Replace(sqliteConfig(t, dir, ""), "listen: 127.0.0.1:0", "listen: "+addr, 1))
	in := startServe(t, file, nil)
	env := map[string]string{"CHANGEFLOW_SERVER_LISTEN": ":" + strings.Split(addr, ":")[1]}
	getenv := func(k string) string { return env[k] }
	for _, args := range [][]string{{}, {"--live"}, {"--url", in.base}} {
		out := &syncBuffer{}
		if err := run(context.Background(), append([]string{"changeflow", "healthcheck"}, args...), getenv, out, &syncBuffer{}); err != nil {
			t.Fatalf("healthcheck %v against a ready instance: %v", args, err)
		}
		if !strings.Contains(out.String(), " ok") {
			t.Fatalf("healthcheck %v printed %q", args, out.String())
		}
	}
	// The probe's own configuration names a MariaDB instance but holds no
	// DSN (it lives in the instance's secret environment, not the
	// probe's): the probe needs only server.listen and must still pass.
	probe := filepath.Join(dir, "probe.yaml")
	writeConfig(t, probe, "server:\n  listen: "+addr+"\ndatabase:\n  driver: mysql\n")
	none := func(string) string { return "" }
	if err := run(context.Background(), []string{"changeflow", "healthcheck", "--config", probe}, none, &syncBuffer{}, &syncBuffer{}); err != nil {
		t.Fatalf("healthcheck --config without the database DSN: %v", err)
	}
	in.stop(t)
	if err := run(context.Background(), []string{"changeflow", "healthcheck", "--timeout", "2s"}, getenv, &syncBuffer{}, &syncBuffer{}); err == nil {
		t.Fatal("healthcheck succeeded with nothing listening")
	}
}
