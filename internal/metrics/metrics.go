// Package metrics owns changeflow's Prometheus registry and the guarded
// recorders every other package goes through. The metrics rules live
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

// MaxLabelLen bounds every label value (truncate to 128).
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
	revocations   *prometheus.CounterVec
	revokeLag     *prometheus.HistogramVec
	renewals      *prometheus.CounterVec
	security      *prometheus.CounterVec
	prevToken     *prometheus.CounterVec
	rateLimited   *prometheus.CounterVec
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
	// reason is one of domain.RevokeReasons (a closed set, validated in
	// the recorder).
	m.revocations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "changeflow_revocations_total",
		Help: "Revocations created (access being removed), by reason, counted once after commit.",
	}, []string{"reason"})
	// From the grant's expiresAt to the deployment confirming the removal:
	// minutes for the expiry scan and a round, longer when a removal
	// waits for a person. A give-back before expiry has no lag and is not
	// observed.
	m.revokeLag = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "changeflow_revocation_lag_seconds",
		Help:    "From a grant's expiresAt to its entry removed and deployed, for expired grants, once per flip after commit (I9).",
		Buckets: []float64{10, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 12 * 3600, 24 * 3600, 72 * 3600},
	}, []string{"reason"})
	// outcome is one of renewalOutcomes (domain.RenewalOutcomes, a closed
	// set validated in the recorder).
	m.renewals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "changeflow_renewals_total",
		Help: "Renewals ended, by outcome (IN_EFFECT, REJECTED, CLOSED, EXPIRED), counted once per flip after commit (I9).",
	}, []string{"outcome"})
	// kind is one of securityKinds (single.SecurityEventKinds, a closed
	// set validated in the recorder).
	m.security = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "changeflow_security_events_total",
		Help: "Security events: content on changeflow's branches it did not write (foreign_head, foreign_branch, foreign_mr), counted once per event recorded.",
	}, []string{"kind"})
	// callback is one of callbackKinds (config's callback token names, a
	// closed set validated in the recorder).
	m.prevToken = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "changeflow_callback_token_previous_total",
		Help: "Callbacks authenticated with callbacks.tokens.<callback>Previous rather than the current token, by callback (approval, deploy, gitlab); once it stops rising, the previous token can be removed.",
	}, []string{"callback"})
	// kind is one of rateLimitKinds (gitlab.LimitedBy*, a closed set
	// validated in the recorder).
	m.rateLimited = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "changeflow_gitlab_rate_limited_total",
		Help: "GitLab calls held back by a limit, by kind: gitlab (GitLab answered 429; waited out, never a failure), paced (this instance's gitlab.rateLimit.* had no turn before the step's deadline; the step was rescheduled).",
	}, []string{"kind"})
	// Every series exists from the start at 0, so "has it risen in the
	// last week?" is answerable before the first use, not only after.
	for k := range callbackKinds {
		m.prevToken.WithLabelValues(k)
	}
	for k := range rateLimitKinds {
		m.rateLimited.WithLabelValues(k)
	}
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "changeflow_build_info",
		Help:        "Build information; the value is always 1.",
		ConstLabels: prometheus.Labels{"version": version},
	})
	info.Set(1)
	reg.MustRegister(m.httpReceived, m.httpCompleted, m.httpSucceeded, m.httpDuration, m.validated, m.withdrawn, m.revocations, m.revokeLag, m.renewals, m.security, m.prevToken, m.rateLimited, info)
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

// revokeReasons is the closed label set of the revocation series (the
// names of domain.RevokeReasons; metrics imports no domain package).
var revokeReasons = map[string]bool{"EXPIRED": true, "GIVEN_BACK": true, "OPERATOR": true}

// RevocationCreated counts one revocation created for reason. Callers
// invoke it once per revocation, after its commit; any other reason is
// dropped (closed set).
func (m *Metrics) RevocationCreated(reason string) {
	m.guard("revocations", func() {
		if revokeReasons[reason] {
			m.revocations.WithLabelValues(reason).Inc()
		}
	})
}

