// Package chat is the chat channel: one line per event, with its link,
// posted to a Slack or Mattermost incoming webhook as {"text": "…"}
// (Mattermost takes Slack's payload and link syntax as they are;
// docs/notifications.md, "Chat").
package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"changeflow/internal/notify"
	"changeflow/internal/notify/internal/httppost"
)

// Endpoint is one configured incoming webhook (notify.chat[]).
type Endpoint struct {
	// Name is unique among the chat channels; the channel is named
	// "chat:"+Name.
	Name string
	// URL is the incoming webhook's URL. It is its credential (whoever
	// has it posts to the channel), so no error or log repeats it.
	URL string
	// Types are the kinds the channel hears; empty means all.
	Types []notify.Kind
}

// Options are the call settings of an endpoint, as for webhooks.
type Options struct {
	// Client sends the requests (nil: a plain client); redirects are
	// never followed.
	Client *http.Client
	// Timeout bounds one post (≤ 0: 10 s).
	Timeout time.Duration
	// BreakerFailures consecutive failures (≤ 0: 5) open the endpoint's
	// breaker for BreakerOpenFor (≤ 0: 30 s).
	BreakerFailures int
	BreakerOpenFor  time.Duration
}

// Chat is the channel of one incoming webhook.
type Chat struct {
	ep   Endpoint
	post *httppost.Poster
}

var _ notify.Channel = (*Chat)(nil)

// New checks the endpoint and returns its channel; it does no I/O.
func New(ep Endpoint, o Options) (*Chat, error) {
	if strings.TrimSpace(ep.Name) == "" {
		return nil, errors.New("chat: a chat channel needs a name")
	}
	if err := httppost.CheckURL(ep.URL); err != nil {
		return nil, fmt.Errorf("chat %s: %w", ep.Name, err)
	}
	if err := notify.CheckKinds(ep.Types); err != nil {
		return nil, fmt.Errorf("chat %s: types: %w", ep.Name, err)
	}
	return &Chat{ep: ep, post: httppost.New("chat "+ep.Name, o.Client, httppost.Settings{
		Timeout: o.Timeout, BreakerFailures: o.BreakerFailures, BreakerOpenFor: o.BreakerOpenFor,
	})}, nil
}

// Name is "chat:" + the endpoint's name.
func (c *Chat) Name() string { return "chat:" + c.ep.Name }

// Wants says whether the channel hears kind k.
func (c *Chat) Wants(k notify.Kind) bool { return notify.WantsKind(c.ep.Types, k) }

// Send posts e's line. The answers mean what they mean for a webhook: a
// 2xx is delivered, a 410 (a deleted incoming webhook) wraps
// notify.ErrGone, a 429 is a notify.RetryAfterError, anything else an
// error naming the status.
func (c *Chat) Send(ctx context.Context, e notify.Event) error {
	body, err := json.Marshal(Payload{Text: Line(e)})
	if err != nil {
		return fmt.Errorf("chat %s: encode: %w", c.ep.Name, err)
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "changeflow-chat")
	return c.post.Post(ctx, c.ep.URL, h, body)
}

// Payload is an incoming webhook's body, the part Slack and Mattermost
// share.
type Payload struct {
	Text string `json:"text"`
}

// Line is the event as one line of chat text: its summary, escaped as
// Slack asks (&, < and > as entities, which Mattermost's Markdown shows
// as the characters), then its link in Slack's <url|label> form, which
// Mattermost translates. An expiry reminder links its one-click renewal.
func Line(e notify.Event) string {
	text := escape(strings.Join(strings.Fields(e.Data.Summary), " "))
	if text == "" {
		text = escape(e.Type)
	}
	if link, label := linkOf(e.Data); link != "" {
		text += " <" + escape(link) + "|" + label + ">"
	}
	return text
}

func linkOf(d notify.Data) (link, label string) {
	if d.Kind == notify.KindAccessExpiring && d.RenewLink != "" {
		return d.RenewLink, "Renew"
	}
	if d.Link != "" {
		return d.Link, "Open in changeflow"
	}
	return "", ""
}

// escape is Slack's escaping of the three characters it gives a meaning,
// so no text of an event can make a mention (<!channel>) or a link.
var escape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace
