// Package httppost is the one POST the HTTP channels (webhooks, chat)
// make: through the destination's own circuit breaker (internal/outbound)
// with a deadline, and judged the way the notify.Channel contract wants —
// a 2xx is delivered, a 410 is notify.ErrGone, a 429 a
// notify.RetryAfterError, anything else an error naming the status.
package httppost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"changeflow/internal/notify"
	"changeflow/internal/outbound"
)

// DefaultTimeout bounds one delivery when the channel names none: a
// receiver is expected to answer quickly and work on the event later.
const DefaultTimeout = 10 * time.Second

// snippetMax bounds how much of an answer's body an error quotes: enough
// to recognise the receiver's message, too little to carry a page of its
// data into our logs and the console.
const snippetMax = 200

// Settings are one destination's call settings.
type Settings struct {
	// Timeout bounds one delivery; ≤ 0 means DefaultTimeout.
	Timeout time.Duration
	// BreakerFailures consecutive failures (≤ 0 means 5) open the
	// destination's breaker for BreakerOpenFor (≤ 0 means 30s).
	BreakerFailures int
	BreakerOpenFor  time.Duration
}

// Poster posts to one destination. It is safe for concurrent use.
type Poster struct {
	service string
	client  *http.Client
	call    outbound.Settings
	breaker outbound.Breaker[struct{}]
}

// New returns a Poster for the destination named service (e.g. "webhook
// ops": it names the breaker and every error). client nil means a plain
// client over http.DefaultTransport. Redirects are never followed: a POST
// turned into a GET by a 302 would be lost, so a 3xx is reported as what
// it is.
func New(service string, client *http.Client, s Settings) *Poster {
	var c http.Client
	if client != nil {
		c = *client
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	p := &Poster{service: service, client: &c, call: outbound.Settings{
		Timeout: s.Timeout, BreakerFailures: s.BreakerFailures, BreakerOpenFor: s.BreakerOpenFor,
	}.WithDefaults(DefaultTimeout)}
	p.breaker.Name = service
	// A refusal (4xx but 429, 410 included) comes from a receiver that is
	// up; a 429 asks us to slow down and counts neither way. Only no
	// answer, a 5xx or a 3xx opens the breaker.
	p.breaker.IsSuccessful = func(err error) bool { return err == nil || outbound.HealthyAnswer(outbound.StatusOf(err)) }
	p.breaker.IsExcluded = func(err error) bool { _, ok := notify.RetryAfter(err); return ok }
	return p
}

// Post sends body with header (Content-Type among them) to target and
// judges the answer. An open breaker fails at once without a request.
func (p *Poster) Post(ctx context.Context, target string, header http.Header, body []byte) error {
	_, err := p.breaker.Call(ctx, p.call, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, p.post(ctx, target, header, body)
	})
	if outbound.IsOpen(err) {
		return &outbound.Error{Service: p.service, Op: "Send", BreakerOpen: true, Err: err}
	}
	return err
}

func (p *Poster) post(ctx context.Context, target string, header http.Header, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		// The URL was checked at construction; say nothing of it here, it
		// may carry a token (a chat incoming webhook's path is its secret).
		return &outbound.Error{Service: p.service, Op: "Send", Message: "cannot build the request"}
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return outbound.TransportError(p.service, "Send", withoutURL(err))
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	// Drain a little more so the connection can be reused; a receiver
	// answering megabytes is cut off.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return p.judge(resp, raw)
}

// judge turns an answer into the contract's error.
func (p *Poster) judge(resp *http.Response, raw []byte) error {
	status := resp.StatusCode
	if outbound.Success(status) {
		return nil
	}
	e := &outbound.Error{Service: p.service, Op: "Send", Status: status, Message: http.StatusText(status)}
	if s := Snippet(raw); s != "" {
		e.Message += ": " + s
	}
	switch status {
	case http.StatusGone:
		return fmt.Errorf("%w: %w", notify.ErrGone, e)
	case http.StatusTooManyRequests:
		return &notify.RetryAfterError{After: retryAfter(resp.Header.Get("Retry-After"), time.Now()), Err: e}
	}
	return e
}

// withoutURL drops the URL a *url.Error names (net/http puts the whole
// target in it), keeping its cause: the URL of a chat webhook is its
// secret, and errors end in logs and the console.
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", strings.ToLower(ue.Op), ue.Err)
	}
	return err
}

// retryAfter reads a Retry-After value: delay seconds or an HTTP date; 0
// when absent or unreadable. It is capped at an hour so a confused
// receiver cannot park an event for a day.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if n, err := strconv.Atoi(v); err == nil {
		d = time.Duration(max(n, 0)) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = max(t.Sub(now), 0)
	}
	return min(d, time.Hour)
}

// Snippet is at most snippetMax bytes of an answer's body on one line:
// control characters and invalid UTF-8 become spaces, runs of white space
// one, and a clipped body ends in "…".
func Snippet(raw []byte) string {
	var b strings.Builder
	space := false
	for i := 0; i < len(raw) && b.Len() < snippetMax; {
		r, n := utf8.DecodeRune(raw[i:])
		i += n
		if r == utf8.RuneError || unicode.IsSpace(r) || unicode.IsControl(r) {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
		if b.Len() >= snippetMax && i < len(raw) {
			b.WriteString("…")
		}
	}
	return b.String()
}

// CheckURL refuses a destination URL that is not absolute http(s) with a
// host, at construction, so a typo is an error at start rather than a
// dead letter later. The error names the scheme, never the URL (it may
// carry a token).
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("the URL does not parse")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("the URL's scheme is %q; only http and https are supported", u.Scheme)
	}
	if u.Host == "" {
		return errors.New("the URL has no host")
	}
	return nil
}
