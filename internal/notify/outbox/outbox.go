// Package outbox delivers the outbox's events (docs/notifications.md,
// "Delivery"): every instance runs a Deliverer, which claims due events
// with a lease, sends each to every channel that carries its kind and
// records what each channel did, so an event is delivered at least once
// per channel — again, with the same id, when an instance dies between
// sending and recording — and the channels that took it do not hear of it
// twice when another one fails. A failed event is retried with
// exponential backoff and jitter up to notify.maxAttempts, then
// dead-lettered for an operator to replay.
package outbox

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"changeflow/internal/notify"
	"changeflow/internal/store"
)

// Store is what the deliverer needs of the store.
type Store interface {
	OutboxClaim(ctx context.Context, owner string, lease time.Duration, limit int) ([]store.OutboxEvent, error)
	OutboxDeliveries(ctx context.Context, row int64) (map[string]string, error)
	OutboxRecordDelivery(ctx context.Context, row int64, channel, outcome string) error
	OutboxFinish(ctx context.Context, row int64, owner string, done, dead bool, retryIn time.Duration, lastErr string) (bool, error)
	OutboxDisabledChannels(ctx context.Context) (map[string]store.DisabledChannel, error)
	OutboxDisableChannel(ctx context.Context, channel, reason string) error
	OutboxRemindExpiring(ctx context.Context, thresholds []time.Duration, limit int) (int, error)
	OutboxStats(ctx context.Context) (store.OutboxStats, error)
}

// Settings are read again before every pass, so a configuration reload
// applies without a restart.
type Settings struct {
	Channels []notify.Channel
	// MaxAttempts (notify.maxAttempts) bounds the attempts of an event
	// before it is dead-lettered.
	MaxAttempts int
	// Reminders (notify.expiryReminders) are the thresholds of the expiry
	// reminders, largest first.
	Reminders []time.Duration
	// PublicURL (server.publicURL) is where the links of a message point.
	PublicURL string
	// RemindEvery (notify.reminderScanInterval) is how often a pass also
	// scans for the expiry reminders due (≤ 0: 30 s).
	RemindEvery time.Duration
}

// Deliverer is one instance's delivery loop.
type Deliverer struct {
	Store Store
	// Owner names this instance in its leases.
	Owner string
	// Settings gives the settings of the moment.
	Settings func() Settings
	// Source is the CloudEvents source of every event ("/changeflow" when
	// empty).
	Source string
	Log    *slog.Logger
	// Lease bounds one claim (≤ 0: 1 minute): longer than the slowest
	// delivery of a batch of events through every channel, so a live
	// instance keeps its claim, and short enough that the events of a
	// dead one are delivered again soon.
	Lease time.Duration
	// Batch is the number of events one pass claims (≤ 0: 50).
	Batch int
	// BackoffBase and BackoffMax shape the retries (≤ 0: 2 s and 30 min):
	// attempt n waits BackoffBase·2ⁿ⁻¹, at most BackoffMax, with up to half
	// of it taken off at random so the retries of many events spread out.
	BackoffBase, BackoffMax time.Duration
	// Metrics, when set, counts the deliveries (NewMetrics).
	Metrics    *Metrics
	lastRemind time.Time
}

// Pass is one run of the loop: write the reminders that are due (every
// Settings.RemindEvery), then claim and deliver what is due. Passes of one
// Deliverer must not overlap (periodic.Every runs them one by one). It returns the number of events it
// finished (delivered, skipped or dead-lettered).
func (d *Deliverer) Pass(ctx context.Context) (int, error) {
	set := d.Settings()
	var errs []error
	every := set.RemindEvery
	if every <= 0 {
		every = 30 * time.Second
	}
	if len(set.Reminders) > 0 && time.Since(d.lastRemind) >= every {
		if _, err := d.Store.OutboxRemindExpiring(ctx, set.Reminders, 500); err != nil {
			errs = append(errs, err)
		} else {
			d.lastRemind = time.Now()
		}
	}
	evs, err := d.Store.OutboxClaim(ctx, d.Owner, d.lease(), d.batch())
	if err != nil {
		return 0, errors.Join(append(errs, err)...)
	}
	disabled, err := d.Store.OutboxDisabledChannels(ctx)
	if err != nil {
		return 0, errors.Join(append(errs, err)...)
	}
	n := 0
	for _, e := range evs {
		finished, err := d.deliver(ctx, set, disabled, e)
		if err != nil {
			errs = append(errs, err)
		}
		if finished {
			n++
		}
	}
	if d.Metrics != nil {
		if st, err := d.Store.OutboxStats(ctx); err == nil {
			d.Metrics.observe(st)
		}
	}
	return n, errors.Join(errs...)
}

