// Package httpapi is changeflow's HTTP edge: one NewServer that builds the
// handler tree, every route in routes.go with its cross-cutting metadata,
// the response envelope and the single error-to-status table.
package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"changeflow/docs"
	"changeflow/internal/domain"
	"changeflow/internal/metrics"
	"changeflow/internal/store"
	"changeflow/internal/web"
)

// Readiness is what GET /readyz asks of the storage layer.
type Readiness interface {
	Ping(ctx context.Context) error
	MigrationStatus(ctx context.Context) (current, latest int64, pending bool, err error)
	// ClusterReady reports whether the database node may serve (a Galera
	// node Synced in the primary component; always true elsewhere).
	ClusterReady(ctx context.Context) (state store.ClusterState, ok bool, err error)
}

// Deps are the server's dependencies, built by the composition root.
type Deps struct {
	Logger  *slog.Logger
	Metrics *metrics.Metrics
	Ready   Readiness
	Version string
	// ReadyTimeout bounds the readiness probe's database round trips, so a
	// hung database makes /readyz answer 503 instead of hanging the prober.
	ReadyTimeout time.Duration
	// RateLimit is what routes with a rate-limit spec need (ratelimit.go).
	RateLimit RateLimiting
	// Identity resolves each request's caller once, before any route
	// (identity.go); nil makes every caller anonymous.
	Identity IdentityResolver
	// Hosts says which Host values are served (hosts.go); read per
	// request. nil serves every Host.
	Hosts func() HostPolicy
	// Authz is what routes that need a login or rule codes need (authz.go).
	Authz Authorization
	// Business is what the user, ops and callback endpoints need
	// (handlers_deps.go).
	Business Business
	// Web serves the single-page app (docs/webapp.md): its entry page, assets
	// and client routes. Nil serves the app embedded in the binary
	// (internal/web); tests pass a handler over a build of their own.
	Web http.Handler
}

// Server is the HTTP handler of the product.
type Server struct {
	deps Deps
	mux  *http.ServeMux
	rl   *rateLimiter
	act  *activity
	// pages is the app behind serveMux's client-route fallback, with its
	// API metrics under the route label webPagesRoute.
	pages http.Handler
	// openapi is the API description served at GET /api/openapi.json.
	openapi openAPIDoc
	// runbook is docs/runbook.md, served at GET /api/runbook.
	runbook runbookDoc
	// registered lists every route handed to the mux, in order, so the
	// tests can hold the API description to the routes actually served.
	registered []route
	// prevWarn rate-limits the warning a callback authenticated with a
	// previous token logs (callbacks_previous.go).
	prevWarn *previousWarnings
	// root is the whole handler tree: the outer middleware around the mux.
	root http.Handler
}

// NewServer wires every route and the outer middleware. The outer chain is
// panic recovery → security headers (headers.go) → access log → Host
// check (hosts.go) → identity resolution → mux; per-route
// concerns (rate limiting, authorization, metrics) wrap each route at
// registration, because they depend on the route's own metadata. Identity
// is resolved outside them all, once, because rate limiting needs it
// before authorization runs.
func NewServer(d Deps) http.Handler { return newServer(d) }

// newServer also registers extra routes, through the same path production
// routes take; tests use it for routes that panic or fail on purpose.
func newServer(d Deps, extra ...route) http.Handler { return buildServer(d, extra...).root }

