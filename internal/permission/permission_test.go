package permission_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"changeflow/internal/permission"
	simperm "changeflow/internal/sim/permission"
)

func newSim(t *testing.T) (*simperm.Server, string) {
	t.Helper()
	sim, err := simperm.New(simperm.Options{Grants: simperm.LocalGrants()})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(sim)
	t.Cleanup(func() { _ = sim.Close(); ts.Close() })
	return sim, ts.URL
}

func client(s permission.Settings) *permission.Client {
	return permission.New(permission.Options{Settings: func() permission.Settings { return s }})
}

func TestCheckAgainstTheLocalWorld(t *testing.T) {
	sim, url := newSim(t)
	c := client(permission.Settings{BaseURL: url + "/"})
	tests := []struct {
		subject string
		rules   []string
		want    []string
	}{
		{"olivia", []string{"ops.read", "admin"}, []string{"ops.read"}},
		{"olivia", []string{"ops.write", "admin"}, []string{"ops.write"}},
		{"adam", []string{"ops.write", "admin"}, []string{"admin"}},
		{"alice", []string{"ops.read", "admin"}, []string{}},
		{"bob", []string{"ops.write", "admin"}, []string{}},
		{"nobody", []string{"ops.read"}, []string{}},
	}
	for _, tt := range tests {
		got, err := c.Check(context.Background(), tt.subject, tt.rules)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("%s %v: got %v %v, want %v", tt.subject, tt.rules, got, err, tt.want)
		}
	}
	checks := sim.Checks()
	if len(checks) != len(tests) {
		t.Fatalf("one round trip per check: %d checks for %d calls", len(checks), len(tests))
	}
	if !slices.Equal(checks[0].RuleCodes, []string{"ops.read", "admin"}) {
		t.Fatalf("all rule codes go in the one call: %v", checks[0].RuleCodes)
	}
}

func TestEveryFailureIsAnError(t *testing.T) {
	answer := func(status int, body string) string {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(status)
			_, _ = w.Write([]byte(body))
		}))
		t.Cleanup(ts.Close)
		return ts.URL
	}
	tests := []struct {
		name string
		url  string
		want error
	}{
		{"base URL unset", "", permission.ErrNotConfigured},
		{"500", answer(500, `{"granted":["admin"]}`), permission.ErrBadAnswer},
		{"403 from the service", answer(403, `{}`), permission.ErrBadAnswer},
		{"malformed body", answer(200, `{"granted":`), permission.ErrBadAnswer},
		{"no granted list", answer(200, `{"subject":"adam"}`), permission.ErrBadAnswer},
		{"granted is not a list", answer(200, `{"granted":"admin"}`), permission.ErrBadAnswer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := client(permission.Settings{BaseURL: tt.url}).Check(context.Background(), "adam", []string{"admin"})
			if !errors.Is(err, tt.want) || got != nil {
				t.Fatalf("got %v %v, want %v", got, err, tt.want)
			}
		})
	}
	t.Run("connection refused", func(t *testing.T) {
		ts := httptest.NewServer(http.NotFoundHandler())
		url := ts.URL
		ts.Close()
		if _, err := client(permission.Settings{BaseURL: url}).Check(context.Background(), "adam", []string{"admin"}); err == nil {
			t.Fatal("want an error")
		}
	})
}

