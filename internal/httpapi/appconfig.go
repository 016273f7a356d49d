package httpapi

import (
	"net/http"
	"net/netip"

	"changeflow/internal/config"
	"changeflow/internal/domain"
)

// appConfigView is GET /api/app-config: what the web app needs to know
// before anybody has logged in.
type appConfigView struct {
	// OIDC is present when oidc.issuer is configured: the app then offers
	// "Sign in" (authorization code with PKCE against the issuer, as a
	// public client whose ID is oidc.audience — the audience the server
	// verifies tokens for).
	OIDC *oidcView `json:"oidc,omitempty"`
	// Simulators is present when this process runs the embedded
	// simulators (the local run): their pages a person uses to play the
	// external systems' part (docs/simulators.md).
	Simulators *simulatorsView `json:"simulators,omitempty"`
	// UserPicker is true only in local development: the simulators run
	// embedded and auth-proxy headers are believed from loopback, so the
	// app may offer its "acting as" picker and send the choice as
	// X-Auth-Request-User. Anywhere else the app never shows the picker
	// nor sends that header (docs/webapp.md).
	UserPicker bool `json:"userPicker,omitempty"`
	// Contact is whom a person asks when a request failed (ui.contact,
	// with its fallback): the failure page names it.
	Contact string `json:"contact"`
}

type oidcView struct {
	Issuer   string `json:"issuer"`
	ClientID string `json:"clientId"`
}

type simulatorsView struct {
	// Index lists every simulator and its base URL.
	Index string `json:"index"`
	// Approval is the approval system's control page (approve, reject,
	// switch between automatic and manual decisions).
	Approval string `json:"approval"`
}

// handleAppConfig needs no login: the app reads it to offer a login. It
// says nothing that is not public anyway — the issuer's URL and the
// client ID are in every login redirect — and is read from the
// configuration in force on every request.
func (s *Server) handleAppConfig() http.Handler {
	b := s.deps.Business
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if b.Config == nil {
			writeError(w, r, s.deps.Logger, domain.Internal("app config: no configuration source wired", nil))
			return
		}
		snap := b.Config.Current()
		ep := snap.Endpoints()
		var v appConfigView
		if ep.OIDCIssuer != "" {
			aud, _ := snap.String(config.KeyOIDCAudience)
			v.OIDC = &oidcView{Issuer: ep.OIDCIssuer, ClientID: aud}
		}
		if base := simBase(ep); base != "" {
			v.Simulators = &simulatorsView{Index: base + "/", Approval: base + "/approval/_control/ui"}
		}
		v.UserPicker = ep.SimEmbedded && trustsLoopback(snap)
		if v.Contact, _ = snap.String(config.KeyUIContact); v.Contact == "" {
			v.Contact = config.DefaultUIContact
		}
		w.Header().Set("Cache-Control", "no-store")
		respond(w, s.deps.Logger, domain.CodeOK, v)
	})
}

// trustsLoopback says whether identity.trustedProxies believes login
// headers from this machine. Both conditions of the picker are needed: a
// production process may trust a proxy on loopback (an auth proxy beside
// it overwrites the headers, so a picker there would pick nobody), and a
// local run without loopback trust would refuse the picker's header.
func trustsLoopback(snap *config.Snapshot) bool {
	nets, _ := snap.IdentityTrustedProxies()
	for _, p := range nets {
		if p.Contains(netip.AddrFrom4([4]byte{127, 0, 0, 1})) || p.Contains(netip.IPv6Loopback()) {
			return true
		}
	}
	return false
}

// simBase is the embedded simulators' URL as a browser on this machine
// reaches them, or "" when they do not run here or their port is chosen at
// start (":0", not known to the configuration).
func simBase(ep config.Endpoints) string {
	if !ep.SimEmbedded {
		return ""
	}
	return config.LocalURL(ep.SimListen)
}
