package webhook_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"changeflow/internal/notify"
	"changeflow/internal/notify/webhook"
	"changeflow/internal/outbound"
	"changeflow/internal/sim/hooks"
)

// whsecSecret is a Standard Webhooks secret: "whsec_" + base64 of the key.
const whsecSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func event(id string) notify.Event {
	until := time.Date(2026, 12, 31, 18, 0, 0, 0, time.UTC)
	return notify.Event{
		SpecVersion: notify.SpecVersion, ID: id, Source: "https://changeflow.example", Type: notify.KindRequestInEffect.Type(),
		Subject: "op-1", Time: time.Date(2026, 12, 4, 5, 0, 0, 0, time.UTC), DataContentType: "application/json",
		Data: notify.Data{Kind: notify.KindRequestInEffect, Summary: "Access of alice to billing-dashboard is in effect.",
			OperationID: "op-1", Requester: "alice", Subject: "alice", TargetKey: "billing-dashboard", Until: &until,
			Link: "https://changeflow.example/requests/op-1"},
	}
}

func newHook(t *testing.T, url, secret string, o webhook.Options) *webhook.Webhook {
	t.Helper()
	w, err := webhook.New(webhook.Endpoint{Name: "ops", URL: url, Secret: secret}, o)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// independentVerify is a third reading of the Standard Webhooks scheme,
// neither the sender's nor the simulator's: HMAC-SHA256 over
// "id.timestamp.body", base64, after "v1,"; a whsec_ key is base64.
func independentVerify(t *testing.T, secret string, h http.Header, body []byte) {
	t.Helper()
	key := []byte(secret)
	if strings.HasPrefix(secret, "whsec_") {
		var err error
		if key, err = base64.StdEncoding.DecodeString(secret[len("whsec_"):]); err != nil {
			t.Fatal(err)
		}
	}
	signed := h.Get("Webhook-Id") + "." + h.Get("Webhook-Timestamp") + "." + string(body)
	m := hmac.New(sha256.New, key)
	m.Write([]byte(signed))
	want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
	if got := h.Get("Webhook-Signature"); got != want {
		t.Fatalf("signature %q, independent computation %q", got, want)
	}
}

// TestSignedDeliveryVerifiedByTheReceiverAndAThirdImplementation: the
// event arrives as CloudEvents structured JSON with the Standard
// Webhooks headers; the simulator's receiver verifies it and so does an
// implementation written in this test.
func TestSignedDeliveryVerifiedByTheReceiverAndAThirdImplementation(t *testing.T) {
	for _, secret := range []string{whsecSecret, "a plain shared secret"} {
		t.Run(secret, func(t *testing.T) {
			recv, err := hooks.New(hooks.Options{Receivers: map[string]string{"ops": secret}})
			if err != nil {
				t.Fatal(err)
			}
			var gotHeader http.Header
			var gotBody []byte
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				gotHeader = r.Header.Clone()
				gotBody, _ = io.ReadAll(r.Body)
				r.Body = io.NopCloser(strings.NewReader(string(gotBody)))
				http.StripPrefix("/hooks", recv).ServeHTTP(w, r)
			}))
			defer srv.Close()
			now := time.Now()
			w := newHook(t, srv.URL+"/hooks/ops", secret, webhook.Options{Now: func() time.Time { return now }})
			e := event("evt-1")
			if err := w.Send(context.Background(), e); err != nil {
				t.Fatal(err)
			}
			independentVerify(t, secret, gotHeader, gotBody)
			if ct := gotHeader.Get("Content-Type"); ct != "application/cloudevents+json" {
				t.Errorf("content type %q", ct)
			}
			if gotHeader.Get("Webhook-Id") != "evt-1" || gotHeader.Get("Webhook-Timestamp") != strconv.FormatInt(now.Unix(), 10) {
				t.Errorf("headers %v", gotHeader)
			}
			var back notify.Event
			if err := json.Unmarshal(gotBody, &back); err != nil || back.ID != "evt-1" || back.SpecVersion != "1.0" ||
				back.Type != "dev.changeflow.request.in_effect" || back.Data.Link != e.Data.Link {
				t.Fatalf("body %s (%v)", gotBody, err)
			}
			ds := recv.Deliveries()
			if len(ds) != 1 || !ds[0].Verified || ds[0].ID != "evt-1" || ds[0].Type != e.Type || ds[0].Status != 200 {
				t.Fatalf("receiver recorded %+v", ds)
			}
		})
	}
}

