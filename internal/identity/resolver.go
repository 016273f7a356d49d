package identity

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
)

// Headers the auth proxy sets (README.md, "The local run").
const (
	HeaderUser  = "X-Auth-Request-User"
	HeaderEmail = "X-Auth-Request-Email"
)

// Sources of an Identity.
const (
	SourceProxy = "proxy"
	SourceOIDC  = "oidc"
)

// Errors of the resolver's own checks; all are login-layer failures (401).
var (
	// ErrUntrustedProxy: auth-proxy headers arrived from a peer that is not
	// a trusted proxy — a client forging them, or a proxy missing from the
	// configuration.
	ErrUntrustedProxy = errors.New("auth-proxy headers from an untrusted peer")
	// ErrInvalidLogin: the login layer gave no value an account, email or
	// employee ID can be read from.
	ErrInvalidLogin = errors.New("login value is not an account, email or employee ID")
	// ErrConflictingLogin: the login values name two different people in
	// the directory.
	ErrConflictingLogin = errors.New("login values resolve to different accounts")
	// ErrDuplicateHeader: an identity header (Authorization or an
	// auth-proxy header) came more than once.
	ErrDuplicateHeader = errors.New("identity header sent more than once")
)

// Options configures a Resolver.
type Options struct {
	// Directory maps login forms to canonical accounts; nil means none
	// (only canonical-account-shaped logins are trusted).
	Directory DirectorySource
	// TrustedProxies returns the peers whose auth-proxy headers are
	// believed; read per request. nil or empty trusts nobody, which turns
	// the proxy adapter off.
	TrustedProxies func() []netip.Prefix
	// OIDC verifies bearer tokens; nil means bearer tokens authenticate
	// nobody (a request carrying one is a login failure).
	OIDC   *OIDC
	Logger *slog.Logger
}

// Resolver is the one identity resolver. The HTTP edge calls
// Resolve once per request and stores the result with NewContext;
// business logic, rate limiting and metrics read it from there.
type Resolver struct {
	opts   Options
	logger *slog.Logger
}

// NewResolver returns a Resolver.
func NewResolver(opts Options) *Resolver {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Resolver{opts: opts, logger: logger}
}

// LoopbackPrefixes are 127.0.0.0/8 and ::1: the trusted proxies of the
// local run, where the web app's user picker sends the proxy headers.
func LoopbackPrefixes() []netip.Prefix {
	return []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
}

// Resolve works out who is calling. It never rejects: a request without
// credentials resolves to the zero Resolution, and a request whose
// credentials fail carries Err — what that means is the authorization
// link's decision (401), not the resolver's.
//
// Adapters in order: a bearer token (Authorization: Bearer) wins, and if
// it fails the request fails — a presented credential that does not verify
// must not silently fall back to another one. Otherwise the auth-proxy
// headers, believed only from a trusted peer. Authorization headers of
// other schemes are not credentials of this service and are ignored.
//
// An identity header sent more than once (two Authorization, two
// X-Auth-Request-User or two X-Auth-Request-Email lines) is a login
// failure: which copy a proxy added and which one the client smuggled
// past it cannot be told apart, and "the first wins" let a client choose.
//
// Auth-proxy headers from an untrusted peer are a login failure rather
// than ignored: either way the caller gets no identity, but ignoring would
// hide a forging client, or a proxy missing from the trusted list, behind
// an anonymous caller; Err makes protected routes answer 401 and the log
// say why.
func (r *Resolver) Resolve(req *http.Request) Resolution {
	for _, h := range []string{"Authorization", HeaderUser, HeaderEmail} {
		if n := len(req.Header.Values(h)); n > 1 {
			return Resolution{Err: fmt.Errorf("%w: %s sent %d times", ErrDuplicateHeader, h, n)}
		}
	}
	if tok, ok := bearer(req.Header.Get("Authorization")); ok {
		return r.fromToken(req, tok)
	}
	user, email := req.Header.Get(HeaderUser), req.Header.Get(HeaderEmail)
	if user == "" && email == "" {
		return Resolution{}
	}
	raw := clip(firstNonEmpty(user, email))
	if !r.trustedPeer(req.RemoteAddr) {
		return Resolution{Identity: Identity{Raw: raw, Source: SourceProxy},
			Err: fmt.Errorf("%w: peer %s", ErrUntrustedProxy, req.RemoteAddr)}
	}
	id, err := r.mapProxy(user, email)
	id.Raw, id.Source = raw, SourceProxy
	return Resolution{Identity: id, Err: err}
}