// deliver sends e to each channel that carries its kind and has no
// outcome for it yet, then finishes the claim: done, retried later or
// dead. It reports whether e is finished (not to be retried).
func (d *Deliverer) deliver(ctx context.Context, set Settings, disabled map[string]store.DisabledChannel, e store.OutboxEvent) (bool, error) {
	had, err := d.Store.OutboxDeliveries(ctx, e.Row)
	if err != nil {
		return false, err
	}
	ev := d.event(set, e)
	var failures []string
	var wait time.Duration
	for _, ch := range set.Channels {
		name := ch.Name()
		if _, ok := had[name]; ok || !ch.Wants(e.Kind) {
			continue
		}
		if _, off := disabled[name]; off {
			// The destination said it is gone: the event is not for it
			// until an operator turns it back on.
			if err := d.Store.OutboxRecordDelivery(ctx, e.Row, name, store.DeliveryGone); err != nil {
				return false, err
			}
			continue
		}
		start := time.Now()
		err := ch.Send(ctx, ev)
		outcome := outcomeOf(err)
		d.Metrics.delivered(name, outcome, time.Since(start))
		switch outcome {
		case store.DeliveryDelivered, store.DeliverySkipped:
			if err := d.Store.OutboxRecordDelivery(ctx, e.Row, name, outcome); err != nil {
				return false, err
			}
		case store.DeliveryGone:
			d.log().Warn("notification channel is gone: disabled until an operator turns it on", "channel", name, "err", err)
			if err := d.Store.OutboxDisableChannel(ctx, name, flatten(err)); err != nil {
				return false, err
			}
			disabled[name] = store.DisabledChannel{Channel: name}
			if err := d.Store.OutboxRecordDelivery(ctx, e.Row, name, store.DeliveryGone); err != nil {
				return false, err
			}
		default:
			failures = append(failures, name+": "+flatten(err))
			if after, ok := notify.RetryAfter(err); ok {
				wait = max(wait, after)
			}
		}
	}
	if len(failures) == 0 {
		ok, err := d.Store.OutboxFinish(ctx, e.Row, d.Owner, true, false, 0, "")
		if ok {
			d.Metrics.latency(time.Since(e.CreatedAt))
		}
		return ok, err
	}
	lastErr := strings.Join(failures, "; ")
	dead := e.Attempts >= max(set.MaxAttempts, 1)
	retryIn := max(d.backoff(e.Attempts), wait)
	if dead {
		d.log().Warn("notification dead-lettered", "event", e.EventID, "kind", e.Kind, "attempts", e.Attempts, "err", lastErr)
	}
	if _, err := d.Store.OutboxFinish(ctx, e.Row, d.Owner, false, dead, retryIn, lastErr); err != nil {
		return false, err
	}
	return dead, nil
}

// event is e as the channels receive it.
func (d *Deliverer) event(set Settings, e store.OutboxEvent) notify.Event {
	src := d.Source
	if src == "" {
		src = "/changeflow"
	}
	return notify.Event{
		SpecVersion: notify.SpecVersion, ID: e.EventID, Source: src, Type: e.Kind.Type(),
		Subject: e.OperationID, Time: e.CreatedAt.UTC(), DataContentType: "application/json",
		Data: notify.Describe(e.Data.Data, e.Data.Request, set.PublicURL),
	}
}

