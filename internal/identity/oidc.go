package identity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/sync/singleflight"

	"changeflow/internal/outbound"
)

// Errors of the OIDC adapter. All of them are login-layer failures (401).
var (
	// ErrNoIssuer: oidc.issuer is not configured, so no bearer token can
	// be verified and none authenticates anybody.
	ErrNoIssuer = errors.New("oidc: no issuer configured")
	// ErrIssuerUnavailable: the issuer's discovery document could not be
	// fetched or is unusable; discovery is retried later.
	ErrIssuerUnavailable = errors.New("oidc: issuer unavailable")
	// ErrInvalidToken: the token failed verification (signature, expiry,
	// issuer, audience) or carries no usable subject.
	ErrInvalidToken = errors.New("oidc: invalid token")
)

// OIDCOptions configures an OIDC verifier.
type OIDCOptions struct {
	// Issuer is oidc.issuer. A trailing "/" is tolerated on either side
	// when comparing with the discovery document's issuer; tokens must
	// carry the document's issuer exactly.
	Issuer string
	// Audience is the client ID tokens must be issued to when Policy names
	// none (default "changeflow", the OIDC simulator's default audience).
	Audience string
	// Policy gives the oidc.* items — audience, account claim and field,
	// JWKS refresh interval, clock skew; read per token. nil means the
	// defaults (OIDCPolicy's zero value) with Audience.
	Policy func() OIDCPolicy
	// Settings gives the deadline and breaker of every call to the issuer
	// (discovery and JWKS); read per call. nil means the defaults.
	Settings func() DependencySettings
	// RetryAfter is the least time between two failed discoveries (default
	// 5s): while the issuer is down, logins fail fast instead of each
	// waiting for the deadline.
	RetryAfter time.Duration
	// Transport is the base transport (default http.DefaultTransport).
	Transport http.RoundTripper
	// Now is the clock (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// OIDC verifies bearer tokens against the issuer's JWKS with go-oidc.
// Discovery is lazy — done by the first request that carries a token,
// bounded by the deadline, shared by concurrent callers and retried after
// RetryAfter when it fails — so an issuer that is down when the service
// starts delays nothing but bearer logins. Keys are cached (keySet) and
// re-fetched when a token names an unknown key id, at most once per
// oidc.jwksMinRefresh, which is how rotation reaches us without letting
// forged tokens make us call the issuer; a token whose key is no longer
// published fails.
type OIDC struct {
	opts OIDCOptions
	// out gives every call to the issuer its deadline and breaker;
	// client sends through it.
	out    *outbound.Client[DependencySettings]
	client *http.Client
	logger *slog.Logger

	mu sync.Mutex // guards v, lastErr and failedAt
	v  *gooidc.IDTokenVerifier
	// lastErr and failedAt are the last failed discovery.
	lastErr  error
	failedAt time.Time
	flight   singleflight.Group
}

// NewOIDC returns a verifier; it does no I/O.
func NewOIDC(opts OIDCOptions) *OIDC {
	if opts.Audience == "" {
		opts.Audience = "changeflow"
	}
	if opts.RetryAfter <= 0 {
		opts.RetryAfter = 5 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	out := newIssuerClient(opts.Settings, opts.Transport)
	policy, audience := opts.Policy, opts.Audience
	if policy == nil {
		policy = func() OIDCPolicy { return OIDCPolicy{} }
	}
	opts.Policy = func() OIDCPolicy {
		p := policy()
		if p.Audience == "" {
			p.Audience = audience
		}
		return p.withDefaults()
	}
	return &OIDC{
		opts:   opts,
		out:    out,
		client: &http.Client{Transport: out.RoundTripper()},
		logger: logger,
	}
}

// timeout is the deadline of one call to the issuer in force.
func (o *OIDC) timeout() time.Duration { return o.out.CallSettings(o.out.Settings()).Timeout }

// Policy returns the oidc.* items in force, defaults applied.
func (o *OIDC) Policy() OIDCPolicy { return o.opts.Policy() }

// Verify checks raw and returns all its claims (JSON numbers as float64).
// go-oidc checks the signature (through keySet), issuer, expiry and nbf;
// Verify adds what it leaves out: the audience (read per token, so a
// reload applies), azp when there are several audiences, and an iat not
// beyond ClockSkew in the future. Every error wraps ErrNoIssuer,
// ErrIssuerUnavailable or ErrInvalidToken.
func (o *OIDC) Verify(ctx context.Context, raw string) (map[string]any, error) {
	v, err := o.verifier(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout())
	defer cancel()
	tok, err := v.Verify(ctx, raw)
	if err != nil {
		if errors.Is(err, ErrIssuerUnavailable) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	var c map[string]any
	if err := tok.Claims(&c); err != nil {
		return nil, fmt.Errorf("%w: claims: %w", ErrInvalidToken, err)
	}
	if err := checkToken(tok.Audience, tok.IssuedAt, c, o.opts.Policy(), o.opts.Now()); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	return c, nil
}

// checkToken is what OIDC Core §3.1.3.7 asks of an ID token beyond
// go-oidc's checks. Several audiences without azp naming us means the
// token was issued to another client that merely lists us, so that client
// could replay it here; an iat in the future means the issuer's clock, or
// the token, is not to be believed — and a token without iat is not an ID
// token.
func checkToken(aud []string, iat time.Time, c map[string]any, p OIDCPolicy, now time.Time) error {
	if !slices.Contains(aud, p.Audience) {
		return fmt.Errorf("audience %q not in %q", p.Audience, aud)
	}
	azp, hasAzp := c["azp"]
	if hasAzp && azp != p.Audience {
		return fmt.Errorf("azp %v is not %q", azp, p.Audience)
	}
	if len(aud) > 1 && !hasAzp {
		return fmt.Errorf("%d audiences and no azp", len(aud))
	}
	if iat.IsZero() {
		return errors.New("no iat")
	}
	if iat.After(now.Add(p.ClockSkew)) {
		return fmt.Errorf("iat %s is more than %s in the future", iat.UTC().Format(time.RFC3339), p.ClockSkew)
	}
	return nil
}

// verifier returns the verifier, discovering the issuer first if needed.
func (o *OIDC) verifier(ctx context.Context) (*gooidc.IDTokenVerifier, error) {
	if o.opts.Issuer == "" {
		return nil, ErrNoIssuer
	}
	o.mu.Lock()
	v, lastErr, failedAt := o.v, o.lastErr, o.failedAt
	o.mu.Unlock()
	if v != nil {
		return v, nil
	}
	if lastErr != nil && o.opts.Now().Sub(failedAt) < o.opts.RetryAfter {
		return nil, lastErr
	}
	// One discovery for all concurrent callers; it runs on its own
	// deadline, so one caller giving up does not fail the others.
	ch := o.flight.DoChan("discover", func() (any, error) {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.timeout())
		defer cancel()
		v, err := o.discover(dctx)
		o.mu.Lock()
		defer o.mu.Unlock()
		if err != nil {
			err = fmt.Errorf("%w: %w", ErrIssuerUnavailable, err)
			o.lastErr, o.failedAt = err, o.opts.Now()
			o.logger.Warn("identity: OIDC discovery failed; bearer logins fail until it succeeds", "issuer", o.opts.Issuer, "retryAfter", o.opts.RetryAfter, "err", err)
			return nil, err
		}
		o.v, o.lastErr = v, nil
		o.logger.Info("identity: OIDC issuer discovered", "issuer", o.opts.Issuer)
		return v, nil
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*gooidc.IDTokenVerifier), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", ErrIssuerUnavailable, ctx.Err())
	}
}

// discover fetches the discovery document itself rather than through
// gooidc.NewProvider, to tolerate a trailing-slash difference between
// oidc.issuer and the document (go-oidc compares them byte for byte).
func (o *OIDC) discover(ctx context.Context) (*gooidc.IDTokenVerifier, error) {
	url := strings.TrimSuffix(o.opts.Issuer, "/") + "/.well-known/openid-configuration"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := o.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("discovery answered %d", resp.StatusCode)
	}
	var pc gooidc.ProviderConfig
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&pc); err != nil {
		return nil, fmt.Errorf("discovery document: %w", err)
	}
	if strings.TrimSuffix(pc.IssuerURL, "/") != strings.TrimSuffix(o.opts.Issuer, "/") {
		return nil, fmt.Errorf("discovery names issuer %q, configured %q", pc.IssuerURL, o.opts.Issuer)
	}
	if pc.JWKSURL == "" {
		return nil, errors.New("discovery document has no jwks_uri")
	}
	ks := &keySet{
		url:        pc.JWKSURL,
		client:     o.client,
		minRefresh: func() time.Duration { return o.opts.Policy().JWKSMinRefresh },
		timeout:    o.timeout,
		now:        o.opts.Now,
	}
	// The audience is checked by Verify against the policy in force
	// rather than fixed here at discovery.
	return gooidc.NewVerifier(pc.IssuerURL, ks, &gooidc.Config{
		SkipClientIDCheck: true, SupportedSigningAlgs: pc.Algorithms, Now: o.opts.Now,
	}), nil
}
