// Package webhook is the webhook channel: each event is POSTed to an
// endpoint as its CloudEvents 1.0 structured JSON document, signed as the
// Standard Webhooks specification says (docs/notifications.md,
// "Webhooks"), through the endpoint's own circuit breaker and deadline.
package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"changeflow/internal/notify"
	"changeflow/internal/notify/internal/httppost"
)

// ContentType is the media type of a structured-mode CloudEvent.
const ContentType = "application/cloudevents+json"

// The Standard Webhooks headers.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// SecretPrefix marks a secret in the Standard Webhooks form: the key is
// the base64 text after it.
const SecretPrefix = "whsec_"

// Endpoint is one configured webhook (notify.webhooks[]).
type Endpoint struct {
	// Name is unique among the webhooks; the channel is named "webhook:"+Name.
	Name string
	// URL is where events are POSTed (http or https).
	URL string
	// Secret signs every delivery: "whsec_<base64>" as the Standard
	// Webhooks libraries generate it (the key is the decoded bytes), or
	// any other text, whose UTF-8 bytes are the key as they stand.
	Secret string
	// Types are the kinds the endpoint hears; empty means all.
	Types []notify.Kind
}

// Options are the call settings of an endpoint.
type Options struct {
	// Client sends the requests (nil: a plain client over
	// http.DefaultTransport); its redirect policy is replaced, a webhook
	// is never redirected.
	Client *http.Client
	// Timeout bounds one delivery (≤ 0: 10 s).
	Timeout time.Duration
	// BreakerFailures consecutive failures (≤ 0: 5) open the endpoint's
	// breaker for BreakerOpenFor (≤ 0: 30 s); while open a delivery fails
	// at once and the outbox retries it later.
	BreakerFailures int
	BreakerOpenFor  time.Duration
	// Now is the clock of webhook-timestamp (nil: time.Now).
	Now func() time.Time
}

// Webhook is the channel of one endpoint.
type Webhook struct {
	ep   Endpoint
	key  []byte
	post *httppost.Poster
	now  func() time.Time
}

var _ notify.Channel = (*Webhook)(nil)

// New checks the endpoint and returns its channel; it does no I/O. A URL
// that is not http(s), an empty or malformed secret and an unknown kind
// are refused.
func New(ep Endpoint, o Options) (*Webhook, error) {
	if strings.TrimSpace(ep.Name) == "" {
		return nil, errors.New("webhook: a webhook needs a name")
	}
	if err := httppost.CheckURL(ep.URL); err != nil {
		return nil, fmt.Errorf("webhook %s: %w", ep.Name, err)
	}
	key, err := Key(ep.Secret)
	if err != nil {
		return nil, fmt.Errorf("webhook %s: %w", ep.Name, err)
	}
	if err := notify.CheckKinds(ep.Types); err != nil {
		return nil, fmt.Errorf("webhook %s: types: %w", ep.Name, err)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Webhook{ep: ep, key: key, now: o.Now, post: httppost.New("webhook "+ep.Name, o.Client, httppost.Settings{
		Timeout: o.Timeout, BreakerFailures: o.BreakerFailures, BreakerOpenFor: o.BreakerOpenFor,
	})}, nil
}

// Name is "webhook:" + the endpoint's name, so a webhook and a chat
// channel may share a configured name.
func (w *Webhook) Name() string { return "webhook:" + w.ep.Name }

// Wants says whether the endpoint hears kind k.
func (w *Webhook) Wants(k notify.Kind) bool { return notify.WantsKind(w.ep.Types, k) }

// Send posts e, signed. The timestamp is taken at each attempt, so a
// retry an hour later is not refused as a replay; webhook-id is the
// event's id, the same on every attempt, for the receiver to deduplicate.
// A 2xx is delivered; a 410 wraps notify.ErrGone; a 429 is a
// notify.RetryAfterError; anything else an error naming the status.
func (w *Webhook) Send(ctx context.Context, e notify.Event) error {
	body, err := e.JSON()
	if err != nil {
		return fmt.Errorf("webhook %s: encode event %s: %w", w.ep.Name, e.ID, err)
	}
	ts := w.now().Unix()
	h := http.Header{}
	h.Set("Content-Type", ContentType)
	h.Set(HeaderID, e.ID)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	h.Set(HeaderSignature, Sign(w.key, e.ID, ts, body))
	h.Set("User-Agent", "changeflow-webhooks")
	return w.post.Post(ctx, w.ep.URL, h, body)
}

// Key is the HMAC key of a configured secret: the base64-decoded text
// after "whsec_", or the secret's own bytes otherwise. Empty is refused:
// an unsigned webhook cannot be told from a forged one.
func Key(secret string) ([]byte, error) {
	if secret == "" {
		return nil, errors.New("a webhook needs a secret to sign with")
	}
	b64, ok := strings.CutPrefix(secret, SecretPrefix)
	if !ok {
		return []byte(secret), nil
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(key) == 0 {
		return nil, errors.New(`the secret starts with "whsec_" but what follows is not base64`)
	}
	return key, nil
}

// Sign is the webhook-signature value for one delivery: "v1," and the
// base64 HMAC-SHA256 of "id.timestamp.body" under key.
func Sign(key []byte, id string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + strconv.FormatInt(ts, 10) + "."))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}
