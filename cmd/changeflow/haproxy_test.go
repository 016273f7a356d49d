package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"changeflow/internal/store/storetest"
)

// TestHAProxyExample proves docs/haproxy.example.cfg with the real
// HAProxy: two `changeflow serve` instances on one MariaDB database, the
// example file with only the values its header says to replace (the bind
// address, the certificate, the two servers), and requests through it.
//
//   - Both instances serve (round robin), over TLS.
//   - The identity headers a client sends are dropped: alice's
//     X-Auth-Request-User logs her in directly (the test instances trust
//     loopback) but not through the proxy.
//   - An instance that is alive but not ready — its database connection
//     cut, so /healthz is 200 and /readyz 503 — gets no requests once the
//     health check noticed, and gets them again once it is ready: the
//     check is readiness, not liveness.
//   - An instance killed with SIGKILL costs no request: every one sent
//     right after the kill is answered, by the other instance.
//
// Without haproxy it skips, unless CHANGEFLOW_TEST_REQUIRE_SERVICES=1.
func TestHAProxyExample(t *testing.T) {
	t.Parallel()
	bin, err := osexec.LookPath("haproxy")
	if err != nil {
		if os.Getenv(storetest.EnvRequireServices) == "1" {
			t.Fatal("haproxy not installed but " + storetest.EnvRequireServices + "=1")
		}
		t.Skip("haproxy not installed (apt-get install -y haproxy)")
	}
	dsn, _ := mariaDB(t)
	dir := t.TempDir()
	portA, portB := freePort(t), freePort(t)
	sim := startSim(t, dir, []string{fmt.Sprintf("http://127.0.0.1:%d", portA), fmt.Sprintf("http://127.0.0.1:%d", portB)})

	// Instance b reaches the database through a connection the test can
	// cut; a shares the database directly.
	cut := newCuttableProxy(t, dsnAddr(t, dsn))
	fileA, fileB := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	// The test instances trust the auth-proxy header from loopback, so
	// they check Host: the health check's Host is the public name.
	public := "server:\n  publicURL: https://changeflow.example.com/\n"
	writeConfig(t, fileA, procConfig(dsn, sim.base, public))
	writeConfig(t, fileB, procConfig(dsnAt(t, dsn, cut.addr()), sim.base, public))
	a := startServeProc(t, dir, fileA, "lb-a", portA)
	b := startServeProc(t, dir, fileB, "lb-b", portB)

	example, err := os.ReadFile(filepath.Join("..", "..", "docs", "haproxy.example.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	certFile, pool := selfSignedPEM(t, dir)
	lbAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cfg := string(example)
	for _, r := range [][2]string{
		{"bind :443 ", "bind " + lbAddr + " "},
		{"/etc/haproxy/certs/changeflow.pem", certFile},
		{"10.0.0.6:8080", fmt.Sprintf("127.0.0.1:%d", portA)},
		{"10.0.0.7:8080", fmt.Sprintf("127.0.0.1:%d", portB)},
	} {
		if !strings.Contains(cfg, r[0]) {
			t.Fatalf("docs/haproxy.example.cfg no longer contains %q, the value its header says to replace", r[0])
		}
		cfg = strings.ReplaceAll(cfg, r[0], r[1])
	}
	cfgFile := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := osexec.Command(bin, "-c", "-f", cfgFile).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c on the example: %v\n%s", err, out)
	}
	startHAProxy(t, bin, cfgFile, filepath.Join(dir, "haproxy.log"), lbAddr)

	lb := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	base := "https://" + lbAddr
	// burst sends n requests through the proxy, each of which must be
	// answered 200, and returns how many each instance served.
	burst := func(n int) (onA, onB int) {
		beforeA, beforeB := appConfigServed(t, a), appConfigServed(t, b)
		for i := range n {
			resp, err := lb.Get(base + "/api/app-config")
			if err != nil {
				t.Fatalf("request %d through the proxy: %v", i, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("request %d through the proxy = %d", i, resp.StatusCode)
			}
		}
		return appConfigServed(t, a) - beforeA, appConfigServed(t, b) - beforeB
	}
	until := func(what string, cond func(onA, onB int) bool) {
		t.Helper()
		var onA, onB int
		deadline := time.Now().Add(30 * time.Second)
		for onA, onB = burst(10); !cond(onA, onB); onA, onB = burst(10) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting until %s: the last 10 requests went %d to a, %d to b", what, onA, onB)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	until("both instances serve", func(onA, onB int) bool { return onA > 0 && onB > 0 })

	// The proxy drops a client's identity header.
	if code := getStatus(t, http.DefaultClient, a.base+"/api/requests", "alice"); code != http.StatusOK {
		t.Fatalf("alice's header directly at the instance = %d, want 200 (it trusts loopback)", code)
	}
	if code := getStatus(t, lb, base+"/api/requests", "alice"); code != http.StatusUnauthorized {
		t.Fatalf("alice's header through the proxy = %d, want 401: the proxy must drop it", code)
	}

	// b alive but not ready: out of rotation.
	cut.cut()
	if code := getStatus(t, http.DefaultClient, b.base+"/healthz", ""); code != http.StatusOK {
		t.Fatalf("b's /healthz with its database cut = %d, want 200 (alive)", code)
	}
	waitFor(t, 30*time.Second, "b's /readyz to fail", func() bool {
		return getStatus(t, http.DefaultClient, b.base+"/readyz", "") == http.StatusServiceUnavailable
	})
	until("only a serves", func(onA, onB int) bool { return onA == 10 && onB == 0 })

	// b ready again: back in rotation.
	cut.restore()
	waitFor(t, 30*time.Second, "b's /readyz to pass", func() bool {
		return getStatus(t, http.DefaultClient, b.base+"/readyz", "") == http.StatusOK
	})
	until("b serves again", func(onA, onB int) bool { return onB > 0 })

	// a killed: not one request lost, all on b.
	a.kill9(t)
	beforeB := appConfigServed(t, b)
	for i := range 20 {
		resp, err := lb.Get(base + "/api/app-config")
		if err != nil {
			t.Fatalf("request %d right after a was killed: %v", i, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d right after a was killed = %d", i, resp.StatusCode)
		}
	}
	if got := appConfigServed(t, b) - beforeB; got != 20 {
		t.Fatalf("b served %d of the 20 requests after a was killed", got)
	}
}

// appConfigServed is how many GET /api/app-config requests s answered,
// from its /metrics: which instance the proxy chose.
func appConfigServed(t *testing.T, s *serveProc) int {
	t.Helper()
	return s.metricSumWhere(t, func(l string) bool {
		return strings.HasPrefix(l, "changeflow_http_requests_total{") && strings.Contains(l, `route="GET /api/app-config"`)
	})
}

// getStatus is the status of GET url (as user through the auth-proxy
// header, when given); 0 when nothing answered.
func getStatus(t *testing.T, c *http.Client, url, user string) int {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if user != "" {
		req.Header.Set("X-Auth-Request-User", user)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// startHAProxy runs haproxy in the foreground (-db) until the test ends,
// and waits until it accepts connections on addr.
func startHAProxy(t *testing.T, bin, cfgFile, logFile, addr string) {
	t.Helper()
	f, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	cmd := osexec.Command(bin, "-db", "-f", cfgFile)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start haproxy: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			b, _ := os.ReadFile(logFile)
			t.Logf("--- haproxy output (tail):\n%s", tail(string(b), 4000))
		}
	})
	waitFor(t, 30*time.Second, "haproxy listening", func() bool {
		select {
		case <-done:
			b, _ := os.ReadFile(logFile)
			t.Fatalf("haproxy exited:\n%s", b)
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
}

// selfSignedPEM writes a certificate for 127.0.0.1 and its key into one
// PEM file, the form HAProxy's crt takes, and returns it with a pool that
// trusts it.
func selfSignedPEM(t *testing.T, dir string) (string, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "changeflow test"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:   time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	out := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})...)
	path := filepath.Join(dir, "changeflow.pem")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return path, pool
}

// dsnAddr is the host:port dsn connects to.
func dsnAddr(t *testing.T, dsn string) string {
	t.Helper()
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return c.Addr
}

// dsnAt is dsn connecting to addr instead.
func dsnAt(t *testing.T, dsn, addr string) string {
	t.Helper()
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	c.Addr = addr
	return c.FormatDSN()
}

// cuttableProxy forwards TCP connections to a target until cut: then
// every open connection is closed and new ones are closed as they
// arrive, as a database lost to one instance looks; restore forwards
// again.
type cuttableProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]bool
}

func newCuttableProxy(t *testing.T, target string) *cuttableProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cuttableProxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	t.Cleanup(func() { _ = ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *cuttableProxy) addr() string { return p.ln.Addr().String() }

func (p *cuttableProxy) serve(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns[c], p.conns[up] = true, true
	p.mu.Unlock()
	go func() { _, _ = io.Copy(up, c); up.Close(); c.Close() }()
	_, _ = io.Copy(c, up)
	c.Close()
	up.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

func (p *cuttableProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
}

func (p *cuttableProxy) restore() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}
