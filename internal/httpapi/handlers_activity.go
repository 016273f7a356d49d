package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"changeflow/internal/metrics"
)

// activity is the business-activity link (the fourth link of the chain, docs/api.md "Rate limiting"): "how many
// business actions users started and completed", for the routes on the
// allowlist only (route.business) — an explicit list, not a wildcard, so
// unrelated traffic never reaches it. It runs after rate limiting and
// authorization, so refused requests are not counted here. "received" is
// counted on arrival, "succeeded" after completion for 2xx only.
// Labels are the route pattern and the stage: bounded.
type activity struct {
	logger  *slog.Logger
	counter *prometheus.CounterVec
}

// newActivity registers changeflow_business_activity_total. A registry
// that refuses it leaves the counter unregistered and logged; the link
// still never changes a response.
func newActivity(d Deps) *activity {
	a := &activity{logger: d.Logger, counter: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "changeflow_business_activity_total",
		Help: "Business actions on allowlisted routes: stage=received on arrival, stage=succeeded after a 2xx.",
	}, []string{"route", "stage"})}
	if d.Metrics != nil {
		if err := d.Metrics.Register(a.counter); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
					a.counter = existing
				}
			} else {
				d.Logger.Error("business activity counter not registered; requests continue", "err", err)
			}
		}
	}
	return a
}

// wrap counts pattern's traffic. It never reads the body and never
// writes a response.
func (a *activity) wrap(pattern string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.inc(pattern, "received")
		tw, ok := w.(*trackingWriter)
		if !ok {
			tw = &trackingWriter{ResponseWriter: w}
		}
		next.ServeHTTP(tw, r)
		if s := tw.Status(); s >= 200 && s < 300 {
			a.inc(pattern, "succeeded")
		}
	})
}

// inc is guarded like every metric write: a failure is logged only.
func (a *activity) inc(pattern, stage string) {
	defer func() {
		if v := recover(); v != nil {
			a.logger.Error("metric failed; request continues", "metric", "business_activity", "panic", fmt.Sprint(v))
		}
	}()
	p, ok := metrics.Label(pattern)
	if !ok {
		return
	}
	a.counter.WithLabelValues(p, stage).Inc()
}
