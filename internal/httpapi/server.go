// Package httpapi is changeflow's HTTP edge: one NewServer that builds the
// handler tree, every route in routes.go with its cross-cutting metadata,
// the response envelope and the single error-to-status table.
package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/metrics"
)

// Readiness is what GET /readyz asks of the storage layer.
type Readiness interface {
	Ping(ctx context.Context) error
	MigrationStatus(ctx context.Context) (current, latest int64, pending bool, err error)
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
	// Authz is what routes that need a login or rule codes need (authz.go).
	Authz Authorization
	// Business is what the user, ops and callback endpoints need
	// (handlers_deps.go).
	Business Business
}

// Server is the HTTP handler of the product.
type Server struct {
	deps Deps
	mux  *http.ServeMux
	rl   *rateLimiter
	act  *activity
}

// NewServer wires every route and the outer middleware. The outer chain is
// panic recovery → access log → identity resolution → mux; per-route
// concerns (rate limiting, authorization, metrics) wrap each route at
// registration, because they depend on the route's own metadata. Identity
// is resolved outside them all, once, because rate limiting needs it
// before authorization runs.
func NewServer(d Deps) http.Handler { return newServer(d) }

// newServer also registers extra routes, through the same path production
// routes take; tests use it for routes that panic or fail on purpose.
func newServer(d Deps, extra ...route) http.Handler {
	if d.ReadyTimeout <= 0 {
		d.ReadyTimeout = 2 * time.Second
	}
	s := &Server{deps: d, mux: http.NewServeMux()}
	s.rl = newRateLimiter(d)
	s.act = newActivity(d)
	s.routes()
	for _, rt := range extra {
		s.handle(rt)
	}
	var h http.Handler = http.HandlerFunc(s.serveMux)
	h = s.resolveIdentity(h)
	h = accessLog(d.Logger)(h)
	h = recoverPanics(d.Logger)(h)
	return h
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
