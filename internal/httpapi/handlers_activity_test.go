package httpapi

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// activityCount reads changeflow_business_activity_total{route,stage}.
func activityCount(t *testing.T, reg prometheus.Gatherer, stage string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "changeflow_business_activity_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["route"] == "POST /api/requests" && labels["stage"] == stage {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func TestBusinessActivityCountsAllowlistedWorkOnly(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st, withOverlay(map[string]any{"ratelimit.apply.limit": 2}))
		reg := w.metrics.Registry
		w.do(req{method: "POST", path: "/api/requests", body: `{}`}).want(t, 401, "UNAUTHENTICATED")
		w.do(req{method: "POST", path: "/api/requests", user: "alice", body: `{`}).want(t, 400, "INVALID_ARGUMENT")
		w.do(req{method: "POST", path: "/api/requests", user: "alice", body: submitBodyFor(tOpen, "r", "")}).want(t, 202, "ACCEPTED")
		w.do(req{method: "POST", path: "/api/requests", user: "alice", body: `{`}).want(t, 429, "RATE_LIMITED")
		w.do(req{method: "GET", path: "/api/targets", user: "alice"}).want(t, 200, "OK")
		// Received: the 400 and the 202 (not the 401 or the 429); succeeded: the 202.
		if got, want := [2]float64{activityCount(t, reg, "received"), activityCount(t, reg, "succeeded")}, [2]float64{2, 1}; got != want {
			t.Fatalf("received/succeeded %v, want %v", got, want)
		}
	})
}

// TestBusinessActivityPanicChangesNothing: a counter that panics on every
// write leaves the response byte for byte as it was.
func TestBusinessActivityPanicChangesNothing(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Test", "1")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"code":"ACCEPTED"}`))
	})
	serve := func(next http.Handler) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, httptest.NewRequest("POST", "/api/requests", nil))
		return rec
	}
	// Two label names declared, one given: every WithLabelValues panics.
	broken := &activity{logger: slog.New(slog.DiscardHandler),
		counter: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x_total", Help: "x"}, []string{"only"})}
	plain, wrapped := serve(h), serve(broken.wrap("POST /api/requests", h))
	if plain.Code != wrapped.Code || plain.Body.String() != wrapped.Body.String() || plain.Header().Get("X-Test") != wrapped.Header().Get("X-Test") {
		t.Fatalf("plain %d %q, wrapped %d %q", plain.Code, plain.Body, wrapped.Code, wrapped.Body)
	}
}
