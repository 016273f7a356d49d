package identity_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"changeflow/internal/identity"
	simoidc "changeflow/internal/sim/oidc"
)

const directoryYAML = `
- {account: alice, email: alice@corp.example, employeeId: E10023}
- {account: bob, email: bob@corp.example, employeeId: E10024}
- {account: olivia, email: olivia@corp.example, employeeId: E10031}
- {account: adam, email: adam@corp.example, employeeId: E10001}
`

func directory(t testing.TB) *identity.Directory {
	t.Helper()
	d, problems, err := identity.ParseDirectory(strings.NewReader(directoryYAML))
	if err != nil || len(problems) > 0 {
		t.Fatalf("directory: %v %v", err, problems)
	}
	return d
}

func loopback() []netip.Prefix { return identity.LoopbackPrefixes() }

func proxyRequest(peer string, headers ...string) *http.Request {
	r := httptest.NewRequest("GET", "/api/requests", nil)
	r.RemoteAddr = peer
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	return r
}

func TestProxyLogins(t *testing.T) {
	res := identity.NewResolver(identity.Options{Directory: directory(t), TrustedProxies: loopback})
	tests := []struct {
		name        string
		peer        string
		headers     []string
		wantAccount string
		wantTrusted bool
		wantErr     error
	}{
		{"email-style account resolves to the canonical account", "127.0.0.1:5000",
			[]string{identity.HeaderUser, "Alice@Corp.Example"}, "alice", true, nil},
		{"employee ID resolves to the same account", "127.0.0.1:5000",
			[]string{identity.HeaderUser, "E10023"}, "alice", true, nil},
		{"canonical account resolves to itself", "[::1]:5000",
			[]string{identity.HeaderUser, "alice"}, "alice", true, nil},
		{"email header alone is enough", "127.0.0.1:5000",
			[]string{identity.HeaderEmail, "bob@corp.example"}, "bob", true, nil},
		{"employee ID with a matching email", "127.0.0.1:5000",
			[]string{identity.HeaderUser, "E10024", identity.HeaderEmail, "bob@corp.example"}, "bob", true, nil},
		{"unknown user beside a known email is a login failure, not bob", "127.0.0.1:5000",
			[]string{identity.HeaderUser, "E55555", identity.HeaderEmail, "bob@corp.example"}, "", false, identity.ErrConflictingLogin},
		{"unknown bare ID stays untrusted", "127.0.0.1:5000",
			[]string{identity.HeaderUser, "E99999"}, "E99999", false, nil},
		{"unknown email keeps the whole address and is untrusted", "127.0.0.1:5000",
			[]string{identity.HeaderUser, "alice@partner.example"}, "alice@partner.example", false, nil},
		{"account missing from the directory is untrusted", "127.0.0.1:5000",
			[]string{identity.HeaderUser, "carol"}, "carol", false, nil},
		{"headers naming two people are a login failure", "127.0.0.1:5000",
			[]string{identity.HeaderUser, "E10023", identity.HeaderEmail, "bob@corp.example"}, "", false, identity.ErrConflictingLogin},
		{"garbage user header is a login failure", "127.0.0.1:5000",
			[]string{identity.HeaderUser, "alice smith"}, "", false, identity.ErrInvalidLogin},
		{"headers from an untrusted peer are a login failure", "10.1.2.3:5000",
			[]string{identity.HeaderUser, "alice"}, "", false, identity.ErrUntrustedProxy},
		{"no headers: anonymous, no error", "127.0.0.1:5000", nil, "", false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := res.Resolve(proxyRequest(tt.peer, tt.headers...))
			if !errors.Is(got.Err, tt.wantErr) || (tt.wantErr == nil) != (got.Err == nil) {
				t.Fatalf("err = %v, want %v", got.Err, tt.wantErr)
			}
			if tt.wantErr != nil {
				if got.Authenticated() {
					t.Fatal("a failed login must not be authenticated")
				}
				return
			}
			if got.Identity.Account != tt.wantAccount || got.Identity.Trusted != tt.wantTrusted {
				t.Fatalf("identity = %+v, want account %q trusted %v", got.Identity, tt.wantAccount, tt.wantTrusted)
			}
			if tt.wantAccount != "" && got.Identity.Source != identity.SourceProxy {
				t.Fatalf("source = %q", got.Identity.Source)
			}
		})
	}
}

