package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"changeflow/internal/config"
	"changeflow/internal/identity"
	"changeflow/internal/notify"
	"changeflow/internal/notify/chat"
	"changeflow/internal/notify/mail"
	"changeflow/internal/notify/outbox"
	"changeflow/internal/notify/webhook"
	"changeflow/internal/periodic"
	"changeflow/internal/store"
)

// This file builds the notification channels from notify.* and adapts
// what serve already has — the identity directory, the store's
// preferences — to what the e-mail channel asks of them, and runs the
// outbox's deliverer over them as a background part.

// emailLookup is mail.Options.Lookup: an account's e-mail address.
type emailLookup = func(ctx context.Context, account string) (email string, ok bool, err error)

// kindAllowed is mail.Options.Allowed: whether a person wants kind k.
type kindAllowed = func(ctx context.Context, account string, k notify.Kind) (bool, error)

// buildChannels returns one channel per notify.webhooks and notify.chat
// entry, in the order configured, then the e-mail channel when
// notify.smtp.host is set. lookup and allowed are the e-mail channel's
// people (nil lookup: only the operators are mailed; nil allowed: every
// kind), client sends the HTTP channels' posts (nil: a plain client).
//
// The configuration has checked every entry already; the channels'
// constructors check again, so an error here (a name two channels share
// included, which the outbox could not tell apart) names the item and
// the channel and never a URL or secret.
//
// simSMTP is the embedded simulators' SMTP server ("" when they are not
// embedded): with notify.smtp.host unset, e-mail goes there, as webhooks
// go to their receiver, so the local run's mail shows in the simulators'
// inbox on whatever port that server got.
func buildChannels(cfg *config.Snapshot, simSMTP string, lookup emailLookup, allowed kindAllowed, client *http.Client) ([]notify.Channel, error) {
	var out []notify.Channel
	names := map[string]bool{}
	add := func(key string, c notify.Channel) error {
		if names[c.Name()] {
			return fmt.Errorf("%s: two channels are named %s", key, c.Name())
		}
		names[c.Name()] = true
		out = append(out, c)
		return nil
	}
	for _, h := range cfg.NotifyWebhooks() {
		w, err := webhook.New(webhook.Endpoint{Name: h.Name, URL: h.URL, Secret: h.Secret, Types: h.Types}, webhook.Options{Client: client})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", config.KeyNotifyWebhooks, err)
		}
		if err := add(config.KeyNotifyWebhooks, w); err != nil {
			return nil, err
		}
	}
	for _, c := range cfg.NotifyChat() {
		ch, err := chat.New(chat.Endpoint{Name: c.Name, URL: c.URL, Types: c.Types}, chat.Options{Client: client})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", config.KeyNotifyChat, err)
		}
		if err := add(config.KeyNotifyChat, ch); err != nil {
			return nil, err
		}
	}
	s := cfg.NotifySMTP()
	if s.Host == "" && simSMTP != "" {
		host, port, err := net.SplitHostPort(simSMTP)
		if err != nil {
			return nil, fmt.Errorf("the simulators' SMTP server %q: %w", simSMTP, err)
		}
		s.Host, s.Port, s.Username, s.Password, s.StartTLS = host, atoiOr(port, 0), "", "", false
		if s.From == "" {
			s.From = "changeflow <changeflow@localhost>"
		}
	}
	if s.Host != "" {
		m, err := mail.New(mail.Settings{
			Host: s.Host, Port: s.Port, Username: s.Username, Password: s.Password, From: s.From, StartTLS: s.StartTLS,
		}, mail.Options{Lookup: lookup, Allowed: allowed, Operators: cfg.NotifyOperators()})
		if err != nil {
			return nil, fmt.Errorf("notify.smtp: %w", err)
		}
		if err := add("notify.smtp", m); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// directoryEmails is the e-mail channel's Lookup over the identity
// directory (identity.directoryFile): the address of the account's entry.
// dir nil (no directory configured) finds nobody, so only the operators
// are mailed. The directory is asked at each look-up, so a reloaded file
// applies to the next message.
func directoryEmails(dir identity.DirectorySource) emailLookup {
	return func(_ context.Context, account string) (string, bool, error) {
		if dir == nil {
			return "", false, nil
		}
		e, ok := dir.Directory().LookupField(identity.FieldAccount, identity.Normalize(account))
		if !ok || e.Email == "" {
			return "", false, nil
		}
		return e.Email, true, nil
	}
}

// preferenceReader is the store method the preferences adapter reads
// (*store.Store).
type preferenceReader interface {
	NotifyPreferences(ctx context.Context, account string) (map[string]bool, error)
}

var _ preferenceReader = (*store.Store)(nil)

// storePreferences is the e-mail channel's Allowed over a person's stored
// choices, decided by notify.Allowed as the preferences page shows them.
// notify.allowSafetyOptOut is read from the snapshot in force at each
// call, so a reload applies to the next message. A read that fails is an
// error: the outbox retries rather than guess either way.
func storePreferences(ps preferenceReader, cfg func() *config.Snapshot) kindAllowed {
	return func(ctx context.Context, account string, k notify.Kind) (bool, error) {
		set, err := ps.NotifyPreferences(ctx, account)
		if err != nil {
			return false, fmt.Errorf("read notification preferences: %w", err)
		}
		chosen := make(map[notify.Kind]bool, len(set))
		for kind, on := range set {
			chosen[notify.Kind(kind)] = on
		}
		return notify.Allowed(k, chosen, cfg().NotifyAllowSafetyOptOut()), nil
	}
}

// atoiOr is s as a number, or or when it is none.
func atoiOr(s string, or int) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return or
	}
	return n
}

// notifications is the outbox's deliverer as a part of serve: one pass
// every notify.interval on every instance (each event goes to one of
// them, under its lease). The channels are built once, at start: their
// keys take effect on restart; the intervals, notify.maxAttempts and
// notify.expiryReminders are read at every pass.
type notifications struct {
	d        *outbox.Deliverer
	log      *slog.Logger
	interval func() time.Duration
	svc      periodic.Service
}

// newNotifications builds the deliverer over channels for this instance;
// publicURL is where messages link (server.publicURL, else the address
// serve listens on).
func newNotifications(cfg *config.Manager, st *store.Store, channels []notify.Channel, publicURL string, m *outbox.Metrics, logger *slog.Logger) *notifications {
	log := logger.With("component", "notify")
	return &notifications{log: log, interval: func() time.Duration { return cfg.Current().NotifyInterval() }, d: &outbox.Deliverer{
		Store: st, Owner: cfg.Current().Instance().ID, Log: log, Metrics: m,
		Source: strings.TrimRight(publicURL, "/"),
		Settings: func() outbox.Settings {
			c := cfg.Current()
			base := c.Endpoints().PublicURL
			if base == "" {
				base = publicURL
			}
			return outbox.Settings{Channels: channels, MaxAttempts: c.NotifyMaxAttempts(),
				Reminders: c.NotifyExpiryReminders(), RemindEvery: c.NotifyReminderScanInterval(), PublicURL: base}
		},
	}}
}

// Start runs the deliverer's passes until Stop.
func (n *notifications) Start(ctx context.Context) error {
	n.svc.Start(ctx, periodic.Every{Interval: n.interval, Fallback: time.Second, Now: true, Pass: func(ctx context.Context) {
		k, err := n.d.Pass(ctx)
		periodic.LogPass(ctx, n.log, err, "notification delivery pass failed", k > 0, "notifications delivered", "events", k)
	}}.Loop)
	return nil
}

// Stop waits for the pass in progress.
func (n *notifications) Stop() { n.svc.Stop() }
