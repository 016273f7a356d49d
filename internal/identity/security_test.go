package identity_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"changeflow/internal/identity"
	simoidc "changeflow/internal/sim/oidc"
)

// Regression tests of the identity findings of the security review: each
// performs the attack and shows it no longer works.

// TestImpersonationThroughOIDCClaimsFails: a token's account comes from
// one configured claim matched on one directory field; no claim the user
// can edit, no unverified email and no other field is ever a fallback.
func TestImpersonationThroughOIDCClaimsFails(t *testing.T) {
	is := newIssuer(t)
	byDefault := identity.OIDCPolicy{}
	byEmail := identity.OIDCPolicy{AccountClaim: "email", AccountField: identity.FieldEmail}
	byUsername := identity.OIDCPolicy{AccountClaim: "preferred_username"}
	byEmployee := identity.OIDCPolicy{AccountClaim: "employee_id", AccountField: identity.FieldEmployeeID}
	tests := []struct {
		name        string
		policy      identity.OIDCPolicy
		req         simoidc.TokenRequest
		wantAccount string
		wantTrusted bool
		wantErr     error
	}{
		// The review's attack, and what it leans on.
		{"opaque sub with preferred_username adam is not adam", byDefault,
			simoidc.TokenRequest{Sub: "opaque-9f8e7d", Claims: map[string]any{"preferred_username": "adam"}}, "opaque-9f8e7d", false, nil},
		{"opaque sub with adam's email, email_verified absent, is not adam", byDefault,
			simoidc.TokenRequest{Sub: "opaque-9f8e7d", Claims: map[string]any{"email": "adam@corp.example"}}, "opaque-9f8e7d", false, nil},
		{"opaque sub with adam's verified email is not adam either (sub is the claim)", byDefault,
			simoidc.TokenRequest{Sub: "opaque-9f8e7d", Email: "adam@corp.example"}, "opaque-9f8e7d", false, nil},
		{"adam's employee ID as sub is not looked up as an employee ID", byDefault,
			simoidc.TokenRequest{Sub: "E10001"}, "E10001", false, nil},
		{"adam's email as sub is not an account", byDefault,
			simoidc.TokenRequest{Sub: "adam@corp.example", Email: "adam@corp.example"}, "", false, identity.ErrInvalidLogin},
		{"sub adam is adam (the issuer is trusted for sub)", byDefault,
			simoidc.TokenRequest{Sub: "adam"}, "adam", true, nil},
		// email as the configured claim.
		{"verified email names its owner", byEmail,
			simoidc.TokenRequest{Sub: "opaque-1", Email: "adam@corp.example"}, "adam", true, nil},
		{"email without email_verified is refused", byEmail,
			simoidc.TokenRequest{Sub: "opaque-1", Claims: map[string]any{"email": "adam@corp.example"}}, "", false, identity.ErrUnverifiedEmail},
		{"email_verified false is refused", byEmail,
			simoidc.TokenRequest{Sub: "opaque-1", Claims: map[string]any{"email": "adam@corp.example", "email_verified": false}}, "", false, identity.ErrUnverifiedEmail},
		{"email_verified \"true\" (a string) is refused", byEmail,
			simoidc.TokenRequest{Sub: "opaque-1", Claims: map[string]any{"email": "adam@corp.example", "email_verified": "true"}}, "", false, identity.ErrUnverifiedEmail},
		{"email_verified 1 is refused", byEmail,
			simoidc.TokenRequest{Sub: "opaque-1", Claims: map[string]any{"email": "adam@corp.example", "email_verified": 1}}, "", false, identity.ErrUnverifiedEmail},
		{"no email claim: preferred_username adam is not a fallback", byEmail,
			simoidc.TokenRequest{Sub: "adam", Claims: map[string]any{"preferred_username": "adam"}}, "", false, identity.ErrNoAccountClaim},
		{"a verified email the directory does not know is itself, untrusted", byEmail,
			simoidc.TokenRequest{Sub: "adam", Email: "adam@partner.example"}, "adam@partner.example", false, nil},
		{"an email claim that is not an email is refused", byEmail,
			simoidc.TokenRequest{Sub: "x", Claims: map[string]any{"email": "adam", "email_verified": true}}, "", false, identity.ErrInvalidLogin},
		// preferred_username only when it is the configured claim.
		{"preferred_username counts when configured", byUsername,
			simoidc.TokenRequest{Sub: "opaque-2", Claims: map[string]any{"preferred_username": "olivia"}}, "olivia", true, nil},
		// A custom claim on the employee-ID field.
		{"employee_id claim on the employeeId field", byEmployee,
			simoidc.TokenRequest{Sub: "opaque-3", Claims: map[string]any{"employee_id": "E10001"}}, "adam", true, nil},
		{"an account in the employee_id claim is not matched on account", byEmployee,
			simoidc.TokenRequest{Sub: "opaque-3", Claims: map[string]any{"employee_id": "adam"}}, "", false, identity.ErrInvalidLogin},
		{"a numeric employee_id claim is not a string", byEmployee,
			simoidc.TokenRequest{Sub: "opaque-3", Claims: map[string]any{"employee_id": 10001}}, "", false, identity.ErrNoAccountClaim},
		{"missing employee_id: sub is not a fallback", byEmployee,
			simoidc.TokenRequest{Sub: "E10001"}, "", false, identity.ErrNoAccountClaim},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := identity.NewOIDC(identity.OIDCOptions{Issuer: is.url, Policy: func() identity.OIDCPolicy { return tt.policy }})
			res := identity.NewResolver(identity.Options{Directory: directory(t), OIDC: v})
			got := res.Resolve(bearerRequest(is.mint(t, tt.req)))
			if !errors.Is(got.Err, tt.wantErr) || (tt.wantErr == nil) != (got.Err == nil) {
				t.Fatalf("err = %v, want %v (identity %+v)", got.Err, tt.wantErr, got.Identity)
			}
			if tt.wantErr != nil {
				if got.Authenticated() {
					t.Fatal("a refused token must not authenticate")
				}
				return
			}
			if got.Identity.Account != tt.wantAccount || got.Identity.Trusted != tt.wantTrusted {
				t.Fatalf("identity = %+v, want %q trusted %v", got.Identity, tt.wantAccount, tt.wantTrusted)
			}
		})
	}
}