func TestNoTrustedProxiesMeansNoProxyLogins(t *testing.T) {
	res := identity.NewResolver(identity.Options{Directory: directory(t)})
	got := res.Resolve(proxyRequest("127.0.0.1:1", identity.HeaderUser, "alice"))
	if !errors.Is(got.Err, identity.ErrUntrustedProxy) {
		t.Fatalf("got %+v", got)
	}
}

func TestWithoutADirectoryOnlyAccountsAreTrusted(t *testing.T) {
	res := identity.NewResolver(identity.Options{TrustedProxies: loopback})
	for raw, trusted := range map[string]bool{"alice": true, "E10023": false, "alice@corp.example": false} {
		got := res.Resolve(proxyRequest("127.0.0.1:1", identity.HeaderUser, raw))
		if got.Err != nil || got.Identity.Trusted != trusted {
			t.Errorf("%s: got %+v, want trusted %v", raw, got, trusted)
		}
	}
}

// issuer mounts the OIDC simulator under /oidc, as the composition does.
// When down is set the issuer answers 503 to everything.
type issuer struct {
	sim  *simoidc.Server
	url  string
	down atomic.Bool
	hits atomic.Int64
	jwks atomic.Int64 // downloads of the JWKS
	// hold, when set, makes each JWKS download announce itself on
	// entered and wait for hold to close: a download in flight, on cue.
	hold    chan struct{}
	entered chan struct{}
}

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	sim, err := simoidc.New(simoidc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	is := &issuer{sim: sim}
	mux := http.NewServeMux()
	mux.Handle("/oidc/", http.StripPrefix("/oidc", sim))
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		is.hits.Add(1)
		if strings.HasSuffix(r.URL.Path, "/jwks") {
			is.jwks.Add(1)
			if is.hold != nil {
				is.entered <- struct{}{}
				<-is.hold
			}
		}
		if is.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	is.url = ts.URL + "/oidc"
	sim.SetIssuer(is.url)
	return is
}

func (is *issuer) mint(t *testing.T, req simoidc.TokenRequest) string {
	t.Helper()
	tok, err := is.sim.Mint(req)
	if err != nil {
		t.Fatal(err)
	}
	return tok.Token
}