func (r *Resolver) fromToken(req *http.Request, tok string) Resolution {
	if r.opts.OIDC == nil {
		return Resolution{Identity: Identity{Source: SourceOIDC}, Err: ErrNoIssuer}
	}
	c, err := r.opts.OIDC.Verify(req.Context(), tok)
	if err != nil {
		return Resolution{Identity: Identity{Source: SourceOIDC}, Err: err}
	}
	p := r.opts.OIDC.Policy()
	id, err := MapClaims(c, p, r.directory())
	raw, _ := c[p.AccountClaim].(string)
	id.Raw, id.Source = clip(raw), SourceOIDC
	return Resolution{Identity: id, Err: err}
}

func (r *Resolver) directory() *Directory {
	if r.opts.Directory == nil {
		return nil
	}
	return r.opts.Directory.Directory()
}

// mapProxy turns the auth proxy's headers into one identity. The user
// header, when present, is the identity; the email header is then only a
// cross-check, and it is the identity only when no user header came:
//
//   - the user value is looked up in the directory under every login form
//     (account, email, employee ID — the proxy may hand over any of them);
//     found → that account, Trusted;
//   - an email header naming a different person in the directory →
//     ErrConflictingLogin;
//   - a user value the directory does not know is that value as the
//     account, untrusted — never the email header's account: a user
//     header the proxy could not vouch for must not be upgraded by a
//     second header (an unknown or malformed X-Auth-Request-User used to
//     fall back to X-Auth-Request-Email's account);
//   - a user value that is not an account, email or employee ID →
//     ErrInvalidLogin, whatever the email header says.
//
// An unknown email-style account keeps its whole address rather than its
// local part: alice@partner.example must never become the account "alice"
// and inherit her permissions. An unknown bare ID that might be an
// employee number stays as given and untrusted, so metrics skip it instead
// of counting one person twice. With no directory configured, a
// canonical-account-shaped value is trusted (the login layer is then the
// only authority on accounts).
func (r *Resolver) mapProxy(user, email string) (Identity, error) {
	dir := r.directory()
	if user == "" {
		l := Normalize(email)
		if l.Kind != KindEmail {
			return Identity{}, fmt.Errorf("%w: %s is not an email", ErrInvalidLogin, HeaderEmail)
		}
		if e, ok := dir.Lookup(l); ok {
			return Identity{Account: e.Account, Email: e.Email, Trusted: true}, nil
		}
		return Identity{Account: l.Value, Email: l.Value}, nil
	}
	l := Normalize(user)
	if l.Kind == KindInvalid {
		return Identity{}, fmt.Errorf("%w: %s", ErrInvalidLogin, HeaderUser)
	}
	e, found := dir.Lookup(l)
	if email != "" {
		le := Normalize(email)
		if le.Kind != KindEmail {
			return Identity{}, fmt.Errorf("%w: %s is not an email", ErrInvalidLogin, HeaderEmail)
		}
		if other, ok := dir.Lookup(le); ok && (!found || other.Account != e.Account) {
			return Identity{}, fmt.Errorf("%w: %s names %q, %s %q", ErrConflictingLogin, HeaderEmail, other.Account, HeaderUser, l.Value)
		}
	}
	if found {
		return Identity{Account: e.Account, Email: e.Email, Trusted: true}, nil
	}
	id := Identity{Account: l.Value, Trusted: l.Kind == KindAccount && dir == nil}
	if l.Kind == KindEmail {
		id.Email = l.Value
	}
	return id, nil
}

func (r *Resolver) trustedPeer(remoteAddr string) bool {
	if r.opts.TrustedProxies == nil {
		return false
	}
	ap, err := netip.ParseAddrPort(remoteAddr)
	var addr netip.Addr
	if err == nil {
		addr = ap.Addr()
	} else if addr, err = netip.ParseAddr(remoteAddr); err != nil {
		return false
	}
	addr = addr.Unmap()
	for _, p := range r.opts.TrustedProxies() {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// bearer extracts the token of an "Authorization: Bearer" header; the
// scheme is case-insensitive (RFC 7235). An empty token is still a bearer
// credential (that fails).
func bearer(h string) (string, bool) {
	scheme, tok, _ := strings.Cut(strings.TrimSpace(h), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// clip bounds what the login layer sent before it reaches a log line.
func clip(s string) string {
	const maxRaw = 256
	if len(s) > maxRaw {
		return s[:maxRaw]
	}
	return s
}