// TestForwardDatedAndMisaddressedTokensAreRefused: an iat beyond the
// clock skew, and several audiences without azp naming us.
func TestForwardDatedAndMisaddressedTokensAreRefused(t *testing.T) {
	is := newIssuer(t)
	v := identity.NewOIDC(identity.OIDCOptions{Issuer: is.url})
	res := identity.NewResolver(identity.Options{Directory: directory(t), OIDC: v})
	tests := []struct {
		name string
		req  simoidc.TokenRequest
		ok   bool
	}{
		{"iat an hour ahead", simoidc.TokenRequest{Sub: "alice", IssuedIn: simoidc.TTL{Duration: time.Hour}}, false},
		{"iat two minutes ahead (beyond the 1m skew)", simoidc.TokenRequest{Sub: "alice", IssuedIn: simoidc.TTL{Duration: 2 * time.Minute}}, false},
		{"iat 20s ahead (within the skew)", simoidc.TokenRequest{Sub: "alice", IssuedIn: simoidc.TTL{Duration: 20 * time.Second}}, true},
		{"two audiences, no azp", simoidc.TokenRequest{Sub: "alice", Aud: simoidc.Audience{"other-app", "changeflow"}}, false},
		{"two audiences, azp the other client", simoidc.TokenRequest{Sub: "alice", Aud: simoidc.Audience{"other-app", "changeflow"}, Claims: map[string]any{"azp": "other-app"}}, false},
		{"two audiences, azp us", simoidc.TokenRequest{Sub: "alice", Aud: simoidc.Audience{"other-app", "changeflow"}, Claims: map[string]any{"azp": "changeflow"}}, true},
		{"one audience, azp another client", simoidc.TokenRequest{Sub: "alice", Claims: map[string]any{"azp": "other-app"}}, false},
		{"one audience, azp us", simoidc.TokenRequest{Sub: "alice", Claims: map[string]any{"azp": "changeflow"}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := res.Resolve(bearerRequest(is.mint(t, tt.req)))
			if tt.ok {
				if !got.Authenticated() || got.Identity.Account != "alice" {
					t.Fatalf("got %+v", got)
				}
				return
			}
			if !errors.Is(got.Err, identity.ErrInvalidToken) {
				t.Fatalf("err = %v, want ErrInvalidToken", got.Err)
			}
		})
	}
}