func bearerRequest(tok string) *http.Request {
	r := httptest.NewRequest("GET", "/api/requests", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	return r
}

func TestBearerTokens(t *testing.T) {
	is := newIssuer(t)
	// A trailing slash on the configured issuer, as in the local profile.
	v := identity.NewOIDC(identity.OIDCOptions{Issuer: is.url + "/",
		Settings: func() identity.DependencySettings { return identity.DependencySettings{Timeout: 5 * time.Second} }})
	res := identity.NewResolver(identity.Options{Directory: directory(t), OIDC: v, TrustedProxies: loopback})

	other, err := simoidc.New(simoidc.Options{Issuer: is.url})
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := other.Mint(simoidc.TokenRequest{Sub: "alice"})
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name        string
		token       string
		wantAccount string
		wantTrusted bool
		wantErr     error
	}{
		{"account subject", is.mint(t, simoidc.TokenRequest{Sub: "alice", Email: "alice@corp.example"}), "alice", true, nil},
		{"email-style subject is not an account", is.mint(t, simoidc.TokenRequest{Sub: "alice@corp.example", Email: "alice@corp.example"}), "", false, identity.ErrInvalidLogin},
		{"employee-ID subject is looked up as an account only", is.mint(t, simoidc.TokenRequest{Sub: "E10023"}), "E10023", false, nil},
		{"opaque subject with a known email is not that person", is.mint(t, simoidc.TokenRequest{Sub: "248289761001", Email: "olivia@corp.example"}), "248289761001", false, nil},
		{"unverified email is not used", is.mint(t, simoidc.TokenRequest{Sub: "E77777", Claims: map[string]any{"email": "adam@corp.example", "email_verified": false}}), "E77777", false, nil},
		{"unknown employee ID is untrusted", is.mint(t, simoidc.TokenRequest{Sub: "E99999"}), "E99999", false, nil},
		{"expired token", is.mint(t, simoidc.TokenRequest{Sub: "alice", TTL: simoidc.TTL{Duration: -time.Minute}}), "", false, identity.ErrInvalidToken},
		{"wrong audience", is.mint(t, simoidc.TokenRequest{Sub: "alice", Aud: simoidc.Audience{"someone-else"}}), "", false, identity.ErrInvalidToken},
		{"signed by a key the issuer never published", foreign.Token, "", false, identity.ErrInvalidToken},
		{"not a JWT", "hello", "", false, identity.ErrInvalidToken},
		{"empty bearer", "", "", false, identity.ErrInvalidToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := res.Resolve(bearerRequest(tt.token))
			if !errors.Is(got.Err, tt.wantErr) || (tt.wantErr == nil) != (got.Err == nil) {
				t.Fatalf("err = %v, want %v", got.Err, tt.wantErr)
			}
			if tt.wantErr == nil && (got.Identity.Account != tt.wantAccount || got.Identity.Trusted != tt.wantTrusted || got.Identity.Source != identity.SourceOIDC) {
				t.Fatalf("identity = %+v, want %q trusted %v", got.Identity, tt.wantAccount, tt.wantTrusted)
			}
		})
	}

	t.Run("a failing token does not fall back to proxy headers", func(t *testing.T) {
		r := bearerRequest("hello")
		r.RemoteAddr = "127.0.0.1:1"
		r.Header.Set(identity.HeaderUser, "alice")
		if got := res.Resolve(r); got.Authenticated() {
			t.Fatalf("got %+v", got)
		}
	})
}

func TestTokenSignedByARotatedAwayKeyFails(t *testing.T) {
	is := newIssuer(t)
	clock := newClock()
	res := identity.NewResolver(identity.Options{Directory: directory(t), OIDC: identity.NewOIDC(identity.OIDCOptions{Issuer: is.url, Now: clock.Now})})
	old := is.mint(t, simoidc.TokenRequest{Sub: "bob"})
	if got := res.Resolve(bearerRequest(old)); !got.Authenticated() {
		t.Fatalf("before rotation: %+v", got)
	}
	if _, err := is.sim.Rotate(true, 0); err != nil {
		t.Fatal(err)
	}
	t.Run("a verifier that never saw the old key rejects it", func(t *testing.T) {
		fresh := identity.NewResolver(identity.Options{Directory: directory(t), OIDC: identity.NewOIDC(identity.OIDCOptions{Issuer: is.url})})
		if got := fresh.Resolve(bearerRequest(old)); !errors.Is(got.Err, identity.ErrInvalidToken) {
			t.Fatalf("old key after rotation: %+v", got)
		}
	})
	t.Run("a verifier that cached the old key drops it once it sees the new one", func(t *testing.T) {
		// The new key's kid is unknown to the cache, so once the last read
		// is older than oidc.jwksMinRefresh the verifier re-reads the JWKS —
		// which no longer has the old key.
		clock.Advance(identity.DefaultJWKSMinRefresh)
		if got := res.Resolve(bearerRequest(is.mint(t, simoidc.TokenRequest{Sub: "bob"}))); !got.Authenticated() {
			t.Fatalf("new key: %+v", got)
		}
		waitFor(t, func() bool { return errors.Is(res.Resolve(bearerRequest(old)).Err, identity.ErrInvalidToken) })
	})
}

// clock is a settable clock for the verifier, starting at the real time
// (minted tokens carry real times).
type clock struct{ t atomic.Pointer[time.Time] }

func newClock() *clock {
	c := &clock{}
	now := time.Now()
	c.t.Store(&now)
	return c
}

func (c *clock) Now() time.Time { return *c.t.Load() }

