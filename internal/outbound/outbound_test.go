package outbound_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"changeflow/internal/outbound"
)

func TestWithDefaultsClampsToFallbacks(t *testing.T) {
	for _, s := range []outbound.Settings{{}, {Timeout: -1, BreakerFailures: -3, BreakerOpenFor: -time.Second}} {
		got := s.WithDefaults(7 * time.Second)
		want := outbound.Settings{Timeout: 7 * time.Second, BreakerFailures: 5, BreakerOpenFor: 30 * time.Second}
		if got != want {
			t.Fatalf("%+v.WithDefaults = %+v, want %+v", s, got, want)
		}
	}
	set := outbound.Settings{Timeout: time.Second, BreakerFailures: 2, BreakerOpenFor: time.Minute}
	if got := set.WithDefaults(7 * time.Second); got != set {
		t.Fatalf("set values changed: %+v", got)
	}
}

var errDown = errors.New("down")

func settings(failures int) outbound.Settings {
	return outbound.Settings{Timeout: 5 * time.Second, BreakerFailures: failures, BreakerOpenFor: time.Hour}
}

func TestBreakerOpensAndFailsFastWithoutCalling(t *testing.T) {
	var b outbound.Breaker[int]
	var calls atomic.Int32
	fail := func(context.Context) (int, error) { calls.Add(1); return 0, errDown }
	for range 3 {
		if _, err := b.Call(context.Background(), settings(3), fail); !errors.Is(err, errDown) {
			t.Fatalf("closed breaker: want the call's error, got %v", err)
		}
	}
	_, err := b.Call(context.Background(), settings(3), fail)
	if !outbound.IsOpen(err) {
		t.Fatalf("want an open breaker after 3 failures, got %v", err)
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("an open breaker must not call: %d calls", n)
	}
}