// outcomeOf is what a channel's answer err records: "" for a failure to
// retry.
func outcomeOf(err error) string {
	switch {
	case err == nil:
		return store.DeliveryDelivered
	case errors.Is(err, notify.ErrNotForThisChannel):
		return store.DeliverySkipped
	case errors.Is(err, notify.ErrGone):
		return store.DeliveryGone
	}
	return ""
}

// backoff is the wait after attempt n (1-based) failed.
func (d *Deliverer) backoff(n int) time.Duration {
	base, ceiling := d.BackoffBase, d.BackoffMax
	if base <= 0 {
		base = 2 * time.Second
	}
	if ceiling <= 0 {
		ceiling = 30 * time.Minute
	}
	w := base
	for i := 1; i < n && w < ceiling; i++ {
		w *= 2
	}
	w = min(w, ceiling)
	return w - time.Duration(rand.Int64N(int64(w/2)+1))
}

func (d *Deliverer) lease() time.Duration {
	if d.Lease > 0 {
		return d.Lease
	}
	return time.Minute
}

func (d *Deliverer) batch() int {
	if d.Batch > 0 {
		return d.Batch
	}
	return 50
}

func (d *Deliverer) log() *slog.Logger {
	if d.Log != nil {
		return d.Log
	}
	return slog.Default()
}

// flatten is err on one line, short enough for the event's last_error.
func flatten(err error) string {
	s := strings.Join(strings.Fields(err.Error()), " ")
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

// Metrics are the outbox's Prometheus metrics.
type Metrics struct {
	depth      prometheus.Gauge
	dead       prometheus.Gauge
	oldest     prometheus.Gauge
	deliveries *prometheus.CounterVec
	sendTime   *prometheus.HistogramVec
	lag        prometheus.Histogram
}

// NewMetrics makes the outbox's metrics; register them with Collectors.
func NewMetrics() *Metrics {
	return &Metrics{
		depth: prometheus.NewGauge(prometheus.GaugeOpts{Name: "changeflow_outbox_pending",
			Help: "Events of the outbox not yet delivered (read by the last delivery pass)."}),
		dead: prometheus.NewGauge(prometheus.GaugeOpts{Name: "changeflow_outbox_dead_letters",
			Help: "Events that ran out of attempts and wait for an operator's replay."}),
		oldest: prometheus.NewGauge(prometheus.GaugeOpts{Name: "changeflow_outbox_oldest_pending_seconds",
			Help: "Age of the oldest undelivered event, by the database clock; 0 when none."}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "changeflow_notification_deliveries_total",
			Help: "Sends of an event to a channel, by channel and outcome (delivered, skipped, gone, failed)."}, []string{"channel", "outcome"}),
		sendTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "changeflow_notification_send_seconds",
			Help: "Time of one send to a channel.", Buckets: prometheus.DefBuckets}, []string{"channel"}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "changeflow_notification_delivery_latency_seconds",
			Help:    "From an event's write to its delivery on every channel.",
			Buckets: []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 3600}}),
	}
}

// Collectors are m's collectors, to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.depth, m.dead, m.oldest, m.deliveries, m.sendTime, m.lag}
}

func (m *Metrics) observe(st store.OutboxStats) {
	m.depth.Set(float64(st.Pending))
	m.dead.Set(float64(st.Dead))
	m.oldest.Set(st.OldestPending.Seconds())
}

func (m *Metrics) delivered(channel, outcome string, took time.Duration) {
	if m == nil {
		return
	}
	if outcome == "" {
		outcome = "failed"
	}
	m.deliveries.WithLabelValues(channel, strings.ToLower(outcome)).Inc()
	m.sendTime.WithLabelValues(channel).Observe(took.Seconds())
}

func (m *Metrics) latency(d time.Duration) {
	if m == nil {
		return
	}
	m.lag.Observe(max(d, 0).Seconds())
}