func (c *clock) Advance(d time.Duration) {
	next := c.Now().Add(d)
	c.t.Store(&next)
}

// waitFor polls cond for up to 5 s: for state another goroutine of a
// library updates with no hook to wait on.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met within 5s")
}

func TestIssuerDownAtStartupIsRetried(t *testing.T) {
	is := newIssuer(t)
	is.down.Store(true)
	// The clock starts now: it also checks the minted token's times.
	now := time.Now()
	var clock atomic.Pointer[time.Time]
	clock.Store(&now)
	v := identity.NewOIDC(identity.OIDCOptions{Issuer: is.url, RetryAfter: time.Minute, Now: func() time.Time { return *clock.Load() }})
	res := identity.NewResolver(identity.Options{Directory: directory(t), OIDC: v})
	tok := is.mint(t, simoidc.TokenRequest{Sub: "alice"})

	if got := res.Resolve(bearerRequest(tok)); !errors.Is(got.Err, identity.ErrIssuerUnavailable) {
		t.Fatalf("issuer down: %+v", got)
	}
	is.down.Store(false)
	hits := is.hits.Load()
	if got := res.Resolve(bearerRequest(tok)); !errors.Is(got.Err, identity.ErrIssuerUnavailable) || is.hits.Load() != hits {
		t.Fatalf("within RetryAfter the last failure is returned without a call: %+v, %d calls", got, is.hits.Load()-hits)
	}
	later := now.Add(time.Minute)
	clock.Store(&later)
	if got := res.Resolve(bearerRequest(tok)); !got.Authenticated() || got.Identity.Account != "alice" {
		t.Fatalf("after RetryAfter discovery is retried: %+v", got)
	}
}

func TestNoIssuerMeansBearerTokensFail(t *testing.T) {
	for name, v := range map[string]*identity.OIDC{"no verifier": nil, "empty issuer": identity.NewOIDC(identity.OIDCOptions{})} {
		res := identity.NewResolver(identity.Options{OIDC: v})
		if got := res.Resolve(bearerRequest("x")); !errors.Is(got.Err, identity.ErrNoIssuer) {
			t.Errorf("%s: %+v", name, got)
		}
	}
}

func TestSlowIssuerHitsTheDeadline(t *testing.T) {
	block := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(block); ts.Close() })
	v := identity.NewOIDC(identity.OIDCOptions{Issuer: ts.URL,
		Settings: func() identity.DependencySettings {
			return identity.DependencySettings{Timeout: 100 * time.Millisecond}
		}})
	start := time.Now()
	_, err := v.Verify(context.Background(), "x")
	if !errors.Is(err, identity.ErrIssuerUnavailable) || time.Since(start) > 3*time.Second {
		t.Fatalf("err %v after %v", err, time.Since(start))
	}
}

func TestOpenIssuerBreakerFailsFastWithoutCalling(t *testing.T) {
	is := newIssuer(t)
	is.down.Store(true)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var clock atomic.Pointer[time.Time]
	clock.Store(&now)
	v := identity.NewOIDC(identity.OIDCOptions{Issuer: is.url, RetryAfter: time.Second,
		Now: func() time.Time { return *clock.Load() },
		Settings: func() identity.DependencySettings {
			return identity.DependencySettings{Timeout: time.Second, BreakerFailures: 1, BreakerOpenFor: time.Hour}
		}})
	if _, err := v.Verify(context.Background(), "x"); !errors.Is(err, identity.ErrIssuerUnavailable) {
		t.Fatalf("got %v", err)
	}
	hits := is.hits.Load()
	is.down.Store(false)
	later := now.Add(time.Second)
	clock.Store(&later)
	_, err := v.Verify(context.Background(), "x")
	if !errors.Is(err, identity.ErrIssuerUnavailable) || !strings.Contains(err.Error(), "circuit breaker is open") {
		t.Fatalf("want the open breaker, got %v", err)
	}
	if is.hits.Load() != hits {
		t.Fatal("an open breaker must not call the issuer")
	}
}