// TestTheReceiverRefusesWhatItCannotVerify: a wrong secret and a stale
// timestamp (a replay) are 401 and the sender's error names the status.
func TestTheReceiverRefusesWhatItCannotVerify(t *testing.T) {
	recv, _ := hooks.New(hooks.Options{Receivers: map[string]string{"ops": whsecSecret}})
	srv := httptest.NewServer(http.StripPrefix("/hooks", recv))
	defer srv.Close()
	for name, w := range map[string]*webhook.Webhook{
		"wrong secret": newHook(t, srv.URL+"/hooks/ops", "whsec_"+base64.StdEncoding.EncodeToString([]byte("other key")), webhook.Options{}),
		"stale timestamp": newHook(t, srv.URL+"/hooks/ops", whsecSecret, webhook.Options{
			Now: func() time.Time { return time.Now().Add(-6 * time.Minute) }}),
	} {
		t.Run(name, func(t *testing.T) {
			err := w.Send(context.Background(), event("evt-x"))
			if outbound.StatusOf(err) != http.StatusUnauthorized || !strings.Contains(err.Error(), "401") {
				t.Fatalf("err %v", err)
			}
		})
	}
	for _, d := range recv.Deliveries() {
		if d.Verified || d.Status != 401 || d.Reason == "" {
			t.Errorf("recorded %+v", d)
		}
	}
}

// TestFaultsAreErrorsAndGoneIsErrGone: 500 is an error naming the status,
// a receiver slower than the timeout is an error, 410 wraps
// notify.ErrGone, a receiver that is down is an error — none is nil.
func TestFaultsAreErrorsAndGoneIsErrGone(t *testing.T) {
	recv, _ := hooks.New(hooks.Options{Receivers: map[string]string{"ops": whsecSecret}})
	srv := httptest.NewServer(http.StripPrefix("/hooks", recv))
	defer srv.Close()
	w := newHook(t, srv.URL+"/hooks/ops", whsecSecret, webhook.Options{Timeout: 200 * time.Millisecond, BreakerFailures: 100})
	ctx := context.Background()

	recv.SetFaults(hooks.Faults{FailNext: hooks.FailNext{Status: 500, Count: 1}})
	if err := w.Send(ctx, event("e1")); outbound.StatusOf(err) != 500 || errors.Is(err, notify.ErrGone) || !strings.Contains(err.Error(), "status 500") {
		t.Fatalf("500: %v", err)
	}
	recv.SetFaults(hooks.Faults{DelayNext: hooks.DelayNext{DelayMs: 2000, Count: 1}})
	start := time.Now()
	if err := w.Send(ctx, event("e1")); err == nil || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Fatalf("timeout: %v", err)
	}
	if el := time.Since(start); el > 1500*time.Millisecond {
		t.Fatalf("the timeout did not bound the call: %s", el)
	}
	recv.SetFaults(hooks.Faults{FailNext: hooks.FailNext{Status: 410, Count: 1}})
	if err := w.Send(ctx, event("e1")); !errors.Is(err, notify.ErrGone) {
		t.Fatalf("410: %v", err)
	}
	recv.SetFaults(hooks.Faults{FailNext: hooks.FailNext{Status: 429, Count: 1, RetryAfterS: 3}})
	if d, ok := notify.RetryAfter(w.Send(ctx, event("e1"))); !ok || d != 3*time.Second {
		t.Fatalf("429: %v %v", d, ok)
	}
	if err := w.Send(ctx, event("e1")); err != nil {
		t.Fatalf("after the faults: %v", err)
	}
	// The receiver took the delayed post too, after the sender gave up
	// on it (a lost answer): e1 arrived verified twice, once as a
	// duplicate — what at least once looks like to a receiver.
	ds := waitDeliveries(t, recv, 5)
	var fresh, dup int
	for _, d := range ds {
		if d.Verified && d.Duplicate {
			dup++
		} else if d.Verified {
			fresh++
		}
	}
	if fresh != 1 || dup != 1 {
		t.Fatalf("verified e1: %d first, %d duplicates: %+v", fresh, dup, ds)
	}

	url := srv.URL
	srv.Close()
	down := newHook(t, url+"/hooks/ops", whsecSecret, webhook.Options{})
	if err := down.Send(ctx, event("e2")); err == nil || outbound.StatusOf(err) != 0 {
		t.Fatalf("down: %v", err)
	}
}

