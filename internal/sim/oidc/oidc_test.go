package oidc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"

	"changeflow/internal/sim/oidc"
)

// newIssuer mounts the simulator under /oidc, as the composition does, so
// the issuer URL has a path and every discovery URL must carry it.
func newIssuer(t *testing.T) (*oidc.Server, *httptest.Server, string) {
	t.Helper()
	sim, err := oidc.New(oidc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/oidc/", http.StripPrefix("/oidc", sim))
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	issuer := ts.URL + "/oidc"
	sim.SetIssuer(issuer)
	return sim, ts, issuer
}

func post(t *testing.T, url, body string) (int, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func mint(t *testing.T, issuer, body string) oidc.Token {
	t.Helper()
	status, b := post(t, issuer+"/_control/token", body)
	if status != 200 {
		t.Fatalf("mint: %d %s", status, b)
	}
	var tok oidc.Token
	if err := json.Unmarshal(b, &tok); err != nil {
		t.Fatal(err)
	}
	return tok
}

// verify checks raw with a verifier built fresh from discovery, so no key
// cache carries over between calls.
func verify(t *testing.T, issuer, clientID, raw string) (*gooidc.IDToken, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := gooidc.NewProvider(ctx, issuer)
	if err != nil {
		t.Fatalf("provider: %v", err)
	}
	return p.Verifier(&gooidc.Config{ClientID: clientID}).Verify(ctx, raw)
}

func TestTokensVerifyWithGoOIDC(t *testing.T) {
	_, _, issuer := newIssuer(t)
	for _, tc := range []struct {
		name, body, sub, email string
	}{
		{"email-style subject", `{"sub":"alice@corp.example","email":"alice@corp.example","aud":"changeflow","ttl":600}`, "alice@corp.example", "alice@corp.example"},
		{"employee-ID subject", `{"sub":"E10023","aud":["changeflow","other"],"ttl":"10m"}`, "E10023", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := mint(t, issuer, tc.body)
			idt, err := verify(t, issuer, "changeflow", tok.Token)
			if err != nil {
				t.Fatalf("verify: %v", err)
			}
			var claims struct {
				Email             string `json:"email"`
				PreferredUsername string `json:"preferred_username"`
			}
			if err := idt.Claims(&claims); err != nil {
				t.Fatal(err)
			}
			if idt.Subject != tc.sub || idt.Issuer != issuer || claims.Email != tc.email || claims.PreferredUsername != tc.sub {
				t.Fatalf("token %+v claims %+v", idt, claims)
			}
			if time.Until(idt.Expiry) < 9*time.Minute {
				t.Fatalf("expiry %v", idt.Expiry)
			}
		})
	}
	t.Run("wrong audience fails", func(t *testing.T) {
		tok := mint(t, issuer, `{"sub":"bob@corp.example","aud":"someone-else"}`)
		if _, err := verify(t, issuer, "changeflow", tok.Token); err == nil {
			t.Fatal("verified a token for another audience")
		}
	})
	t.Run("expired token fails", func(t *testing.T) {
		tok := mint(t, issuer, `{"sub":"bob@corp.example","ttl":-60}`)
		if _, err := verify(t, issuer, "changeflow", tok.Token); err == nil || !strings.Contains(err.Error(), "expired") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("bad requests are 400", func(t *testing.T) {
		for _, body := range []string{`{}`, `{"sub":"a","ttl":"soon"}`, `{"sub":"a","aud":7}`, `{`} {
			if status, _ := post(t, issuer+"/_control/token", body); status != 400 {
				t.Fatalf("%s: %d", body, status)
			}
		}
	})
}

func TestDiscoveryDocument(t *testing.T) {
	_, ts, issuer := newIssuer(t)
	resp, err := http.Get(ts.URL + "/oidc/.well-known/openid-configuration")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&doc)
	if doc["issuer"] != issuer || doc["jwks_uri"] != issuer+"/jwks" {
		t.Fatalf("%v", doc)
	}
}

func TestKeyRotation(t *testing.T) {
	sim, _, issuer := newIssuer(t)
	old := mint(t, issuer, `{"sub":"alice@corp.example"}`)

	status, b := post(t, issuer+"/_control/rotate", `{}`)
	if status != 200 {
		t.Fatalf("%d %s", status, b)
	}
	fresh := mint(t, issuer, `{"sub":"alice@corp.example"}`)
	if fresh.Kid == old.Kid {
		t.Fatal("rotation kept the kid")
	}
	if n := len(sim.JWKS().Keys); n != 2 {
		t.Fatalf("JWKS has %d keys during the grace period", n)
	}
	for name, tok := range map[string]oidc.Token{"old key in grace": old, "new key": fresh} {
		if _, err := verify(t, issuer, "changeflow", tok.Token); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}

	t.Run("removed key no longer verifies", func(t *testing.T) {
		req, _ := http.NewRequest("DELETE", issuer+"/_control/keys/"+old.Kid, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusNoContent {
			t.Fatalf("remove: %v %v", err, resp)
		}
		if _, err := verify(t, issuer, "changeflow", old.Token); err == nil {
			t.Fatal("token of a removed key verified")
		}
		if _, err := verify(t, issuer, "changeflow", fresh.Token); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("rotate with removeOld drops the old key at once", func(t *testing.T) {
		post(t, issuer+"/_control/rotate", `{"removeOld":true}`)
		if _, err := verify(t, issuer, "changeflow", fresh.Token); err == nil {
			t.Fatal("token of a removed key verified")
		}
		if n := len(sim.JWKS().Keys); n != 1 {
			t.Fatalf("%d keys", n)
		}
	})
	t.Run("grace period ends", func(t *testing.T) {
		tok := mint(t, issuer, `{"sub":"a"}`)
		post(t, issuer+"/_control/rotate", `{"graceMs":50}`)
		deadline := time.Now().Add(5 * time.Second)
		for len(sim.JWKS().Keys) != 1 {
			if time.Now().After(deadline) {
				t.Fatal("old key still published after its grace")
			}
			time.Sleep(10 * time.Millisecond)
		}
		if _, err := verify(t, issuer, "changeflow", tok.Token); err == nil {
			t.Fatal("verified after the grace period")
		}
	})
	t.Run("the signing key cannot be removed", func(t *testing.T) {
		_, b := post(t, issuer+"/_control/rotate", `{}`)
		var out struct{ Kid string }
		_ = json.Unmarshal(b, &out)
		req, _ := http.NewRequest("DELETE", issuer+"/_control/keys/"+out.Kid, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusConflict {
			t.Fatalf("%v %v", err, resp)
		}
		req, _ = http.NewRequest("DELETE", issuer+"/_control/keys/nope", nil)
		if resp, _ := http.DefaultClient.Do(req); resp.StatusCode != http.StatusNotFound {
			t.Fatal(resp.StatusCode)
		}
	})
}

func TestRejectsSmallKeys(t *testing.T) {
	if _, err := oidc.New(oidc.Options{KeyBits: 1024}); err == nil {
		t.Fatal("accepted a 1024-bit key")
	}
}
