package outbound_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"changeflow/internal/config"
	"changeflow/internal/outbound"
)

// adapterSettings stands for an adapter's own settings type: a base URL
// next to the call settings.
type adapterSettings struct {
	BaseURL  string
	Timeout  time.Duration
	Failures int
}

func (s adapterSettings) call() outbound.Settings {
	return outbound.Settings{Timeout: s.Timeout, BreakerFailures: s.Failures, BreakerOpenFor: time.Hour}
}

func newClient(settings func() adapterSettings, o outbound.Options[adapterSettings]) *outbound.Client[adapterSettings] {
	o.Service, o.Settings, o.Call, o.Timeout = "svc", settings, adapterSettings.call, 7*time.Second
	return outbound.NewClient(o)
}

// deadlineOf runs one Call and reports how far away its deadline was.
func deadlineOf(t *testing.T, c *outbound.Client[adapterSettings], s adapterSettings) time.Duration {
	t.Helper()
	var left time.Duration
	err := c.Call(context.Background(), s, "Op", func(ctx context.Context) error {
		d, ok := ctx.Deadline()
		if !ok {
			return errors.New("no deadline")
		}
		left = time.Until(d)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return left
}

func TestClientTimeoutFallback(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		want    time.Duration
	}{
		{"unset means the client's fallback", 0, 7 * time.Second},
		{"negative means the client's fallback", -time.Second, 7 * time.Second},
		{"a set timeout is the deadline", 300 * time.Millisecond, 300 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(nil, outbound.Options[adapterSettings]{})
			s := adapterSettings{Timeout: tc.timeout}
			if got := c.CallSettings(s).Timeout; got != tc.want {
				t.Fatalf("CallSettings.Timeout = %v, want %v", got, tc.want)
			}
			if left := deadlineOf(t, c, s); left > tc.want || left < tc.want-time.Second/2 {
				t.Fatalf("the call's deadline is %v away, want about %v", left, tc.want)
			}
		})
	}
}

func TestClientBreakerRebuiltOnSettingsChange(t *testing.T) {
	var failures atomic.Int32
	failures.Store(1)
	settings := func() adapterSettings { return adapterSettings{Failures: int(failures.Load())} }
	c := newClient(settings, outbound.Options[adapterSettings]{})
	down := errors.New("down")
	var calls atomic.Int32
	call := func(err error) error {
		return c.Call(context.Background(), c.Settings(), "Op", func(context.Context) error { calls.Add(1); return err })
	}

	if err := call(down); !errors.Is(err, down) {
		t.Fatalf("closed breaker: want the call's error, got %v", err)
	}
	err := call(nil)
	if !outbound.IsBreakerOpen(err) || !outbound.IsOpen(err) || calls.Load() != 1 {
		t.Fatalf("one failure of 1 must open the breaker and fail fast: %v (%d calls)", err, calls.Load())
	}
	var e *outbound.Error
	if !errors.As(err, &e) || e.Service != "svc" || e.Op != "Op" || e.Status != 0 || e.Message != "circuit open" {
		t.Fatalf("open breaker error: %#v", err)
	}

	failures.Store(3) // a reload of breaker.failures
	if err := call(nil); err != nil {
		t.Fatalf("changed breaker settings must start closed: %v", err)
	}
	for range 2 {
		_ = call(down)
	}
	if err := call(nil); err != nil {
		t.Fatalf("the rebuilt breaker opens after 3 failures, not 2: %v", err)
	}
}

func TestClientAdaptsOpenBreaker(t *testing.T) {
	errMine := errors.New("mine: breaker open")
	c := newClient(func() adapterSettings { return adapterSettings{Failures: 1} }, outbound.Options[adapterSettings]{
		Adapt: func(e *outbound.Error) error {
			if e.BreakerOpen {
				return fmt.Errorf("%w: %w", errMine, e.Err)
			}
			return e
		},
	})
	_ = c.Call(context.Background(), c.Settings(), "Op", func(context.Context) error { return errors.New("down") })
	err := c.Call(context.Background(), c.Settings(), "Op", func(context.Context) error { return nil })
	if !errors.Is(err, errMine) || !outbound.IsOpen(err) {
		t.Fatalf("the open breaker must reach the caller as the adapter's error, still IsOpen: %v", err)
	}
}

