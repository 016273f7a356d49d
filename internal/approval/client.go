package approval

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"

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
	out *outbound.Client[Settings]
}

var _ Service = (*Client)(nil)

// New returns a Client; it does no I/O.
func New(opts Options) *Client {
	return &Client{out: outbound.NewClient(outbound.Options[Settings]{
		Service: service, Settings: opts.Settings, Call: Settings.call, Timeout: 5 * time.Second,
		Transport: opts.Transport, IsSuccessful: healthyAnswer,
	})}
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

// do sends one request to the approval system; a 2xx answer is decoded
// into out, any other is an *Error with the system's status and message.
func (c *Client) do(ctx context.Context, op, method, path string, body []byte, out any) error {
	s := c.out.Settings()
	if s.BaseURL == "" {
		return &Error{Service: service, Op: op, Message: "approval.baseURL is not configured"}
	}
	return c.out.Do(ctx, s, outbound.Request{Op: op, Method: method, URL: outbound.JoinURL(s.BaseURL, path), Body: body, Out: out})
}

// healthyAnswer: a 4xx other than 429 is the system refusing this
// request, not failing, so it does not count against the breaker.
func healthyAnswer(err error) bool {
	return err == nil || outbound.HealthyAnswer(StatusOf(err))
}
