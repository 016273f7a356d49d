package httpapi

import (
	"net/http"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/hostguard"
)

// HostPolicy says which Host values are served (Deps.Hosts).
type HostPolicy struct {
	// LoopbackTrusted is true when identity.trustedProxies covers a
	// loopback address, as in the local run: only then is Host checked.
	LoopbackTrusted bool
	// PublicURL is server.publicURL, the one non-loopback address served
	// while loopback is trusted; "" serves loopback names only.
	PublicURL string
}

// HostPolicyFromConfig reads identity.trustedProxies and server.publicURL.
func HostPolicyFromConfig(s *config.Snapshot) HostPolicy {
	p, _ := s.IdentityTrustedProxies()
	return HostPolicy{LoopbackTrusted: hostguard.TrustsLoopback(p), PublicURL: s.Endpoints().PublicURL}
}

// misdirectedMessage is the 421's user message; it does not repeat the
// Host, which the attacker chose.
const misdirectedMessage = "This address does not serve changeflow. Use its configured address."

// checkHost defends against DNS rebinding (hostguard): while loopback is
// trusted, a request whose Host names neither loopback nor
// server.publicURL is answered 421 MISDIRECTED_REQUEST before anything
// else reads it — identity, rate limiting, the app's pages. Without
// loopback trust a rebinding page reaches nothing it could not reach from
// its own origin, so every Host is served (a proxy in front routes by
// name). The policy is read per request, so a reload applies at once.
func (s *Server) checkHost(next http.Handler) http.Handler {
	if s.deps.Hosts == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := s.deps.Hosts()
		if p.LoopbackTrusted && !hostguard.Allowed(r.Host, p.PublicURL) {
			writeError(w, r, s.deps.Logger, domain.Errorf(domain.CodeMisdirected, misdirectedMessage,
				"Host %q is neither loopback nor server.publicURL %q while loopback is trusted", clipHost(r.Host), p.PublicURL))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// clipHost bounds the client's Host before it reaches a log line.
func clipHost(h string) string {
	if len(h) > 256 {
		return h[:256]
	}
	return h
}