func TestBreakerHealthyAnswersAndCancelDoNotCount(t *testing.T) {
	refused := &outbound.Error{Op: "x", Status: http.StatusUnauthorized}
	b := outbound.Breaker[int]{Name: "t", IsSuccessful: func(err error) bool {
		var e *outbound.Error
		return err == nil || errors.As(err, &e) && outbound.HealthyAnswer(e.Status)
	}}
	for range 5 {
		_, _ = b.Call(context.Background(), settings(1), func(context.Context) (int, error) { return 0, refused })
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 5 {
		_, _ = b.Call(ctx, settings(1), func(ctx context.Context) (int, error) { return 0, ctx.Err() })
	}
	n, err := b.Call(context.Background(), settings(1), func(context.Context) (int, error) { return 42, nil })
	if err != nil || n != 42 {
		t.Fatalf("refusals or a cancelled caller opened the breaker: %d %v", n, err)
	}
}

func TestBreakerCountsOwnDeadline(t *testing.T) {
	var b outbound.Breaker[int]
	s := outbound.Settings{Timeout: 10 * time.Millisecond, BreakerFailures: 1, BreakerOpenFor: time.Hour}
	_, err := b.Call(context.Background(), s, func(ctx context.Context) (int, error) {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("the call has no deadline")
		}
		<-ctx.Done()
		return 0, ctx.Err()
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want the deadline, got %v", err)
	}
	if _, err := b.Call(context.Background(), s, func(context.Context) (int, error) { return 0, nil }); !outbound.IsOpen(err) {
		t.Fatalf("our own deadline passing must count: %v", err)
	}
}

func TestBreakerRebuiltWhenSettingsChange(t *testing.T) {
	var b outbound.Breaker[int]
	fail := func(context.Context) (int, error) { return 0, errDown }
	_, _ = b.Call(context.Background(), settings(1), fail)
	if _, err := b.Call(context.Background(), settings(1), fail); !outbound.IsOpen(err) {
		t.Fatalf("want open: %v", err)
	}
	if _, err := b.Call(context.Background(), settings(2), func(context.Context) (int, error) { return 1, nil }); err != nil {
		t.Fatalf("a changed breaker.* must start closed: %v", err)
	}
}

func TestStatusClasses(t *testing.T) {
	for status, want := range map[int][2]bool{ // {healthy, transient}
		0: {false, true}, 400: {true, false}, 401: {true, false}, 404: {true, false},
		429: {false, true}, 500: {false, true}, 503: {false, true},
	} {
		if got := [2]bool{outbound.HealthyAnswer(status), outbound.TransientStatus(status)}; got != want {
			t.Errorf("status %d: healthy, transient = %v, want %v", status, got, want)
		}
	}
}

func TestErrorFormat(t *testing.T) {
	cause := errors.New("boom")
	for _, tc := range []struct {
		e    *outbound.Error
		want string
	}{
		{&outbound.Error{Service: "approval", Op: "Submit", Status: 503, Message: "down"}, "approval Submit: status 503: down"},
		{&outbound.Error{Service: "gitlab", Op: "Merge", Unknown: true, Message: "deadline exceeded", Err: context.DeadlineExceeded}, "gitlab Merge: no answer, outcome unknown: deadline exceeded: context deadline exceeded"},
		{&outbound.Error{Service: "approval", Op: "Get", BreakerOpen: true, Message: "circuit open"}, "approval Get: circuit open: circuit open"},
		{&outbound.Error{Op: "Get", Message: "boom", Err: cause}, "Get: no answer: boom"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
	if e := (&outbound.Error{Err: cause}); !errors.Is(e, cause) {
		t.Error("Unwrap does not expose the cause")
	}
}

func TestDo(t *testing.T) {
	var gotHeader http.Header
	var gotBody string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotHeader = r.Header.Clone()
		b, _ := io.ReadAll(r.Body)
		gotBody = string(b)
		if r.URL.Path == "/big" {
			_, _ = w.Write([]byte(strings.Repeat("x", outbound.MaxBody+10)))
			return
		}
		w.WriteHeader(http.StatusConflict)
		_, _ = w.Write([]byte(`{"message":"taken"}`))
	}))
	defer srv.Close()
	ctx := context.Background()

	status, raw, err := outbound.Do(ctx, srv.Client(), "svc", "Op", http.MethodPost, srv.URL+"/x", http.Header{"Private-Token": {"tok"}}, []byte(`{"a":1}`))
	if err != nil || status != http.StatusConflict || string(raw) != `{"message":"taken"}` {
		t.Fatalf("non-2xx comes back as is: %d %q %v", status, raw, err)
	}
	if gotBody != `{"a":1}` || gotHeader.Get("Content-Type") != "application/json" || gotHeader.Get("Accept") != "application/json" || gotHeader.Get("PRIVATE-TOKEN") != "tok" {
		t.Fatalf("request: body %q headers %v", gotBody, gotHeader)
	}
	if _, raw, err := outbound.Do(ctx, srv.Client(), "svc", "Op", http.MethodGet, srv.URL+"/big", nil, nil); err != nil || len(raw) != outbound.MaxBody {
		t.Fatalf("the answer is read up to MaxBody: %d %v", len(raw), err)
	}
	if gotHeader.Get("Content-Type") != "" {
		t.Fatalf("no body, no Content-Type: %v", gotHeader)
	}

	// Never connected: nothing was sent, so the outcome is known.
	closed := httptest.NewServer(http.NotFoundHandler())
	url := closed.URL
	closed.Close()
	_, _, err = outbound.Do(ctx, http.DefaultClient, "svc", "Op", http.MethodPost, url, nil, []byte(`{}`))
	var e *outbound.Error
	if !errors.As(err, &e) || e.Status != 0 || e.Unknown || e.Service != "svc" || e.Op != "Op" {
		t.Fatalf("dial failure: %#v", err)
	}

	// Sent, then the deadline passed: the outcome is unknown.
	// The handler reads the body (the server notices the client leaving
	// only after that) and is released when the test ends in any case.
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer hang.Close()
	defer close(release)
	dctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	_, _, err = outbound.Do(dctx, hang.Client(), "svc", "Op", http.MethodPost, hang.URL, nil, []byte(`{}`))
	if !errors.As(err, &e) || !e.Unknown || e.Message != "deadline exceeded" || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("deadline: %#v", err)
	}
}