func TestGrantsNotAskedForAreIgnored(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"granted":["admin","ops.read","ops.read"]}`))
	}))
	t.Cleanup(ts.Close)
	got, err := client(permission.Settings{BaseURL: ts.URL}).Check(context.Background(), "x", []string{"ops.read"})
	if err != nil || !slices.Equal(got, []string{"ops.read"}) {
		t.Fatalf("got %v %v", got, err)
	}
}

func TestSlowServiceHitsTheDeadline(t *testing.T) {
	sim, url := newSim(t)
	if err := sim.SetFaults(simperm.Faults{SlowMs: 10_000}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := client(permission.Settings{BaseURL: url, Timeout: 100 * time.Millisecond}).Check(context.Background(), "adam", []string{"admin"})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 3*time.Second {
		t.Fatalf("err %v after %v", err, time.Since(start))
	}
}

func TestOpenBreakerFailsFastWithoutCalling(t *testing.T) {
	sim, url := newSim(t)
	if err := sim.SetFaults(simperm.Faults{ErrorStatus: 500, ErrorCount: 100}); err != nil {
		t.Fatal(err)
	}
	c := client(permission.Settings{BaseURL: url, BreakerFailures: 3, BreakerOpenFor: time.Hour})
	for range 3 {
		if _, err := c.Check(context.Background(), "adam", []string{"admin"}); !errors.Is(err, permission.ErrBadAnswer) {
			t.Fatalf("want the service's failure, got %v", err)
		}
	}
	calls := len(sim.Checks())
	if err := sim.SetFaults(simperm.Faults{}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Check(context.Background(), "adam", []string{"admin"})
	if !errors.Is(err, permission.ErrBreakerOpen) {
		t.Fatalf("want ErrBreakerOpen, got %v", err)
	}
	if n := len(sim.Checks()); n != calls {
		t.Fatalf("an open breaker must not call the service: %d calls after opening", n-calls)
	}
}

func TestCallerGoingAwayDoesNotOpenTheBreaker(t *testing.T) {
	sim, url := newSim(t)
	if err := sim.SetFaults(simperm.Faults{SlowMs: 10_000}); err != nil {
		t.Fatal(err)
	}
	c := client(permission.Settings{BaseURL: url, BreakerFailures: 1, BreakerOpenFor: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Check(ctx, "adam", []string{"admin"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	_ = sim.SetFaults(simperm.Faults{})
	if got, err := c.Check(context.Background(), "adam", []string{"admin"}); err != nil || len(got) != 1 {
		t.Fatalf("breaker opened on a cancelled caller: %v %v", got, err)
	}
}

// TestUnknownUsersRefusalsDoNotDenyOtherOperators performs the attack of
// issue 13 finding 7: a permission service that answers 404 (or another
// 4xx) for a subject it does not know, and a caller sending checks as such
// a subject. Before, five such answers opened the breaker and every
// operator was denied for its open interval; now each refusal denies that
// caller alone, and olivia's check still reaches the service.
func TestUnknownUsersRefusalsDoNotDenyOtherOperators(t *testing.T) {
	for _, status := range []int{404, 400, 401, 403, 422, 429} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			sim, simURL := newSim(t)
			known := simperm.LocalGrants()
			// The service in front of the simulator refuses subjects it does
			// not know, as a directory-backed permission service would.
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var in struct{ Subject string }
				body, _ := io.ReadAll(r.Body)
				_ = json.Unmarshal(body, &in)
				if _, ok := known[in.Subject]; !ok {
					w.WriteHeader(status)
					_, _ = w.Write([]byte(`{"message":"no such subject"}`))
					return
				}
				r2, _ := http.NewRequestWithContext(r.Context(), r.Method, simURL+r.URL.Path, bytes.NewReader(body))
				r2.Header = r.Header
				resp, err := http.DefaultClient.Do(r2)
				if err != nil {
					w.WriteHeader(502)
					return
				}
				defer resp.Body.Close()
				w.WriteHeader(resp.StatusCode)
				_, _ = io.Copy(w, resp.Body)
			}))
			t.Cleanup(ts.Close)
			c := client(permission.Settings{BaseURL: ts.URL, BreakerFailures: 5, BreakerOpenFor: time.Hour})
			for i := range 20 {
				_, err := c.Check(context.Background(), fmt.Sprintf("mallory-%d", i), []string{"ops.read"})
				var se *permission.StatusError
				if !errors.As(err, &se) || se.Status != status || !errors.Is(err, permission.ErrBadAnswer) {
					t.Fatalf("check %d for an unknown user: got %v, want the service's %d (a deny)", i, err, status)
				}
			}
			before := len(sim.Checks())
			got, err := c.Check(context.Background(), "olivia", []string{"ops.read"})
			if err != nil || !slices.Equal(got, []string{"ops.read"}) {
				t.Fatalf("olivia after 20 refusals for others: %v %v, want ops.read granted", got, err)
			}
			if len(sim.Checks()) != before+1 {
				t.Fatal("olivia's check did not reach the service")
			}
		})
	}
	t.Run("five 5xx still open the breaker", func(t *testing.T) {
		sim, url := newSim(t)
		if err := sim.SetFaults(simperm.Faults{ErrorStatus: 503, ErrorCount: 5}); err != nil {
			t.Fatal(err)
		}
		c := client(permission.Settings{BaseURL: url, BreakerFailures: 5, BreakerOpenFor: time.Hour})
		for range 5 {
			_, _ = c.Check(context.Background(), "mallory", []string{"ops.read"})
		}
		if _, err := c.Check(context.Background(), "olivia", []string{"ops.read"}); !errors.Is(err, permission.ErrBreakerOpen) {
			t.Fatalf("after five 503s: %v, want the breaker open", err)
		}
	})
	t.Run("timeouts still open the breaker", func(t *testing.T) {
		sim, url := newSim(t)
		if err := sim.SetFaults(simperm.Faults{TimeoutCount: 2}); err != nil {
			t.Fatal(err)
		}
		c := client(permission.Settings{BaseURL: url, BreakerFailures: 2, BreakerOpenFor: time.Hour, Timeout: 50 * time.Millisecond})
		for range 2 {
			if _, err := c.Check(context.Background(), "mallory", []string{"ops.read"}); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("want our deadline, got %v", err)
			}
		}
		if _, err := c.Check(context.Background(), "olivia", []string{"ops.read"}); !errors.Is(err, permission.ErrBreakerOpen) {
			t.Fatalf("after two timeouts: %v, want the breaker open", err)
		}
	})
}
