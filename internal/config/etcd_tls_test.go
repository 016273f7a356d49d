package config

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// testCA is a throwaway certificate authority.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue writes a certificate signed by ca and its key into dir and returns
// their paths: a server certificate for 127.0.0.1, or a client one.
func (ca testCA) issue(t *testing.T, dir, name string, server bool) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		tmpl.DNSNames = []string{"localhost"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	kb, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600))
	return certFile, keyFile
}

func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// secureEtcd is a real etcd serving clients over TLS with client
// certificates required and password authentication on, started the way
// scripts/test-services.sh starts its etcd.
type secureEtcd struct {
	endpoint         string
	caFile           string
	certFile         string // a client certificate the server trusts
	keyFile          string
	ca               testCA
	rootUser, rootPW string
}

func startSecureEtcd(t *testing.T) secureEtcd {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		if os.Getenv("CHANGEFLOW_TEST_REQUIRE_SERVICES") == "1" {
			t.Fatal("etcd not installed but CHANGEFLOW_TEST_REQUIRE_SERVICES=1")
		}
		t.Skip("etcd not installed (apt-get install -y etcd-server)")
	}
	dir := t.TempDir()
	ca := newTestCA(t, "changeflow test CA")
	caFile := filepath.Join(dir, "ca.crt")
	require.NoError(t, os.WriteFile(caFile, ca.pem, 0o600))
	srvCert, srvKey := ca.issue(t, dir, "server", true)
	cliCert, cliKey := ca.issue(t, dir, "changeflow", false)
	cport, pport := freeLoopbackPort(t), freeLoopbackPort(t)
	client := fmt.Sprintf("https://127.0.0.1:%d", cport)
	peer := fmt.Sprintf("http://127.0.0.1:%d", pport)
	var logs bytes.Buffer
	cmd := exec.Command(bin, "--name", "s", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "s="+peer, "--initial-cluster-state", "new",
		"--cert-file", srvCert, "--key-file", srvKey, "--trusted-ca-file", caFile, "--client-cert-auth")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	require.NoError(t, cmd.Start())
	var once sync.Once
	t.Cleanup(func() {
		once.Do(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		if t.Failed() {
			t.Logf("etcd log:\n%s", logs.String())
		}
	})

	pair, err := tls.LoadX509KeyPair(cliCert, cliKey)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.pem)
	tlsCfg := &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	admin, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, TLS: tlsCfg, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	// Wait for the server by asking it, not by sleeping: each Status call
	// has its own deadline, and the whole wait is bounded.
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err = admin.Status(ctx, client)
		cancel()
		if err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "etcd did not come up: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Password authentication on: a root user (etcd requires one), and
	// changeflow's own user with read access to its prefix only.
	_, err = admin.UserAdd(ctx, "root", "root-pw")
	require.NoError(t, err)
	_, err = admin.UserGrantRole(ctx, "root", "root")
	require.NoError(t, err)
	_, err = admin.Put(ctx, "/changeflow/workflow/approveFirst", "true")
	require.NoError(t, err)
	_, err = admin.Put(ctx, "/changeflow/batch/maxRequests", "9")
	require.NoError(t, err)
	_, err = admin.RoleAdd(ctx, "changeflow-read")
	require.NoError(t, err)
	_, err = admin.RoleGrantPermission(ctx, "changeflow-read", "/changeflow/", clientv3.GetPrefixRangeEnd("/changeflow/"), clientv3.PermissionType(clientv3.PermRead))
	require.NoError(t, err)
	_, err = admin.UserAdd(ctx, "changeflow", "cf-pw")
	require.NoError(t, err)
	_, err = admin.UserGrantRole(ctx, "changeflow", "changeflow-read")
	require.NoError(t, err)
	_, err = admin.AuthEnable(ctx)
	require.NoError(t, err)
	_ = admin.Close()
	return secureEtcd{ca: ca, endpoint: client, caFile: caFile, certFile: cliCert, keyFile: cliKey, rootUser: "root", rootPW: "root-pw"}
}

// loadWith loads a configuration whose etcd settings come from the
// environment, and returns the snapshot and what the manager logged.
func loadWith(t *testing.T, env map[string]string) (*Snapshot, string) {
	t.Helper()
	o := testOptions("")
	o.Environ = []string{"CHANGEFLOW_CONFIG_ETCD_DIALTIMEOUT=3s"}
	for k, v := range env {
		o.Environ = append(o.Environ, k+"="+v)
	}
	var logs syncBuffer
	o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	return mustLoad(t, o).Current(), logs.String()
}

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