// answering serves status with body on every path.
func answering(t *testing.T, status int, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestClientDoClassifiesByStatus(t *testing.T) {
	for _, tc := range []struct {
		name       string
		status     int
		body       string
		wantStatus int // 0: no error
		wantMsg    string
		transient  bool
		counted    bool // against a breaker that spares healthy answers
	}{
		{"2xx decoded", 200, `{"id":"a1"}`, 0, "", false, false},
		{"201 decoded", 201, `{"id":"a1"}`, 0, "", false, false},
		{"2xx that does not decode", 200, `not json`, 200, "unusable answer: invalid character 'o' in literal null (expecting 'u')", false, true},
		{"404 with a message", 404, `{"message":"no such approval"}`, 404, "no such approval", false, false},
		{"409 with an error field", 409, `{"error":"already decided"}`, 409, "already decided", false, false},
		{"message wins over error", 400, `{"message":"m","error":"e"}`, 400, "m", false, false},
		{"a body of another shape gives the status text", 401, `{"message":["a"]}`, 401, "Unauthorized", false, false},
		{"no body gives the status text", 403, ``, 403, "Forbidden", false, false},
		{"429 is transient and counted", 429, `{"message":"slow down"}`, 429, "slow down", true, true},
		{"5xx is transient and counted", 503, `upstream down`, 503, "Service Unavailable", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := answering(t, tc.status, tc.body)
			c := newClient(func() adapterSettings { return adapterSettings{BaseURL: url, Failures: 1} }, outbound.Options[adapterSettings]{
				IsSuccessful: func(err error) bool { return err == nil || outbound.HealthyAnswer(outbound.StatusOf(err)) },
			})
			s := c.Settings()
			var out struct{ ID string }
			err := c.Do(context.Background(), s, outbound.Request{Op: "Get", Method: http.MethodGet, URL: outbound.JoinURL(s.BaseURL, "v1/x"), Out: &out})
			if tc.wantStatus == 0 {
				if err != nil || out.ID != "a1" {
					t.Fatalf("want the answer decoded, got %+v %v", out, err)
				}
			} else {
				var e *outbound.Error
				if !errors.As(err, &e) || e.Status != tc.wantStatus || e.Message != tc.wantMsg || e.Service != "svc" || e.Op != "Get" {
					t.Fatalf("want status %d %q, got %#v", tc.wantStatus, tc.wantMsg, err)
				}
				if outbound.StatusOf(err) != tc.wantStatus || outbound.IsTransient(err) != tc.transient || outbound.OutcomeUnknown(err) {
					t.Fatalf("StatusOf %d, IsTransient %v, OutcomeUnknown %v", outbound.StatusOf(err), outbound.IsTransient(err), outbound.OutcomeUnknown(err))
				}
			}
			next := c.Call(context.Background(), s, "Next", func(context.Context) error { return nil })
			if outbound.IsBreakerOpen(next) != tc.counted {
				t.Fatalf("counted against the breaker = %v, want %v", outbound.IsBreakerOpen(next), tc.counted)
			}
		})
	}
}

func TestClientDoCustomAnswerAndAdapt(t *testing.T) {
	errRefused := errors.New("refused")
	url := answering(t, 201, `{}`)
	c := newClient(func() adapterSettings { return adapterSettings{BaseURL: url} }, outbound.Options[adapterSettings]{
		Adapt: func(e *outbound.Error) error { return fmt.Errorf("adapted: %w", e) },
	})
	var seen int
	err := c.Do(context.Background(), c.Settings(), outbound.Request{Op: "Check", Method: http.MethodPost, URL: url, Body: []byte(`{}`),
		Answer: func(status int, raw []byte) error {
			seen = status
			if status != http.StatusOK {
				return errRefused // the adapter's own error passes as it is
			}
			return nil
		}})
	if seen != 201 || !errors.Is(err, errRefused) || err.Error() != "refused" {
		t.Fatalf("a custom answer decides alone: seen %d, err %v", seen, err)
	}

	// No answer: the transport failure is this package's *Error, adapted.
	closed := httptest.NewServer(http.NotFoundHandler())
	gone := closed.URL
	closed.Close()
	err = c.Do(context.Background(), c.Settings(), outbound.Request{Op: "Check", Method: http.MethodPost, URL: gone, Body: []byte(`{}`)})
	var e *outbound.Error
	if !errors.As(err, &e) || e.Status != 0 || e.Unknown || !strings.HasPrefix(err.Error(), "adapted: svc Check: no answer") {
		t.Fatalf("a dial failure, adapted: %v", err)
	}
}