// buildServer builds the Server; newServer returns its handler tree.
func buildServer(d Deps, extra ...route) *Server {
	if d.ReadyTimeout <= 0 {
		d.ReadyTimeout = 2 * time.Second
	}
	if d.Web == nil {
		d.Web = web.Embedded().WithConnectSources(issuerOrigin(d.Business.Config))
	}
	if d.Authz.Permissions != nil {
		// Every permission check of the server — the authorization link,
		// /api/me, the preview's scope=file, the admin check — goes
		// through the one cache (authz_cache.go).
		cfg := d.Authz.Config
		d.Authz.Permissions = newCachedPermissions(d.Authz.Permissions, func() (time.Duration, any) {
			if cfg == nil {
				return 0, nil
			}
			snap := cfg.Current()
			return snap.AuthzCacheTTL(), snap
		}, nil)
	}
	s := &Server{deps: d, mux: http.NewServeMux(), openapi: embeddedOpenAPI(), runbook: newRunbookDoc(docs.Runbook())}
	if s.openapi.err != nil {
		d.Logger.Error("the embedded API description does not convert; GET /api/openapi.json answers 500", "err", s.openapi.err)
	}
	s.rl = newRateLimiter(d)
	s.prevWarn = newPreviousWarnings(d.Business.Now)
	s.act = newActivity(d)
	s.routes()
	for _, rt := range extra {
		s.handle(rt)
	}
	var h http.Handler = http.HandlerFunc(s.serveMux)
	h = s.resolveIdentity(h)
	h = s.checkHost(h)
	h = accessLog(d.Logger)(h)
	h = securityHeaders(h)
	h = recoverPanics(d.Logger)(h)
	s.root = h
	return s
}

// serveMux dispatches to the mux, but answers unmatched requests itself:
// net/http's own 404 and 405 are plain text, and every client of this API
// expects the envelope. The mux still decides which of the two it is (and
// sets Allow), we only replace the body.
func (s *Server) serveMux(w http.ResponseWriter, r *http.Request) {
	if _, pattern := s.mux.Handler(r); pattern != "" {
		s.mux.ServeHTTP(w, r)
		return
	}
	if isAppRequest(r) {
		s.pages.ServeHTTP(w, r)
		return
	}
	s.deps.Metrics.RequestReceived("unmatched", r.Method)
	start := time.Now()
	rec := &statusOnlyWriter{header: w.Header()}
	s.mux.ServeHTTP(rec, r)
	code := domain.CodeNotFound
	msg := "No such endpoint."
	if rec.status == http.StatusMethodNotAllowed {
		code = domain.CodeMethodNotAllowed
		msg = "This endpoint does not support the " + r.Method + " method."
	}
	w.Header().Del("X-Content-Type-Options")
	writeJSON(w, s.deps.Logger, StatusOf(code), Envelope{Code: code, Message: msg})
	s.deps.Metrics.RequestCompleted("unmatched", r.Method, StatusOf(code), time.Since(start))
}

// isAppRequest: a GET or HEAD outside the API's namespaces is the web
// app's (a client route, a root file, a missing asset — internal/web
// decides between the page, the file and a 404). Under /api, /ops and
// /callbacks an unknown path is an API mistake and keeps the envelope 404,
// even when a browser asks for HTML; that is also why the app's own routes
// stay out of those prefixes (its console is /console, not /ops).
func isAppRequest(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	p := path.Clean("/" + r.URL.Path)
	for _, prefix := range [...]string{"/api", "/ops", "/callbacks"} {
		if p == prefix || strings.HasPrefix(p, prefix+"/") {
			return false
		}
	}
	return true
}

// statusOnlyWriter captures the mux's status for an unmatched request and
// throws its plain-text body away; headers (Allow) go to the real writer.
type statusOnlyWriter struct {
	header http.Header
	status int
}

func (s *statusOnlyWriter) Header() http.Header         { return s.header }
func (s *statusOnlyWriter) Write(b []byte) (int, error) { return len(b), nil }
func (s *statusOnlyWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
}

// issuerOrigin returns the origin of oidc.issuer (none when it is unset or
// not an http(s) URL), for the web app's connect-src: the app fetches the
// issuer's discovery document and token endpoint from the browser. A
// token endpoint on another origin than the issuer is not covered; no
// issuer we know does that.
func issuerOrigin(cfg ConfigSource) func() []string {
	return func() []string {
		if cfg == nil {
			return nil
		}
		u, err := url.Parse(cfg.Current().Endpoints().OIDCIssuer)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil
		}
		return []string{u.Scheme + "://" + u.Host}
	}
}