// TestTheBreakerOpensOnFailuresButNotOnRetryAfter: consecutive 5xx open
// the endpoint's breaker (the next send fails without a request), while
// 429s with Retry-After are retries that leave it closed.
func TestTheBreakerOpensOnFailuresButNotOnRetryAfter(t *testing.T) {
	var calls, status int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		if status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "7")
		}
		w.WriteHeader(status)
	}))
	defer srv.Close()
	w := newHook(t, srv.URL, "s", webhook.Options{BreakerFailures: 2, BreakerOpenFor: time.Minute})
	ctx := context.Background()
	status = http.StatusTooManyRequests
	for range 3 {
		err := w.Send(ctx, event("e"))
		if d, ok := notify.RetryAfter(err); !ok || d != 7*time.Second {
			t.Fatalf("429: %v (%v %v)", err, d, ok)
		}
	}
	status = http.StatusServiceUnavailable
	for range 2 {
		if err := w.Send(ctx, event("e")); outbound.StatusOf(err) != 503 {
			t.Fatalf("503: %v", err)
		}
	}
	before := calls
	if err := w.Send(ctx, event("e")); !outbound.IsBreakerOpen(err) {
		t.Fatalf("after two failures the breaker is open: %v", err)
	}
	if calls != before || calls != 5 {
		t.Fatalf("calls %d (before %d): the open breaker sent a request", calls, before)
	}
}

// TestErrorsLeakNeitherTheURLNorTheBody: a transport error does not
// repeat the URL (a token may be in it), an answer's body is quoted
// clipped to one short line, and a redirect is not followed.
func TestErrorsLeakNeitherTheURLNorTheBody(t *testing.T) {
	long := strings.Repeat("secret-data ", 200)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
			return
		}
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, "bad\nrequest\x00 "+long)
	}))
	defer srv.Close()
	err := newHook(t, srv.URL+"/x", "s", webhook.Options{}).Send(context.Background(), event("e"))
	if outbound.StatusOf(err) != 400 || len(err.Error()) > 300 || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "bad request") {
		t.Fatalf("400: %q", err)
	}
	if err := newHook(t, srv.URL+"/moved", "s", webhook.Options{}).Send(context.Background(), event("e")); outbound.StatusOf(err) != http.StatusFound {
		t.Fatalf("redirect: %v", err)
	}
	url := srv.URL
	srv.Close()
	err = newHook(t, url+"/services/T0/B0/tok3n", "s", webhook.Options{}).Send(context.Background(), event("e"))
	if err == nil || strings.Contains(err.Error(), "tok3n") || strings.Contains(err.Error(), url) {
		t.Fatalf("transport error names the URL: %v", err)
	}
}

