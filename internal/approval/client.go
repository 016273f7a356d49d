package approval

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"changeflow/internal/outbound"
)

// service names the approval system in errors.
const service = "approval"

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
	breaker  outbound.Breaker[struct{}]
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
	c := &Client{settings: settings, http: &http.Client{Transport: tr}}
	c.breaker.Name = service
	c.breaker.IsSuccessful = healthyAnswer
	return c
}

// Submit implements Service: 201 new, 200 the existing one for the
// operationId — both are success.
func (c *Client) Submit(ctx context.Context, f Form) (Approval, error) {
	body, err := json.Marshal(f)
	if err != nil {
		return Approval{}, &Error{Service: service, Op: "Submit", Message: err.Error(), Err: err}
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

// Withdraw implements Service. The call is idempotent upstream (a second
// withdraw answers the withdrawn approval), so a lost answer is simply
// sent again by the caller's retry.
func (c *Client) Withdraw(ctx context.Context, approvalID, comment string) (Approval, error) {
	body, err := json.Marshal(struct {
		Comment string `json:"comment,omitempty"`
	}{comment})
	if err != nil {
		return Approval{}, &Error{Service: service, Op: "Withdraw", Message: err.Error(), Err: err}
	}
	var out Approval
	err = c.do(ctx, "Withdraw", http.MethodPost, "v1/approvals/"+url.PathEscape(approvalID)+"/withdraw", body, &out)
	return out, err
}

func (c *Client) do(ctx context.Context, op, method, path string, body []byte, out any) error {
	cfg := c.settings()
	if cfg.BaseURL == "" {
		return &Error{Service: service, Op: op, Message: "approval.baseURL is not configured"}
	}
	s := cfg.call()
	u := strings.TrimSuffix(cfg.BaseURL, "/") + "/" + path
	_, err := c.breaker.Call(ctx, s, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, c.call(ctx, op, method, u, body, out)
	})
	if outbound.IsOpen(err) {
		return &Error{Service: service, Op: op, BreakerOpen: true, Message: "circuit open", Err: err}
	}
	return err
}

func (c *Client) call(ctx context.Context, op, method, u string, body []byte, out any) error {
	status, raw, err := outbound.Do(ctx, c.http, service, op, method, u, nil, body)
	if err != nil {
		return err
	}
	if status < 200 || status > 299 {
		e := &Error{Service: service, Op: op, Status: status, Message: http.StatusText(status)}
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
		return &Error{Service: service, Op: op, Status: status, Message: "unusable answer: " + err.Error(), Err: err}
	}
	return nil
}

// healthyAnswer: a 4xx other than 429 is the system refusing this
// request, not failing, so it does not count against the breaker.
func healthyAnswer(err error) bool {
	return err == nil || outbound.HealthyAnswer(StatusOf(err))
}
