package gitlab

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"
	"golang.org/x/time/rate"

	"changeflow/internal/outbound"
)

// Options configures a Client.
type Options struct {
	// Settings is called on every call; nil means nothing is configured.
	Settings func() Settings
	// Transport is the HTTP transport (default http.DefaultTransport).
	Transport http.RoundTripper
	// Logger; nil discards.
	Logger *slog.Logger
	// BreakerName names this client's circuit breaker; "" means "gitlab".
	// Each Client has its own breaker: a second Client (the preview's) can
	// fail, or be made to fail, without opening the first one's.
	BreakerName string
	// Pacer is the instance's pace towards GitLab (pacing.go); clients of
	// one instance share it. nil gives this client its own.
	Pacer *Pacer
	// OnRateLimited is told of every 429 (LimitedByGitLab) and of every
	// call its own pace refused (LimitedByPace); nil ignores them.
	OnRateLimited func(kind string)
}

// Client is the adapter: GitLab and CheckItemsAPI over the official client
// library (and plain net/http for the check-items extension). One
// client-library client per bot token, one breaker for GitLab.
type Client struct {
	// out is the plumbing: settings, deadline, the one breaker of this
	// client, and plain HTTP for the direct calls.
	out    *outbound.Client[Settings]
	logger *slog.Logger
	// pacer paces every call and onRateLimited counts the 429s
	// (pacing.go).
	pacer         *Pacer
	onRateLimited func(kind string)

	// pipelinesPerPage and maxPipelinePages override ListMRPipelines'
	// paging (tests set them small to cross pages and reach the bound);
	// 0 means the constants.
	pipelinesPerPage, maxPipelinePages int
	// openMRsPerPage and maxOpenMRPages do the same for ListOpenMRs.
	openMRsPerPage, maxOpenMRPages int

	mu      sync.Mutex
	clients map[clientKey]*gl.Client
	// users caches CurrentUser per base URL and token: a token's account
	// does not change, and the head check asks for it before every
	// approval and merge. A new token (a reload) is a new key.
	users map[clientKey]User
}

type clientKey struct{ base, token string }

var (
	_ GitLab        = (*Client)(nil)
	_ CheckItemsAPI = (*Client)(nil)
)

// New returns a Client; it does no I/O.
func New(opts Options) *Client {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	transport := opts.Transport
	if transport == nil {
		transport = http.DefaultTransport
	}
	out := outbound.NewClient(outbound.Options[Settings]{
		Service: "gitlab", BreakerName: opts.BreakerName, Settings: opts.Settings, Call: Settings.call, Timeout: 10 * time.Second,
		Transport: noteTransport{next: transport}, IsSuccessful: healthyAnswer, IsExcluded: breakerExcluded,
		Adapt: func(e *outbound.Error) error { return fromOutbound(e) },
	})
	pacer := opts.Pacer
	if pacer == nil {
		pacer = NewPacer()
	}
	return &Client{out: out, logger: logger, pacer: pacer, onRateLimited: opts.OnRateLimited,
		clients: map[clientKey]*gl.Client{}, users: map[clientKey]User{}}
}

// healthyAnswer says err is an answer from a working GitLab: any 4xx but
// 429 is GitLab refusing this request, not GitLab failing, so it must not
// open the breaker (a run of 401s from duplicate approvals would otherwise
// cut the service off from a healthy GitLab).
func healthyAnswer(err error) bool {
	return err == nil || outbound.HealthyAnswer(StatusOf(err))
}

// lib returns the client-library client for bot under s.
//
// Retries are off (WithoutRetries, and RetryMax 0 for good measure):
// client-go's default policy retries every method, POST included, on 429
// and 5xx (retryHTTPCheck in gitlab.go of v1.46.0), so a create whose
// answer was a 502 after it was applied would run twice. We retry in our
// own code, after reading remote state. The library's rate limiter, which
// would make a call wait on its own clock, is replaced by an unlimited
// one: waiting is the workflow's decision, and every call has a deadline.
func (c *Client) lib(s Settings, op string, bot Bot) (*gl.Client, error) {
	if s.BaseURL == "" {
		return nil, &Error{Op: op, Message: "gitlab.baseURL is not configured"}
	}
	token := s.Tokens.token(bot)
	if token == "" {
		return nil, &Error{Op: op, Message: fmt.Sprintf("no token for bot %q (gitlab.tokens.%s)", bot, bot)}
	}
	key := clientKey{s.apiBase(), token}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.clients[key]; ok {
		return cl, nil
	}
	cl, err := gl.NewClient(token,
		gl.WithBaseURL(key.base),
		gl.WithHTTPClient(&http.Client{Transport: c.out.HTTP().Transport}),
		gl.WithoutRetries(),
		gl.WithCustomRetryMax(0),
		gl.WithCustomLimiter(rate.NewLimiter(rate.Inf, 0)),
	)
	if err != nil {
		return nil, &Error{Op: op, Message: "client: " + err.Error(), Err: err}
	}
	c.clients[key] = cl
	return cl, nil
}

// call runs fn as bot with the deadline, through the breaker, in this
// instance's pace (waiting out GitLab's 429s: paced), and translates its
// failure.
func (c *Client) call(ctx context.Context, op string, bot Bot, fn func(ctx context.Context, cl *gl.Client) (*gl.Response, error)) error {
	return c.callPaced(ctx, op, bot, "", fn)
}

// callPaced is call for a call that starts a pipeline in project (a commit,
// opening an MR, a rebase, a pipeline retry or creation): it also waits
// for the project's turn under gitlab.rateLimit.pipelinesPerMinute.
// project "" is an ordinary call.
func (c *Client) callPaced(ctx context.Context, op string, bot Bot, project string, fn func(ctx context.Context, cl *gl.Client) (*gl.Response, error)) error {
	s := c.out.Settings()
	cl, err := c.lib(s, op, bot)
	if err != nil {
		return err
	}
	return c.paced(ctx, s, op, project, project != "", func(ctx context.Context) error {
		return c.out.Call(ctx, s, op, func(ctx context.Context) error {
			resp, err := fn(ctx, cl)
			if err != nil {
				return translate(op, resp, err)
			}
			return nil
		})
	})
}

// translate turns a client-library failure into a *Error with the real
// status. A 404 comes back as the gl.ErrNotFound sentinel without a body;
// the response still has the status.
func translate(op string, resp *gl.Response, err error) *Error {
	var er *gl.ErrorResponse
	switch {
	case errors.As(err, &er) && er.Response != nil:
		return &Error{Op: op, Status: er.Response.StatusCode, Message: er.Message, Err: err}
	case resp != nil && resp.Response != nil && resp.StatusCode >= 300:
		return &Error{Op: op, Status: resp.StatusCode, Message: err.Error(), Err: err}
	case errors.Is(err, gl.ErrNotFound):
		return &Error{Op: op, Status: http.StatusNotFound, Message: "404 Not Found", Err: err}
	}
	return transportError(op, err)
}

// transportError is a failure without an answer (outbound.TransportError):
// an unknown outcome unless the connection was never made.
func transportError(op string, err error) *Error {
	return fromOutbound(outbound.TransportError("gitlab", op, err))
}