// tamper re-signs nothing: it swaps a valid token's payload for one naming
// sub, keeping header (and so kid) and signature.
func tamper(t *testing.T, tok, sub string) string {
	t.Helper()
	parts := strings.Split(tok, ".")
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	c["sub"] = sub
	b, _ := json.Marshal(c)
	parts[1] = base64.RawURLEncoding.EncodeToString(b)
	return strings.Join(parts, ".")
}

// withKid returns tok with its header's kid replaced.
func withKid(t *testing.T, tok, kid string) string {
	t.Helper()
	parts := strings.Split(tok, ".")
	b, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": kid})
	parts[0] = base64.RawURLEncoding.EncodeToString(b)
	return strings.Join(parts, ".")
}

// TestTokensArrivingDuringAJWKSDownloadWaitForIt: the first token (or
// the first after a rotation) downloads the JWKS; a second one arriving
// while that download is in flight must wait for it and verify, not be
// refused because "the keys were just read". That refusal signed people
// out of the web app right after they signed in: its first two calls
// (/api/me and /api/requests) carry the new token at once, one was
// refused, and a 401 drops the token.
func TestTokensArrivingDuringAJWKSDownloadWaitForIt(t *testing.T) {
	is := newIssuer(t)
	is.hold = make(chan struct{})
	is.entered = make(chan struct{}, 1)
	var release sync.Once
	// Cleanups run last-in first-out: this one frees a held download
	// before the issuer's server is closed (which waits for it).
	t.Cleanup(func() { release.Do(func() { close(is.hold) }) })
	v := identity.NewOIDC(identity.OIDCOptions{Issuer: is.url})
	res := identity.NewResolver(identity.Options{Directory: directory(t), OIDC: v})
	tok := is.mint(t, simoidc.TokenRequest{Sub: "alice"})
	first := make(chan identity.Resolution, 1)
	go func() { first <- res.Resolve(bearerRequest(tok)) }()
	<-is.entered // the first token's download is in flight, held
	second := make(chan identity.Resolution, 1)
	go func() { second <- res.Resolve(bearerRequest(tok)) }()
	select {
	case got := <-second:
		t.Fatalf("the second token was answered while the download was in flight: %+v", got)
	case <-time.After(200 * time.Millisecond):
		// still waiting, as it should (not a bound on anything: the
		// refusal this guards against comes at once)
	}
	release.Do(func() { close(is.hold) })
	for name, ch := range map[string]chan identity.Resolution{"first": first, "second": second} {
		if got := <-ch; got.Identity.Account != "alice" || got.Err != nil {
			t.Fatalf("%s token: %+v", name, got)
		}
	}
	if n := is.jwks.Load(); n != 1 {
		t.Fatalf("%d JWKS downloads, want 1 for both tokens", n)
	}
}

