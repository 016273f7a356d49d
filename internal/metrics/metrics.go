// Package metrics owns changeflow's Prometheus registry and the guarded
// recorders every other package goes through. The rules of R-MET-1 live
// here once: a recorder never panics into its caller, never blocks a
// request on its own failure, and never emits an empty, invalid or
// unbounded label value.
package metrics

import (
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// MaxLabelLen bounds every label value (R-MET-1: truncate to 128).
const MaxLabelLen = 128

// Metrics is the process's registry plus the HTTP series. It is created in
// the composition root and passed down; there is no global registry, so
// tests can build as many as they like.
type Metrics struct {
	Registry *prometheus.Registry
	logger   *slog.Logger

	httpReceived  *prometheus.CounterVec
	httpCompleted *prometheus.CounterVec
	httpSucceeded *prometheus.CounterVec
	httpDuration  *prometheus.HistogramVec
	validated     *prometheus.CounterVec
	withdrawn     *prometheus.CounterVec
}

// New builds a registry with the Go and process collectors and the HTTP
// series. version is exported as changeflow_build_info.
func New(logger *slog.Logger, version string) *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	m := &Metrics{
		Registry: reg,
		logger:   logger,
		// route is the registered pattern, never the raw path, so the
		// series count is bounded by the number of routes.
		httpReceived: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "changeflow_http_requests_received_total",
			Help: "HTTP requests received, counted on arrival, by route pattern.",
		}, []string{"route", "method"}),
		httpCompleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "changeflow_http_requests_total",
			Help: "HTTP requests completed, by route pattern and status code.",
		}, []string{"route", "method", "code"}),
		httpSucceeded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "changeflow_http_requests_succeeded_total",
			Help: "HTTP requests completed with a 2xx status, counted after completion.",
		}, []string{"route", "method"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "changeflow_http_request_duration_seconds",
			Help:    "HTTP request latency by route pattern.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route", "method"}),
	}
	// target is a configured target key: bounded by configuration, never
	// by callers.
	m.validated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "changeflow_requests_validated_total",
		Help: "Requests whose change the deployment reported in effect, counted once per flip after commit (I9).",
	}, []string{"target"})
	// place is one of withdrawPlaces: a closed set, anything else is
	// dropped.
	m.withdrawn = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "changeflow_requests_withdrawn_total",
		Help: "Requests their requester withdrew before they took effect, by where they waited (approval, batch_set, mr); counted once per flip to CLOSED after commit (I9).",
	}, []string{"place"})
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "changeflow_build_info",
		Help:        "Build information; the value is always 1.",
		ConstLabels: prometheus.Labels{"version": version},
	})
	info.Set(1)
	reg.MustRegister(m.httpReceived, m.httpCompleted, m.httpSucceeded, m.httpDuration, m.validated, m.withdrawn, info)
	return m
}

// Register adds collectors that other packages own (workflow, rate
// limiter). A registration error is returned, not panicked, so a duplicate
// name fails start-up with a message instead of crashing.
func (m *Metrics) Register(cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := m.Registry.Register(c); err != nil {
			return fmt.Errorf("register metric: %w", err)
		}
	}
	return nil
}

// RequestReceived counts a request on arrival.
func (m *Metrics) RequestReceived(route, method string) {
	m.guard("http_requests_received", func() {
		r, ok := Label(route)
		if !ok {
			return
		}
		me := Method(method)
		m.httpReceived.WithLabelValues(r, me).Inc()
	})
}

// RequestCompleted records status and latency after the handler returned;
// only 2xx responses count as succeeded.
func (m *Metrics) RequestCompleted(route, method string, status int, d time.Duration) {
	m.guard("http_requests", func() {
		r, ok := Label(route)
		if !ok {
			return
		}
		me := Method(method)
		m.httpCompleted.WithLabelValues(r, me, strconv.Itoa(status)).Inc()
		m.httpDuration.WithLabelValues(r, me).Observe(d.Seconds())
		if status >= 200 && status < 300 {
			m.httpSucceeded.WithLabelValues(r, me).Inc()
		}
	})
}

// RequestValidated counts one request that reached VALIDATED. Callers
// invoke it only for the call that flipped the state, after commit.
func (m *Metrics) RequestValidated(target string) {
	m.guard("requests_validated", func() {
		t, ok := Label(target)
		if !ok {
			return
		}
		m.validated.WithLabelValues(t).Inc()
	})
}

// withdrawPlaces is the closed label set of changeflow_requests_withdrawn_total.
var withdrawPlaces = []string{"approval", "batch_set", "mr"}

// RequestWithdrawn counts one withdrawal at place. Callers invoke it only
// for the call that flipped the binding to CLOSED, after commit; a place
// outside the closed set is dropped (and logged), never a new series.
func (m *Metrics) RequestWithdrawn(place string) {
	m.guard("requests_withdrawn", func() {
		if !slices.Contains(withdrawPlaces, place) {
			m.logger.Warn("metrics: withdrawal place outside the closed set dropped", "place", strings.ToValidUTF8(place[:min(len(place), MaxLabelLen)], "?"))
			return
		}
		m.withdrawn.WithLabelValues(place).Inc()
	})
}

// Sabotage makes every recorder of m panic from now on: each vector is
// replaced by an unregistered one whose label arity never matches. It
// exists for the tests that prove R-MET-1 across whole servers — metrics
// never change a response — and is never called in production code.
func (m *Metrics) Sabotage() {
	broken := func() *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sabotaged_total", Help: "never matches"}, []string{"a", "b", "c", "d", "e"})
	}
	m.httpReceived, m.httpCompleted, m.httpSucceeded, m.validated, m.withdrawn = broken(), broken(), broken(), broken(), broken()
	m.httpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sabotaged_seconds", Help: "never matches"}, []string{"a", "b", "c", "d", "e"})
}

// guard runs a metric write so that nothing it does (a panic in a
// collector, a label mismatch) reaches the business path: the failure is
// logged and the request goes on.
func (m *Metrics) guard(name string, f func()) {
	defer func() {
		if v := recover(); v != nil {
			m.logger.Error("metric failed; request continues", "metric", name, "panic", fmt.Sprint(v))
		}
	}()
	f()
}

// OtherMethod is the method label of every request whose method is not
// one of the standard ones.
const OtherMethod = "OTHER"

// Method maps an HTTP method onto a closed set of label values: the
// methods RFC 9110 and RFC 5789 define, else OtherMethod. The method is
// the one label a client chooses freely (net/http accepts any token), so
// without this an unauthenticated caller could add series at will; the
// route label is closed by construction (registered patterns or
// "unmatched", see internal/httpapi). The cost: a client using a custom
// method is counted under OTHER, which nobody needs to tell apart.
func Method(m string) string {
	switch m {
	case "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE":
		return m
	}
	return OtherMethod
}

// Label normalizes a label value: trimmed, valid UTF-8, at most
// MaxLabelLen bytes (cut on a rune boundary). It reports false for a value
// that is empty after trimming or not valid UTF-8, and the caller then
// skips the emission rather than guessing.
func Label(v string) (string, bool) {
	v = strings.TrimSpace(v)
	if v == "" || !utf8.ValidString(v) {
		return "", false
	}
	if len(v) > MaxLabelLen {
		cut := MaxLabelLen
		for cut > 0 && !utf8.RuneStart(v[cut]) {
			cut--
		}
		v = v[:cut]
	}
	return v, true
}
