package httpapi

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"changeflow/internal/metrics"
)

// BenchmarkChain measures what the per-request machinery costs: the same
// small JSON answer from a bare net/http handler, and from the server's
// full chain (panic recovery, access log to a JSON handler, the mux, the
// rate-limit link, API metrics). The limit is high enough that every
// request is admitted, with the clock moving 1 ms per request so the
// caller's log stays ~1000 entries deep — the steady state of a busy key.
// docs/benchmarks.md reports chain/bare.
func BenchmarkChain(b *testing.B) {
	body := []byte(`{"code":"OK","message":"","data":{"pending":3}}` + "\n")
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body)
	})
	cfg := newTestConfig(b, "ratelimit:\n  window: 1s\n  bench:\n    limit: 2000\n")
	var tick atomic.Int64
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	now := func() time.Time { return start.Add(time.Duration(tick.Add(1)) * time.Millisecond) }
	server := func(rl *RateLimitSpec) http.Handler {
		logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
		return newServer(Deps{
			Logger: logger, Metrics: metrics.New(logger, "bench"), Ready: fakeReady{}, Version: "bench",
			RateLimit: RateLimiting{Config: cfg, Now: now},
		}, route{pattern: "GET /api/bench", handler: handler, metrics: true, rateLimit: rl})
	}
	for _, c := range []struct {
		name string
		h    http.Handler
	}{
		{"handler=bare", handler},
		{"handler=chain-without-ratelimit", server(nil)},
		{"handler=chain", server(&RateLimitSpec{Bucket: "bench"})},
	} {
		b.Run(c.name, func(b *testing.B) {
			req := httptest.NewRequest("GET", "/api/bench", nil)
			req.RemoteAddr = "198.51.100.7:40000"
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				c.h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("status %d", rec.Code)
				}
			}
		})
	}
}