// TestForgedTokensCostNoJWKSDownload: the review sent 50 forged tokens and
// counted 51 JWKS downloads. Now a token naming a known key with a bad
// signature never causes one, and an unknown kid causes at most one per
// oidc.jwksMinRefresh — also when many arrive at once.
func TestForgedTokensCostNoJWKSDownload(t *testing.T) {
	is := newIssuer(t)
	clock := newClock()
	v := identity.NewOIDC(identity.OIDCOptions{Issuer: is.url, Now: clock.Now})
	res := identity.NewResolver(identity.Options{Directory: directory(t), OIDC: v})
	good := is.mint(t, simoidc.TokenRequest{Sub: "alice"})
	if got := res.Resolve(bearerRequest(good)); got.Identity.Account != "alice" {
		t.Fatalf("a good token: %+v", got)
	}
	if n := is.jwks.Load(); n != 1 {
		t.Fatalf("the first token downloads the JWKS once, got %d", n)
	}
	other, err := simoidc.New(simoidc.Options{Issuer: is.url})
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := other.Mint(simoidc.TokenRequest{Sub: "adam"})
	if err != nil {
		t.Fatal(err)
	}
	forgeries := map[string]string{
		"known kid, payload changed to adam": tamper(t, good, "adam"),
		"signed by another issuer's key":     foreign.Token,
		"an invented kid":                    withKid(t, tamper(t, good, "adam"), "no-such-kid"),
		"no kid":                             withKid(t, good, ""),
		"not a JWT":                          "forged",
	}
	refuse := func(t *testing.T, name, tok string) {
		t.Helper()
		if got := res.Resolve(bearerRequest(tok)); got.Authenticated() || got.Err == nil {
			t.Fatalf("%s: got %+v", name, got)
		}
	}
	t.Run("50 forged tokens right after a download cost nothing", func(t *testing.T) {
		before := is.hits.Load()
		for i := range 10 {
			for name, tok := range forgeries {
				_ = i
				refuse(t, name, tok)
			}
		}
		if d := is.hits.Load() - before; d != 0 {
			t.Fatalf("forged tokens made %d calls to the issuer", d)
		}
	})
	t.Run("after jwksMinRefresh an unknown kid costs one download for any number of tokens at once", func(t *testing.T) {
		clock.Advance(identity.DefaultJWKSMinRefresh)
		before := is.jwks.Load()
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() { refuse(t, "an invented kid", forgeries["an invented kid"]) })
		}
		wg.Wait()
		if d := is.jwks.Load() - before; d != 1 {
			t.Fatalf("%d downloads, want 1", d)
		}
		for name, tok := range forgeries {
			refuse(t, name, tok)
		}
		if d := is.jwks.Load() - before; d != 1 {
			t.Fatalf("%d downloads after the burst, want still 1", d)
		}
	})
	t.Run("a known kid with a bad signature never downloads, however late", func(t *testing.T) {
		clock.Advance(10 * time.Minute)
		before := is.jwks.Load()
		refuse(t, "known kid", forgeries["known kid, payload changed to adam"])
		if d := is.jwks.Load() - before; d != 0 {
			t.Fatalf("%d downloads", d)
		}
	})
	t.Run("a rotation reaches the verifier: a new kid after jwksMinRefresh is fetched", func(t *testing.T) {
		if _, err := is.sim.Rotate(false, 0); err != nil {
			t.Fatal(err)
		}
		before := is.jwks.Load()
		if got := res.Resolve(bearerRequest(is.mint(t, simoidc.TokenRequest{Sub: "bob"}))); got.Identity.Account != "bob" {
			t.Fatalf("new key: %+v", got)
		}
		if d := is.jwks.Load() - before; d != 1 {
			t.Fatalf("%d downloads, want 1", d)
		}
	})
	t.Run("a key published within jwksMinRefresh of the last download waits for the interval", func(t *testing.T) {
		if _, err := is.sim.Rotate(false, 0); err != nil {
			t.Fatal(err)
		}
		tok := is.mint(t, simoidc.TokenRequest{Sub: "bob"})
		if got := res.Resolve(bearerRequest(tok)); !errors.Is(got.Err, identity.ErrInvalidToken) {
			t.Fatalf("within the interval: %+v", got)
		}
		clock.Advance(identity.DefaultJWKSMinRefresh)
		if got := res.Resolve(bearerRequest(tok)); got.Identity.Account != "bob" {
			t.Fatalf("after the interval: %+v", got)
		}
	})
}