// RevocationDone observes the lag from expiresAt to "removed and
// deployed" of one revocation whose binding flipped to REVOKED, once,
// after commit. A lag below zero (given back before it expired) is not a
// lag and is not observed.
func (m *Metrics) RevocationDone(reason string, lag time.Duration) {
	m.guard("revocation_lag", func() {
		if revokeReasons[reason] && lag >= 0 {
			m.revokeLag.WithLabelValues(reason).Observe(lag.Seconds())
		}
	})
}

// renewalOutcomes is the closed label set of the renewal series (the
// names of domain.RenewalOutcomes; metrics imports no domain package).
var renewalOutcomes = map[string]bool{"IN_EFFECT": true, "REJECTED": true, "CLOSED": true, "EXPIRED": true}

// RenewalEnded counts one renewal that ended with outcome. Callers invoke
// it once per renewal, after the commit that ended it; any other outcome
// is dropped (closed set).
func (m *Metrics) RenewalEnded(outcome string) {
	m.guard("renewals", func() {
		if renewalOutcomes[outcome] {
			m.renewals.WithLabelValues(outcome).Inc()
		}
	})
}

// securityKinds is the closed label set of the security series (the
// kinds of single.SecurityEventKinds; metrics imports no workflow).
var securityKinds = map[string]bool{"foreign_head": true, "foreign_branch": true, "foreign_mr": true}

// SecurityEvent counts one security event of kind, once per event
// recorded; any other kind is dropped (closed set).
func (m *Metrics) SecurityEvent(kind string) {
	m.guard("security_events", func() {
		if securityKinds[kind] {
			m.security.WithLabelValues(kind).Inc()
		}
	})
}

// callbackKinds is the closed label set of the previous-token series (the
// callback token names of internal/config; metrics imports no config).
var callbackKinds = map[string]bool{"approval": true, "deploy": true, "gitlab": true}

// CallbackTokenPrevious counts one callback of kind callback authenticated
// with its previous token; any other kind is dropped (closed set).
func (m *Metrics) CallbackTokenPrevious(callback string) {
	m.guard("callback_token_previous", func() {
		if callbackKinds[callback] {
			m.prevToken.WithLabelValues(callback).Inc()
		}
	})
}

// rateLimitKinds is the closed label set of the rate-limit series (the
// kinds of gitlab.LimitedByGitLab and LimitedByPace; metrics imports no
// gitlab).
var rateLimitKinds = map[string]bool{"gitlab": true, "paced": true}

// GitLabRateLimited counts one GitLab call held back by a limit, of kind;
// any other kind is dropped (closed set).
func (m *Metrics) GitLabRateLimited(kind string) {
	m.guard("gitlab_rate_limited", func() {
		if rateLimitKinds[kind] {
			m.rateLimited.WithLabelValues(kind).Inc()
		}
	})
}

// Sabotage makes every recorder of m panic from now on: each vector is
// replaced by an unregistered one whose label arity never matches. It
// exists for the tests that prove the metrics rules across whole servers — metrics
// never change a response — and is never called in production code.
func (m *Metrics) Sabotage() {
	broken := func() *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sabotaged_total", Help: "never matches"}, []string{"a", "b", "c", "d", "e"})
	}
	m.httpReceived, m.httpCompleted, m.httpSucceeded, m.validated, m.withdrawn, m.revocations = broken(), broken(), broken(), broken(), broken(), broken()
	m.renewals, m.security, m.prevToken, m.rateLimited = broken(), broken(), broken(), broken()
	m.httpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sabotaged_seconds", Help: "never matches"}, []string{"a", "b", "c", "d", "e"})
	m.revokeLag = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sabotaged_seconds", Help: "never matches"}, []string{"a", "b", "c", "d", "e"})
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