// TestEtcdOverTLSWithAuth connects to a real etcd that requires TLS,
// client certificates and passwords, and then performs the attacks the
// settings exist for: a client without the CA (a server it cannot verify),
// without a client certificate, with a wrong password, in plaintext, and
// against a server presenting another CA's certificate. Only the fully
// configured client reads etcd's values; every other one starts without
// the config center (its values are not applied) and says why, and none
// falls back to plaintext.
func TestEtcdOverTLSWithAuth(t *testing.T) {
	e := startSecureEtcd(t)
	full := map[string]string{
		"CHANGEFLOW_CONFIG_ETCD_ENDPOINTS": e.endpoint,
		"CHANGEFLOW_CONFIG_ETCD_TLS_CA":    e.caFile,
		"CHANGEFLOW_CONFIG_ETCD_TLS_CERT":  e.certFile,
		"CHANGEFLOW_CONFIG_ETCD_TLS_KEY":   e.keyFile,
		"CHANGEFLOW_CONFIG_ETCD_USERNAME":  "changeflow",
		"CHANGEFLOW_CONFIG_ETCD_PASSWORD":  "cf-pw",
	}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range full {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "" {
				delete(m, kv[i])
			} else {
				m[kv[i]] = kv[i+1]
			}
		}
		return m
	}

	t.Run("TLS, client certificate and password: etcd's values apply", func(t *testing.T) {
		s, logs := loadWith(t, full)
		approve, r := s.Bool(KeyWorkflowApproveFirst)
		require.True(t, approve)
		require.Equal(t, SourceEtcd, r.Source, logs)
		require.Equal(t, 9, s.Batch().MaxRequests)
		require.Contains(t, logs, "tls=true")
		require.NotContains(t, logs, "cf-pw", "the password is never logged")
		// The settings themselves are reported masked.
		_, pr := s.String(KeyEtcdPassword)
		require.NotContains(t, pr.Value, "cf-pw")
	})

	other := newTestCA(t, "another CA")
	otherCA := filepath.Join(t.TempDir(), "other-ca.crt")
	require.NoError(t, os.WriteFile(otherCA, other.pem, 0o600))
	badCA := filepath.Join(t.TempDir(), "not-a-ca.pem")
	require.NoError(t, os.WriteFile(badCA, []byte("not a certificate"), 0o600))
	plain := "http" + strings.TrimPrefix(e.endpoint, "https")
	// A certificate from the right CA for a user etcd does not know: with
	// --client-cert-auth etcd takes the certificate's CN as the user when no
	// password is sent, so the certificate alone is not a key to the data.
	stranger, strangerKey := e.ca.issue(t, t.TempDir(), "mallory", false)

	for _, tc := range []struct {
		name string
		env  map[string]string
		why  string // in the log
	}{
		{"a server it cannot verify (the system roots do not know the CA)", with("CHANGEFLOW_CONFIG_ETCD_TLS_CA", ""), "etcd client not created"},
		{"a server whose certificate another CA signed (a man in the middle)", with("CHANGEFLOW_CONFIG_ETCD_TLS_CA", otherCA), "etcd client not created"},
		{"no client certificate", with("CHANGEFLOW_CONFIG_ETCD_TLS_CERT", "", "CHANGEFLOW_CONFIG_ETCD_TLS_KEY", ""), "etcd client not created"},
		{"a wrong password", with("CHANGEFLOW_CONFIG_ETCD_PASSWORD", "guess"), "invalid user ID or password"},
		{"a certificate of a user etcd does not know, no password", with("CHANGEFLOW_CONFIG_ETCD_USERNAME", "", "CHANGEFLOW_CONFIG_ETCD_PASSWORD", "",
			"CHANGEFLOW_CONFIG_ETCD_TLS_CERT", stranger, "CHANGEFLOW_CONFIG_ETCD_TLS_KEY", strangerKey), "etcd unreachable"},
		{"plaintext next to TLS settings is refused, not tried", with("CHANGEFLOW_CONFIG_ETCD_ENDPOINTS", plain), "http:// endpoint with TLS configured"},
		{"a CA file without a certificate", with("CHANGEFLOW_CONFIG_ETCD_TLS_CA", badCA), "holds no PEM certificate"},
		{"a certificate without its key", with("CHANGEFLOW_CONFIG_ETCD_TLS_KEY", ""), "must be set together"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, logs := loadWith(t, tc.env)
			approve, r := s.Bool(KeyWorkflowApproveFirst)
			require.False(t, approve, "etcd's value applied: %s", logs)
			require.NotEqual(t, SourceEtcd, r.Source)
			_, br := s.Int(KeyBatchMaxRequests)
			require.NotEqual(t, SourceEtcd, br.Source)
			require.True(t, strings.Contains(logs, tc.why), "the log does not say %q", tc.why)
		})
	}
}
