package oidc

import (
	"changeflow/internal/sim/simhttp"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"time"
)

func (s *Server) routes() {
	s.mux.HandleFunc("GET /.well-known/openid-configuration", s.handleDiscovery)
	s.mux.HandleFunc("GET /jwks", s.handleJWKS)
	s.mux.HandleFunc("GET /authorize", s.handleAuthorizePage)
	s.mux.HandleFunc("POST /authorize", s.handleAuthorize)
	s.mux.HandleFunc("POST /token", s.handleToken)
	s.mux.HandleFunc("OPTIONS /token", s.handlePreflight)
	s.mux.HandleFunc("POST /_control/token", s.handleMint)
	s.mux.HandleFunc("POST /_control/rotate", s.handleRotate)
	s.mux.HandleFunc("GET /_control/keys", s.handleKeys)
	s.mux.HandleFunc("DELETE /_control/keys/{kid}", s.handleRemoveKey)
	s.mux.HandleFunc("GET /_control/redirect_uris", s.handleRedirectURIs)
	s.mux.HandleFunc("PUT /_control/redirect_uris", s.handlePutRedirectURIs)
}

func (s *Server) handleRedirectURIs(w http.ResponseWriter, r *http.Request) {
	simhttp.WriteJSON(w, http.StatusOK, map[string]any{"redirect_uris": s.RedirectURIs()})
}

// handlePutRedirectURIs is PUT /_control/redirect_uris
// {"redirect_uris":["http://127.0.0.1:8080/login/callback"]}: replace the
// list. Each must be an absolute http(s) URL without a fragment.
func (s *Server) handlePutRedirectURIs(w http.ResponseWriter, r *http.Request) {
	var in struct {
		RedirectURIs []string `json:"redirect_uris"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in); err != nil {
		simhttp.WriteError(w, http.StatusBadRequest, "malformed JSON body")
		return
	}
	for _, u := range in.RedirectURIs {
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" || p.Fragment != "" {
			simhttp.WriteError(w, http.StatusBadRequest, "not an absolute http(s) URL without a fragment: "+u)
			return
		}
	}
	s.SetRedirectURIs(in.RedirectURIs)
	simhttp.WriteJSON(w, http.StatusOK, map[string]any{"redirect_uris": s.RedirectURIs()})
}

// handleDiscovery serves the OpenID Provider Metadata. Every URL in it is
// under the issuer, as verifiers require.
func (s *Server) handleDiscovery(w http.ResponseWriter, r *http.Request) {
	iss := s.Issuer()
	allowCORS(w)
	simhttp.WriteJSON(w, http.StatusOK, map[string]any{
		"issuer":                                iss,
		"jwks_uri":                              iss + "/jwks",
		"authorization_endpoint":                iss + "/authorize",
		"token_endpoint":                        iss + "/token",
		"response_types_supported":              []string{"code"},
		"grant_types_supported":                 []string{"authorization_code"},
		"code_challenge_methods_supported":      []string{"S256"},
		"token_endpoint_auth_methods_supported": []string{"none"},
		"scopes_supported":                      []string{"openid", "email", "profile"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
		"claims_supported":                      []string{"iss", "sub", "aud", "exp", "iat", "email", "email_verified", "name", "preferred_username"},
	})
}

func (s *Server) handleJWKS(w http.ResponseWriter, r *http.Request) {
	// no-cache: a rotation must be visible at once to a verifier that
	// refetches on an unknown kid.
	w.Header().Set("Cache-Control", "no-cache")
	allowCORS(w)
	simhttp.WriteJSON(w, http.StatusOK, s.JWKS())
}

func (s *Server) handleMint(w http.ResponseWriter, r *http.Request) {
	var req TokenRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		simhttp.WriteError(w, http.StatusBadRequest, "malformed JSON body: "+err.Error())
		return
	}
	tok, err := s.Mint(req)
	if err != nil {
		simhttp.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	simhttp.WriteJSON(w, http.StatusOK, tok)
}

// handleRotate is POST /_control/rotate {"removeOld":false,"graceMs":N}.
func (s *Server) handleRotate(w http.ResponseWriter, r *http.Request) {
	var in struct {
		RemoveOld bool `json:"removeOld"`
		GraceMs   int  `json:"graceMs"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in); err != nil && !errors.Is(err, io.EOF) {
		simhttp.WriteError(w, http.StatusBadRequest, "malformed JSON body")
		return
	}
	kid, err := s.Rotate(in.RemoveOld, time.Duration(in.GraceMs)*time.Millisecond)
	if err != nil {
		simhttp.WriteError(w, http.StatusInternalServerError, err.Error())
		return
	}
	simhttp.WriteJSON(w, http.StatusOK, map[string]any{"kid": kid, "keys": s.keyInfo()})
}

// keyView is one key as the control API shows it.
type keyView struct {
	Kid       string     `json:"kid"`
	Signing   bool       `json:"signing"`
	CreatedAt time.Time  `json:"createdAt"`
	RetireAt  *time.Time `json:"retireAt,omitempty"`
}

func (s *Server) keyInfo() []keyView {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := s.publishedLocked()
	out := make([]keyView, len(keys))
	for i, k := range keys {
		out[i] = keyView{Kid: k.kid, Signing: i == len(keys)-1, CreatedAt: k.createdAt, RetireAt: k.retireAt}
	}
	return out
}

func (s *Server) handleKeys(w http.ResponseWriter, r *http.Request) {
	simhttp.WriteJSON(w, http.StatusOK, map[string]any{"keys": s.keyInfo()})
}

func (s *Server) handleRemoveKey(w http.ResponseWriter, r *http.Request) {
	found, err := s.RemoveKey(r.PathValue("kid"))
	switch {
	case !found:
		simhttp.WriteError(w, http.StatusNotFound, "no such key")
	case err != nil:
		simhttp.WriteError(w, http.StatusConflict, err.Error())
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}