func TestClientRoundTripper(t *testing.T) {
	var status atomic.Int32
	status.Store(http.StatusServiceUnavailable)
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(int(status.Load()))
		_, _ = io.WriteString(w, "body")
	}))
	defer srv.Close()
	// The inner transport sees the request with the call's deadline.
	inner := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if d, ok := r.Context().Deadline(); !ok || time.Until(d) > 7*time.Second {
			t.Errorf("the request carries no deadline of the client's 7s fallback: %v %v", d, ok)
		}
		return http.DefaultTransport.RoundTrip(r)
	})
	c := newClient(func() adapterSettings { return adapterSettings{Failures: 2} }, outbound.Options[adapterSettings]{Transport: inner})
	hc := &http.Client{Transport: c.RoundTripper()}
	get := func() (*http.Response, error) {
		resp, err := hc.Get(srv.URL)
		if err == nil {
			_, _ = io.ReadAll(resp.Body)
			_ = resp.Body.Close()
		}
		return resp, err
	}

	// A 5xx is handed on (the caller reads its status) and counted.
	for range 2 {
		resp, err := get()
		if err != nil || resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("want the 503 answer, got %v %v", resp, err)
		}
	}
	_, err := get()
	if !outbound.IsOpen(err) || hits.Load() != 2 {
		t.Fatalf("two 5xx of 2 must open the breaker without a third request: %v (%d hits)", err, hits.Load())
	}
	if !strings.Contains(err.Error(), "svc: circuit breaker is open") {
		t.Fatalf("a refusal names the dependency: %q", err)
	}

	// A 4xx is a healthy answer: it does not count.
	c2 := newClient(func() adapterSettings { return adapterSettings{Failures: 1} }, outbound.Options[adapterSettings]{})
	hc = &http.Client{Transport: c2.RoundTripper()}
	status.Store(http.StatusNotFound)
	for range 3 {
		if resp, err := get(); err != nil || resp.StatusCode != http.StatusNotFound {
			t.Fatalf("a 404 must pass and not open the breaker: %v %v", resp, err)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestEndpointFromConfig(t *testing.T) {
	file := filepath.Join(t.TempDir(), "changeflow.yaml")
	y := "approval:\n  baseURL: http://approval.example/approval/\nhttp:\n  timeout:\n    approval: 3s\nbreaker:\n  failures: 7\n  openFor: 45s\n"
	if err := os.WriteFile(file, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := config.Load(context.Background(), config.Options{File: file})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	snap := m.Current()
	for _, tc := range []struct {
		dependency string
		want       outbound.Endpoint
	}{
		{"approval", outbound.Endpoint{BaseURL: "http://approval.example/approval/", Timeout: 3 * time.Second, BreakerFailures: 7, BreakerOpenFor: 45 * time.Second}},
		// No http.timeout.permission: the configuration's own default.
		{"permission", outbound.Endpoint{BaseURL: "b", Timeout: 2 * time.Second, BreakerFailures: 7, BreakerOpenFor: 45 * time.Second}},
	} {
		base := tc.want.BaseURL
		got := outbound.EndpointFromConfig(snap, tc.dependency, base)
		if got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.dependency, got, tc.want)
		}
		if c := got.Call(); c.Timeout != got.Timeout || c.BreakerFailures != 7 || c.BreakerOpenFor != 45*time.Second {
			t.Errorf("%s: Call() = %+v", tc.dependency, c)
		}
	}
}
