// Package oidc simulates an OpenID Connect issuer: a discovery document,
// a JWKS of RSA keys, RS256 tokens minted on request for a named user
// (email-style or employee-ID subject), key rotation, and the
// authorization code flow with PKCE behind a login page where a person
// picks who to be — enough for the OIDC login adapter's tests to verify
// tokens over real HTTP, and for the web app to sign in in the local run.
package oidc

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Options configures a Server.
type Options struct {
	// Issuer is the base URL the server is mounted at, e.g.
	// http://127.0.0.1:8090/oidc; it is the "iss" of every token and the
	// prefix of every URL in the discovery document. SetIssuer changes it
	// (for servers whose port is known only once listening).
	Issuer string
	// KeyBits is the RSA key size (default 2048).
	KeyBits int
	// Grace is how long a rotated-out key stays in the JWKS (default 10 min).
	Grace time.Duration
	// DefaultAudience is the "aud" of tokens that name none (default
	// "changeflow").
	DefaultAudience string
	// Users are the quick picks of the login page (flow.go); any subject
	// can be typed in as well. LocalUsers() is the local world's.
	Users []User
	// RedirectURIs are the registered redirect URIs of the login flow:
	// /authorize redirects only to one of them, compared exactly (RFC 9700
	// §4.1.3: no patterns, no prefixes). None registered refuses every
	// authorization request. PUT /_control/redirect_uris replaces them.
	RedirectURIs []string
	Logger       *slog.Logger
}

// key is one signing key.
type key struct {
	kid       string
	priv      *rsa.PrivateKey
	createdAt time.Time
	retireAt  *time.Time // set when rotated out: removed from the JWKS then
}

// Server is the OIDC issuer simulator; it is an http.Handler.
type Server struct {
	opts   Options
	logger *slog.Logger
	mux    *http.ServeMux

	mu        sync.Mutex
	issuer    string
	keys      []*key           // the last one signs
	keyed     bool             // the first key was generated (firstKeyLocked)
	grants    map[string]grant // authorization codes not yet exchanged (flow.go)
	redirects []string         // registered redirect URIs (Options.RedirectURIs)
}

// New returns a server. Its first signing key is generated when first
// needed (firstKeyLocked): a world that never signs anyone in — most
// tests', which build one per test — does not pay for an RSA key.
func New(opts Options) (*Server, error) {
	if opts.KeyBits == 0 {
		opts.KeyBits = 2048
	}
	if opts.KeyBits < 2048 {
		return nil, fmt.Errorf("oidc: key size %d is below 2048 bits", opts.KeyBits)
	}
	if opts.Grace <= 0 {
		opts.Grace = 10 * time.Minute
	}
	if opts.DefaultAudience == "" {
		opts.DefaultAudience = "changeflow"
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{opts: opts, logger: logger, mux: http.NewServeMux(), issuer: strings.TrimRight(opts.Issuer, "/"), grants: map[string]grant{},
		redirects: slices.Clone(opts.RedirectURIs)}
	s.routes()
	return s, nil
}

// ServeHTTP serves discovery, JWKS and the control API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close is a no-op kept for symmetry with the other simulators.
func (s *Server) Close() error { return nil }

// Issuer returns the issuer URL.
func (s *Server) Issuer() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.issuer
}

// RedirectURIs returns the registered redirect URIs.
func (s *Server) RedirectURIs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.redirects)
}

// SetRedirectURIs replaces the registered redirect URIs.
func (s *Server) SetRedirectURIs(uris []string) {
	s.mu.Lock()
	s.redirects = slices.Clone(uris)
	s.mu.Unlock()
}

func (s *Server) registered(uri string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.redirects, uri)
}

// SetIssuer changes the issuer URL (tokens minted before keep the old one).
func (s *Server) SetIssuer(issuer string) {
	s.mu.Lock()
	s.issuer = strings.TrimRight(issuer, "/")
	s.mu.Unlock()
}

// firstKeyLocked generates the first signing key unless it exists.
// Callers hold s.mu.
func (s *Server) firstKeyLocked() error {
	if s.keyed {
		return nil
	}
	k, err := s.newKey()
	if err != nil {
		return err
	}
	s.keys, s.keyed = append(s.keys, k), true
	return nil
}

func (s *Server) newKey() (*key, error) {
	priv, err := rsa.GenerateKey(rand.Reader, s.opts.KeyBits)
	if err != nil {
		return nil, fmt.Errorf("oidc: generate key: %w", err)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	// A random kid, so a verifier that cached an earlier process's keys
	// cannot mistake a new key for an old one.
	return &key{kid: "sim-" + hex.EncodeToString(b[:]), priv: priv, createdAt: time.Now().UTC()}, nil
}

// Rotate makes a new key the signing key. The old ones stay in the JWKS
// for grace (Options.Grace when zero), or are removed at once when
// removeOld is set. It returns the new kid.
func (s *Server) Rotate(removeOld bool, grace time.Duration) (string, error) {
	k, err := s.newKey()
	if err != nil {
		return "", err
	}
	if grace <= 0 {
		grace = s.opts.Grace
	}
	retire := time.Now().Add(grace)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.firstKeyLocked(); err != nil {
		return "", err
	}
	if removeOld {
		s.keys = nil
	}
	for _, old := range s.keys {
		if old.retireAt == nil {
			old.retireAt = &retire
		}
	}
	s.keys = append(s.keys, k)
	s.logger.Info("oidc key rotated", "kid", k.kid, "removedOld", removeOld)
	return k.kid, nil
}

// ErrActiveKey is returned when removing the key that signs.
var ErrActiveKey = errors.New("the signing key cannot be removed; rotate first")

// RemoveKey takes kid out of the JWKS at once.
func (s *Server) RemoveKey(kid string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.firstKeyLocked(); err != nil {
		return false, err
	}
	for i, k := range s.keys {
		if k.kid != kid {
			continue
		}
		if i == len(s.keys)-1 {
			return true, ErrActiveKey
		}
		s.keys = append(s.keys[:i:i], s.keys[i+1:]...)
		return true, nil
	}
	return false, nil
}

// publishedLocked prunes keys past their grace and returns the rest.
// Callers hold s.mu.
func (s *Server) publishedLocked() []*key {
	if err := s.firstKeyLocked(); err != nil {
		s.logger.Error("oidc: no signing key", "err", err)
	}
	now := time.Now()
	kept := s.keys[:0:0]
	for _, k := range s.keys {
		if k.retireAt == nil || now.Before(*k.retireAt) {
			kept = append(kept, k)
		}
	}
	s.keys = kept
	return kept
}

// JWKS returns the published public keys.
func (s *Server) JWKS() jose.JSONWebKeySet {
	s.mu.Lock()
	defer s.mu.Unlock()
	var set jose.JSONWebKeySet
	for _, k := range s.publishedLocked() {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: &k.priv.PublicKey, KeyID: k.kid, Algorithm: string(jose.RS256), Use: "sig"})
	}
	return set
}