// TestDuplicateIdentityHeadersAreRefused: with two X-Auth-Request-User
// values the first used to win; any identity header sent twice is now a
// login failure, and an unknown or malformed user value never falls back
// to the email header's account.
func TestDuplicateIdentityHeadersAreRefused(t *testing.T) {
	res := identity.NewResolver(identity.Options{Directory: directory(t), TrustedProxies: loopback})
	tests := []struct {
		name        string
		header      http.Header
		wantAccount string
		wantTrusted bool
		wantErr     error
	}{
		{"two user values, alice then adam", http.Header{identity.HeaderUser: {"alice", "adam"}}, "", false, identity.ErrDuplicateHeader},
		{"two user values, adam then alice", http.Header{identity.HeaderUser: {"adam", "alice"}}, "", false, identity.ErrDuplicateHeader},
		{"the same user twice", http.Header{identity.HeaderUser: {"alice", "alice"}}, "", false, identity.ErrDuplicateHeader},
		{"an empty user value and adam", http.Header{identity.HeaderUser: {"", "adam"}}, "", false, identity.ErrDuplicateHeader},
		{"two email values", http.Header{identity.HeaderEmail: {"alice@corp.example", "adam@corp.example"}}, "", false, identity.ErrDuplicateHeader},
		{"one user, two emails", http.Header{identity.HeaderUser: {"alice"}, identity.HeaderEmail: {"alice@corp.example", "adam@corp.example"}}, "", false, identity.ErrDuplicateHeader},
		{"two Authorization headers", http.Header{"Authorization": {"Bearer a", "Bearer b"}}, "", false, identity.ErrDuplicateHeader},
		{"an Authorization of another scheme twice beside a user", http.Header{"Authorization": {"Basic a", "Basic b"}, identity.HeaderUser: {"alice"}}, "", false, identity.ErrDuplicateHeader},
		// No fallback from the user header to the email header.
		{"unknown user beside adam's email is not adam", http.Header{identity.HeaderUser: {"E55555"}, identity.HeaderEmail: {"adam@corp.example"}}, "", false, identity.ErrConflictingLogin},
		{"unknown account beside adam's email is not adam", http.Header{identity.HeaderUser: {"carol"}, identity.HeaderEmail: {"adam@corp.example"}}, "", false, identity.ErrConflictingLogin},
		{"malformed user beside adam's email is not adam", http.Header{identity.HeaderUser: {"adam smith"}, identity.HeaderEmail: {"adam@corp.example"}}, "", false, identity.ErrInvalidLogin},
		{"user with a comma beside adam's email is not adam", http.Header{identity.HeaderUser: {"carol,adam"}, identity.HeaderEmail: {"adam@corp.example"}}, "", false, identity.ErrInvalidLogin},
		{"unknown user beside an unknown email is the user, untrusted", http.Header{identity.HeaderUser: {"carol"}, identity.HeaderEmail: {"carol@partner.example"}}, "carol", false, nil},
		{"known user beside a malformed email is refused", http.Header{identity.HeaderUser: {"alice"}, identity.HeaderEmail: {"not an email"}}, "", false, identity.ErrInvalidLogin},
		{"an account in the email header is not an email", http.Header{identity.HeaderEmail: {"adam"}}, "", false, identity.ErrInvalidLogin},
		// Neighbours that stay as they were.
		{"one user value", http.Header{identity.HeaderUser: {"alice"}}, "alice", true, nil},
		{"user and the same person's email", http.Header{identity.HeaderUser: {"E10023"}, identity.HeaderEmail: {"alice@corp.example"}}, "alice", true, nil},
		{"email alone", http.Header{identity.HeaderEmail: {"bob@corp.example"}}, "bob", true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := proxyRequest("127.0.0.1:5000")
			for k, vs := range tt.header {
				for _, v := range vs {
					r.Header.Add(k, v)
				}
			}
			got := res.Resolve(r)
			if !errors.Is(got.Err, tt.wantErr) || (tt.wantErr == nil) != (got.Err == nil) {
				t.Fatalf("err = %v, want %v (identity %+v)", got.Err, tt.wantErr, got.Identity)
			}
			if tt.wantErr != nil {
				if got.Authenticated() {
					t.Fatal("a refused login must not authenticate")
				}
				return
			}
			if got.Identity.Account != tt.wantAccount || got.Identity.Trusted != tt.wantTrusted {
				t.Fatalf("identity = %+v, want %q trusted %v", got.Identity, tt.wantAccount, tt.wantTrusted)
			}
		})
	}
}