// TestNewRefusesWhatCannotWork: a URL that is not http(s), no secret, a
// "whsec_" secret that is not base64 and an unknown kind are refused at
// construction, with the reason.
func TestNewRefusesWhatCannotWork(t *testing.T) {
	tests := []struct {
		name string
		ep   webhook.Endpoint
		want string
	}{
		{"file URL", webhook.Endpoint{Name: "a", URL: "file:///etc/passwd", Secret: "s"}, `scheme is "file"`},
		{"relative URL", webhook.Endpoint{Name: "a", URL: "/hooks/a", Secret: "s"}, "scheme"},
		{"no host", webhook.Endpoint{Name: "a", URL: "http://", Secret: "s"}, "no host"},
		{"no secret", webhook.Endpoint{Name: "a", URL: "https://x.example/h"}, "needs a secret"},
		{"bad whsec", webhook.Endpoint{Name: "a", URL: "https://x.example/h", Secret: "whsec_!!"}, "not base64"},
		{"unknown kind", webhook.Endpoint{Name: "a", URL: "https://x.example/h", Secret: "s", Types: []notify.Kind{"request.inEffect"}}, "unknown event kind"},
		{"no name", webhook.Endpoint{URL: "https://x.example/h", Secret: "s"}, "needs a name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := webhook.New(tt.ep, webhook.Options{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want %q", err, tt.want)
			}
		})
	}
	w := newHook(t, "https://x.example/h", "s", webhook.Options{})
	if w.Name() != "webhook:ops" || !w.Wants(notify.KindBatchBlocked) {
		t.Fatalf("name %q", w.Name())
	}
	typed, _ := webhook.New(webhook.Endpoint{Name: "t", URL: "https://x.example/h", Secret: "s",
		Types: []notify.Kind{notify.KindRequestFailed}}, webhook.Options{})
	if !typed.Wants(notify.KindRequestFailed) || typed.Wants(notify.KindRequestInEffect) {
		t.Fatal("types filter")
	}
}

func waitDeliveries(t *testing.T, recv *hooks.Server, n int) []hooks.Delivery {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ds := recv.Deliveries()
		if len(ds) >= n || time.Now().After(deadline) {
			if len(ds) != n {
				t.Fatalf("%d deliveries, want %d: %+v", len(ds), n, ds)
			}
			return ds
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTheDocumentedExampleVerifies: the signed example of the
// notifications page is real — the sender signs its body to its
// signature, and the independent verification accepts it — so a reader
// can test a verifier against the page, docs/notifications.md.
func TestTheDocumentedExampleVerifies(t *testing.T) {
	var doc string
	if raw, err := os.ReadFile("../../../docs/notifications.md"); err == nil && strings.Contains(string(raw), "```http\nPOST ") {
		doc = string(raw)
	}
	if doc == "" {
		t.Fatal("no notifications page in docs/ shows a signed webhook delivery")
	}
	block := doc[strings.Index(doc, "```http\n")+len("```http\n"):]
	block = block[:strings.Index(block, "```")]
	head, body, ok := strings.Cut(block, "\n\n")
	if !ok {
		t.Fatalf("no blank line between headers and body in:\n%s", block)
	}
	body = strings.TrimSuffix(body, "\n")
	h := http.Header{}
	for _, line := range strings.Split(head, "\n")[1:] {
		k, v, _ := strings.Cut(line, ": ")
		h.Set(k, v)
	}
	secret := regexp.MustCompile("`(whsec_[A-Za-z0-9+/=]+)`").FindStringSubmatch(doc)
	if secret == nil {
		t.Fatal("the page names no example secret")
	}
	independentVerify(t, secret[1], h, []byte(body))
	key, _ := webhook.Key(secret[1])
	ts, _ := strconv.ParseInt(h.Get("Webhook-Timestamp"), 10, 64)
	if got := webhook.Sign(key, h.Get("Webhook-Id"), ts, []byte(body)); got != h.Get("Webhook-Signature") {
		t.Fatalf("the sender signs the example as %s", got)
	}
	var e notify.Event
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.ID != h.Get("Webhook-Id") || e.Kind() != notify.KindRequestInEffect {
		t.Fatalf("the example body: %v %+v", err, e)
	}
	if again, _ := e.JSON(); string(again) != body {
		t.Fatalf("the example is not what the sender would post:\n%s", again)
	}
}
