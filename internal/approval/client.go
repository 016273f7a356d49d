package approval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/sony/gobreaker/v2"
)

// maxBody bounds what is read of an answer.
const maxBody = 1 << 20

// Options configures a Client.
type Options struct {
	// Settings is called on every call; nil means not configured.
	Settings func() Settings
	// Transport is the HTTP transport (default http.DefaultTransport).
	Transport http.RoundTripper
}

// Client is the HTTP adapter of Service.
type Client struct {
	settings func() Settings
	http     *http.Client

	mu  sync.Mutex
	cb  *gobreaker.CircuitBreaker[struct{}]
	cfg Settings
}

var _ Service = (*Client)(nil)

// New returns a Client; it does no I/O.
func New(opts Options) *Client {
	settings := opts.Settings
	if settings == nil {
		settings = func() Settings { return Settings{} }
	}
	tr := opts.Transport
	if tr == nil {
		tr = http.DefaultTransport
	}
	// Plain net/http: it never replays a POST on its own (only idempotent
	// requests on a reused connection), so a submit is sent once per call.
	return &Client{settings: settings, http: &http.Client{Transport: tr}}
}

// Submit implements Service: 201 new, 200 the existing one for the
// operationId — both are success.
func (c *Client) Submit(ctx context.Context, f Form) (Approval, error) {
	body, err := json.Marshal(f)
	if err != nil {
		return Approval{}, &Error{Op: "Submit", Message: err.Error(), Err: err}
	}
	var out Approval
	err = c.do(ctx, "Submit", http.MethodPost, "v1/approvals", body, &out)
	return out, err
}

// FindByOperationID implements Service.
func (c *Client) FindByOperationID(ctx context.Context, opID string) (Approval, bool, error) {
	var out struct {
		Items []Approval `json:"items"`
	}
	if err := c.do(ctx, "FindByOperationID", http.MethodGet, "v1/approvals?operationId="+url.QueryEscape(opID), nil, &out); err != nil {
		return Approval{}, false, err
	}
	for _, a := range out.Items {
		if a.OperationID == opID {
			return a, true, nil
		}
	}
	return Approval{}, false, nil
}

// Get implements Service.
func (c *Client) Get(ctx context.Context, approvalID string) (Approval, error) {
	var out Approval
	err := c.do(ctx, "Get", http.MethodGet, "v1/approvals/"+url.PathEscape(approvalID), nil, &out)
	return out, err
}

func (c *Client) do(ctx context.Context, op, method, path string, body []byte, out any) error {
	s := c.settings().withDefaults()
	if s.BaseURL == "" {
		return &Error{Op: op, Message: "approval.baseURL is not configured"}
	}
	u := strings.TrimSuffix(s.BaseURL, "/") + "/" + path
	_, err := c.breaker(s).Execute(func() (struct{}, error) {
		ctx, cancel := context.WithTimeout(ctx, s.Timeout)
		defer cancel()
		return struct{}{}, c.call(ctx, op, method, u, body, out)
	})
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		return &Error{Op: op, BreakerOpen: true, Message: "circuit open", Err: err}
	}
	return err
}

func (c *Client) call(ctx context.Context, op, method, u string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return &Error{Op: op, Message: err.Error(), Err: err}
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		e := &Error{Op: op, Message: err.Error(), Err: err, Unknown: true}
		var dial *net.OpError
		if errors.As(err, &dial) && dial.Op == "dial" {
			e.Unknown = false // never connected: nothing was sent
		}
		if errors.Is(err, context.DeadlineExceeded) {
			e.Message = "deadline exceeded"
		}
		return e
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return &Error{Op: op, Status: resp.StatusCode, Message: "reading answer: " + err.Error(), Err: err}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		e := &Error{Op: op, Status: resp.StatusCode, Message: http.StatusText(resp.StatusCode)}
		var b struct {
			Message string `json:"message"`
			Error   string `json:"error"`
		}
		if json.Unmarshal(raw, &b) == nil {
			if b.Message != "" {
				e.Message = b.Message
			} else if b.Error != "" {
				e.Message = b.Error
			}
		}
		return e
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return &Error{Op: op, Status: resp.StatusCode, Message: "unusable answer: " + err.Error(), Err: err}
	}
	return nil
}

// healthyAnswer: a 4xx other than 429 is the system refusing this
// request, not failing, so it does not count against the breaker.
func healthyAnswer(err error) bool {
	if err == nil {
		return true
	}
	s := StatusOf(err)
	return s >= 400 && s < 500 && s != http.StatusTooManyRequests
}

// breaker returns the breaker for s, rebuilt when breaker.* changed.
func (c *Client) breaker(s Settings) *gobreaker.CircuitBreaker[struct{}] {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cb == nil || c.cfg.BreakerFailures != s.BreakerFailures || c.cfg.BreakerOpenFor != s.BreakerOpenFor {
		failures := uint32(s.BreakerFailures)
		c.cb = gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{
			Name:         "approval",
			Timeout:      s.BreakerOpenFor,
			ReadyToTrip:  func(n gobreaker.Counts) bool { return n.ConsecutiveFailures >= failures },
			IsSuccessful: healthyAnswer,
			IsExcluded:   func(err error) bool { return errors.Is(err, context.Canceled) },
		})
		c.cfg = s
	}
	return c.cb
}
