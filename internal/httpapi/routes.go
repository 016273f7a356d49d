package httpapi

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// route is one endpoint and its cross-cutting metadata. Go has no
// annotations, so what the seed expressed with @RateLimit and path lists is
// data here, next to the handler it governs.
type route struct {
	pattern string
	handler http.Handler
	// metrics: false for endpoints whose traffic is not API traffic
	// (the Prometheus scrape itself).
	metrics bool
	// rateLimit: the route's quota (the seed's @RateLimit); nil means the
	// route is not rate limited.
	rateLimit *RateLimitSpec
	// login: the route needs a login identity; without one it answers 401
	// (user routes, /api/*). Implied by rules.
	login bool
	// rules names the route in authz.routes.<rules>.rules (one of the
	// config.RouteOps* names): the caller needs one of those rule codes,
	// else 403 (authz.go). "" means no rule check.
	rules string
}

// routes registers every endpoint of the product in one place.
func (s *Server) routes() {
	for _, rt := range []route{
		{pattern: "GET /healthz", handler: s.handleHealthz(), metrics: true},
		{pattern: "GET /readyz", handler: s.handleReadyz(), metrics: true},
		{pattern: "GET /metrics", handler: promhttp.HandlerFor(s.deps.Metrics.Registry, promhttp.HandlerOpts{
			ErrorLog:      slogPromLogger{s.deps.Logger},
			ErrorHandling: promhttp.ContinueOnError,
		})},
	} {
		s.handle(rt)
	}
}

// handle wraps a route in its per-route chain and registers it. The order
// is fixed by R-X-1 (rate limiting → authorization → API metrics →
// business-activity metrics); each link is added when the route asks for it.
func (s *Server) handle(rt route) {
	h := rt.handler
	if rt.metrics {
		h = s.apiMetrics(rt.pattern, h)
	}
	// Authorization wraps before rate limiting so it runs after it (R-X-1).
	if rt.login || rt.rules != "" {
		h = s.authorize(rt, h)
	}
	// Rate limiting wraps last so that it runs first (R-X-1).
	if rt.rateLimit != nil {
		h = s.rateLimit(*rt.rateLimit, h)
	}
	s.mux.Handle(rt.pattern, h)
}

// apiMetrics counts arrival before the handler and status and latency
// after it. It never writes a response and never reads the body; the
// recorder itself swallows its own failures (R-MET-1).
func (s *Server) apiMetrics(pattern string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.deps.Metrics.RequestReceived(pattern, r.Method)
		tw, ok := w.(*trackingWriter)
		if !ok {
			tw = &trackingWriter{ResponseWriter: w}
		}
		start := time.Now()
		defer func() {
			// Recorded even when the handler panics, as the 500 the
			// recovery handler will write; then the panic continues.
			status := tw.Status()
			if v := recover(); v != nil {
				s.deps.Metrics.RequestCompleted(pattern, r.Method, http.StatusInternalServerError, time.Since(start))
				panic(v)
			}
			s.deps.Metrics.RequestCompleted(pattern, r.Method, status, time.Since(start))
		}()
		next.ServeHTTP(tw, r)
	})
}
