package httpapi

import (
	"net/http"
	"testing"
)

// TestDNSRebindingIsRefusedWhileLoopbackIsTrusted: a page on
// attacker.example rebinds its name to 127.0.0.1 and sends adam's identity
// header to the local run, which trusts loopback. The browser sends the
// attacker's Host; it is refused before identity is even resolved. Loopback
// names and server.publicURL are served; without loopback trust every
// Host is.
func TestDNSRebindingIsRefusedWhileLoopbackIsTrusted(t *testing.T) {
	local := newAuthzWorld(t, map[string]any{
		"identity.trustedProxies": []any{"127.0.0.1/32", "::1/128"},
		"server.publicURL":        "https://changeflow.corp.example",
	})
	proxied := newAuthzWorld(t, map[string]any{"identity.trustedProxies": []any{"10.0.0.0/8"}})
	tests := []struct {
		name   string
		w      *authzWorld
		host   string
		status int
	}{
		{"rebound attacker name with a port", local, "attacker.example:8080", http.StatusMisdirectedRequest},
		{"rebound attacker name", local, "attacker.example", http.StatusMisdirectedRequest},
		{"a name that starts like loopback", local, "127.0.0.1.attacker.example:8080", http.StatusMisdirectedRequest},
		{"localhost as a label of the attacker's name", local, "localhost.attacker.example", http.StatusMisdirectedRequest},
		{"the public name on another port", local, "changeflow.corp.example:8443", http.StatusMisdirectedRequest},
		{"all interfaces", local, "0.0.0.0:8080", http.StatusMisdirectedRequest},
		{"no Host at all", local, " ", http.StatusMisdirectedRequest},
		{"127.0.0.1", local, "127.0.0.1:8080", http.StatusOK},
		{"another loopback address", local, "127.1.2.3:8080", http.StatusOK},
		{"localhost", local, "localhost:8080", http.StatusOK},
		{"upper-case localhost", local, "LOCALHOST:8080", http.StatusOK},
		{"IPv6 loopback", local, "[::1]:8080", http.StatusOK},
		{"the public URL's host", local, "changeflow.corp.example", http.StatusOK},
		{"the public URL's host with its default port", local, "changeflow.corp.example:443", http.StatusOK},
		{"without loopback trust any Host is served", proxied, "attacker.example:8080", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The world's resolver trusts loopback whatever the overlay says;
			// the Host check reads identity.trustedProxies from the overlay.
			rec, env, _ := tt.w.do(t, "GET", pathOpsRead, caller{host: tt.host, user: "adam"}, "")
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.status, rec.Body.String())
			}
			if tt.status == http.StatusMisdirectedRequest {
				if env.Code != "MISDIRECTED_REQUEST" || env.Message != misdirectedMessage || env.Data != nil {
					t.Fatalf("body %s", rec.Body.String())
				}
				if rec.Header().Get("Content-Security-Policy") == "" {
					t.Fatal("a refusal still carries the security headers")
				}
			}
		})
	}
}
