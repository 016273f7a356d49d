package oidc_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	gooidc "github.com/coreos/go-oidc/v3/oidc"

	"changeflow/internal/sim/oidc"
)

// TestAuthorizationCodeFlowWithPKCE is the web app's login against the
// simulator, as a browser and a public client do it: the login page
// offers the quick picks, picking one redirects back with a code and the
// state, and the code with the right verifier becomes an ID token that
// go-oidc verifies for the client ID, carrying the nonce. A code is good
// once; a wrong verifier, another redirect_uri or a missing S256
// challenge are refused, and a bad redirect_uri is never redirected to.
func TestAuthorizationCodeFlowWithPKCE(t *testing.T) {
	const redirect = "http://127.0.0.1:8080/login/callback"
	sim, err := oidc.New(oidc.Options{Users: oidc.LocalUsers(), RedirectURIs: []string{redirect}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/oidc/", http.StripPrefix("/oidc", sim))
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	issuer := ts.URL + "/oidc"
	sim.SetIssuer(issuer)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	const verifier = "a-verifier-of-at-least-43-characters-0123456789abcdef"
	sum := sha256.Sum256([]byte(verifier))
	challenge := base64.RawURLEncoding.EncodeToString(sum[:])
	authz := url.Values{
		"response_type": {"code"}, "client_id": {"changeflow"}, "redirect_uri": {redirect}, "state": {"st-1"},
		"code_challenge": {challenge}, "code_challenge_method": {"S256"}, "nonce": {"n-1"}, "scope": {"openid email"},
	}

	// Discovery names the endpoints and is readable cross-origin.
	resp, err := http.Get(issuer + "/.well-known/openid-configuration")
	if err != nil {
		t.Fatal(err)
	}
	var disc map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&disc)
	resp.Body.Close()
	if disc["authorization_endpoint"] != issuer+"/authorize" || disc["token_endpoint"] != issuer+"/token" ||
		resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("discovery %v, CORS %q", disc, resp.Header.Get("Access-Control-Allow-Origin"))
	}

	// The login page.
	resp, err = http.Get(issuer + "/authorize?" + authz.Encode())
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), `data-sub="alice"`) || !strings.Contains(string(page), `value="st-1"`) {
		t.Fatalf("login page %d:\n%s", resp.StatusCode, page)
	}

	login := func(sub string) string {
		t.Helper()
		form := url.Values{"sub": {sub}, "email": {sub + "@corp.example"}}
		for k, v := range authz {
			form[k] = v
		}
		resp, err := noFollow.PostForm(issuer+"/authorize", form)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc, _ := url.Parse(resp.Header.Get("Location"))
		if resp.StatusCode != http.StatusSeeOther || loc == nil || !strings.HasPrefix(loc.String(), redirect+"?") || loc.Query().Get("state") != "st-1" || loc.Query().Get("code") == "" {
			t.Fatalf("authorize = %d %q", resp.StatusCode, resp.Header.Get("Location"))
		}
		return loc.Query().Get("code")
	}
	exchange := func(code, verifier, redirectURI string) (int, map[string]any, http.Header) {
		t.Helper()
		resp, err := http.PostForm(issuer+"/token", url.Values{
			"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirectURI},
			"client_id": {"changeflow"}, "code_verifier": {verifier},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m, resp.Header
	}

	code := login("alice")
	status, tok, hdr := exchange(code, verifier, redirect)
	if status != 200 || tok["token_type"] != "Bearer" || hdr.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("token = %d %v", status, tok)
	}
	provider, err := gooidc.NewProvider(t.Context(), issuer)
	if err != nil {
		t.Fatal(err)
	}
	idt, err := provider.Verifier(&gooidc.Config{ClientID: "changeflow"}).Verify(t.Context(), tok["id_token"].(string))
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	var claims struct {
		Email string `json:"email"`
	}
	_ = idt.Claims(&claims)
	if idt.Subject != "alice" || idt.Nonce != "n-1" || claims.Email != "alice@corp.example" {
		t.Fatalf("claims sub=%q nonce=%q email=%q", idt.Subject, idt.Nonce, claims.Email)
	}

	// A code is good once.
	if status, m, _ := exchange(code, verifier, redirect); status != 400 || m["error"] != "invalid_grant" {
		t.Fatalf("second exchange = %d %v", status, m)
	}
	// A wrong verifier, or another redirect_uri, is refused — and burns the code.
	for _, tc := range []struct{ verifier, redirect string }{{"not-the-verifier", redirect}, {verifier, "http://evil.example/cb"}} {
		c := login("bob")
		if status, m, _ := exchange(c, tc.verifier, tc.redirect); status != 400 || m["error"] != "invalid_grant" {
			t.Fatalf("exchange %+v = %d %v", tc, status, m)
		}
		if status, _, _ := exchange(c, verifier, redirect); status != 400 {
			t.Fatalf("a refused code must be consumed; got %d", status)
		}
	}

	// Bad requests are answered on the page, never redirected.
	for name, mod := range map[string]func(url.Values){
		"no PKCE":         func(v url.Values) { v.Del("code_challenge") },
		"plain PKCE":      func(v url.Values) { v.Set("code_challenge_method", "plain") },
		"relative target": func(v url.Values) { v.Set("redirect_uri", "/login/callback") },
		"implicit flow":   func(v url.Values) { v.Set("response_type", "id_token") },
		// The registered list (security review finding 12): only exact
		// matches are redirected to.
		"an attacker's page":             func(v url.Values) { v.Set("redirect_uri", "http://attacker.example/steal") },
		"another port on loopback":       func(v url.Values) { v.Set("redirect_uri", "http://127.0.0.1:9999/login/callback") },
		"localhost instead of 127.0.0.1": func(v url.Values) { v.Set("redirect_uri", "http://localhost:8080/login/callback") },
		"a longer path":                  func(v url.Values) { v.Set("redirect_uri", redirect+"/../../evil") },
		"a path prefix":                  func(v url.Values) { v.Set("redirect_uri", "http://127.0.0.1:8080/login/callbackx") },
		"an added query":                 func(v url.Values) { v.Set("redirect_uri", redirect+"?next=http://attacker.example") },
		"https instead of http":          func(v url.Values) { v.Set("redirect_uri", "https://127.0.0.1:8080/login/callback") },
		"userinfo before the host":       func(v url.Values) { v.Set("redirect_uri", "http://127.0.0.1:8080@attacker.example/login/callback") },
	} {
		v := url.Values{}
		for k, x := range authz {
			v[k] = x
		}
		mod(v)
		resp, err := noFollow.Get(issuer + "/authorize?" + v.Encode())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 || resp.Header.Get("Location") != "" {
			t.Errorf("%s: %d %q, want 400 without a redirect", name, resp.StatusCode, resp.Header.Get("Location"))
		}
		v.Set("sub", "alice@corp.example")
		resp, err = noFollow.PostForm(issuer+"/authorize", v)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 || resp.Header.Get("Location") != "" {
			t.Errorf("%s (POST): %d %q, want 400 without a redirect", name, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
}

// TestRedirectURIsAreManagedThroughTheControlAPI: PUT replaces the list
// (an entry that is not an absolute http(s) URL refuses the whole PUT),
// GET shows it, and /authorize follows it.
func TestRedirectURIsAreManagedThroughTheControlAPI(t *testing.T) {
	sim, err := oidc.New(oidc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(sim)
	t.Cleanup(ts.Close)
	sim.SetIssuer(ts.URL)
	put := func(body string) int {
		req, _ := http.NewRequest("PUT", ts.URL+"/_control/redirect_uris", strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	authorize := func(uri string) int {
		v := url.Values{"response_type": {"code"}, "client_id": {"changeflow"}, "redirect_uri": {uri},
			"code_challenge": {"x"}, "code_challenge_method": {"S256"}}
		resp, err := http.Get(ts.URL + "/authorize?" + v.Encode())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	const app = "http://127.0.0.1:9000/login/callback"
	if authorize(app) != 400 {
		t.Fatal("nothing registered: every redirect_uri is refused")
	}
	if put(`{"redirect_uris":["`+app+`","javascript:alert(1)"]}`) != 400 || len(sim.RedirectURIs()) != 0 {
		t.Fatal("a bad entry refuses the whole list")
	}
	if put(`{"redirect_uris":["`+app+`"]}`) != 200 || authorize(app) != 200 || authorize(app+"x") != 400 {
		t.Fatalf("registered %v", sim.RedirectURIs())
	}
	resp, err := http.Get(ts.URL + "/_control/redirect_uris")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		RedirectURIs []string `json:"redirect_uris"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if len(got.RedirectURIs) != 1 || got.RedirectURIs[0] != app {
		t.Fatalf("GET %v", got)
	}
}
