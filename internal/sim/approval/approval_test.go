package approval_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"changeflow/internal/sim/approval"
	"changeflow/internal/sim/deliver"
)

const token = "cb-token"

// cb is one callback the service side received.
type cb struct {
	Token       string
	RequestID   string         `json:"requestId"`
	ApprovalID  string         `json:"approvalId"`
	OperationID string         `json:"operationId"`
	Result      string         `json:"result"`
	Ext         map[string]any `json:"ext"`
	// SubmitReturned is whether the submit call had returned when the
	// callback arrived.
	SubmitReturned bool
}

type world struct {
	t        *testing.T
	sim      *approval.Server
	api      *httptest.Server
	d        *deliver.Deliverer
	got      chan cb
	returned atomic.Bool  // set by tests around a submit
	failing  atomic.Int64 // answer 500 to this many callbacks first
}

func newWorld(t *testing.T, policy approval.Policy) *world {
	t.Helper()
	w := &world{t: t, got: make(chan cb, 100)}
	svc := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/callbacks/approval" {
			rw.WriteHeader(http.StatusNotFound)
			return
		}
		if w.failing.Add(-1) >= 0 {
			rw.WriteHeader(http.StatusInternalServerError)
			return
		}
		var c cb
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &c); err != nil {
			t.Errorf("callback body %s: %v", b, err)
		}
		c.Token = r.Header.Get("X-Callback-Token")
		c.SubmitReturned = w.returned.Load()
		w.got <- c
		rw.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(svc.Close)
	d, err := deliver.New(deliver.Options{Targets: []string{svc.URL}, BackoffMin: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	w.d = d
	w.sim, err = approval.New(approval.Options{Deliverer: d, CallbackToken: token, Policy: policy})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.sim.Close() })
	w.api = httptest.NewServer(w.sim)
	t.Cleanup(w.api.Close)
	return w
}

func (w *world) do(method, path, body string) (int, []byte) {
	w.t.Helper()
	req, err := http.NewRequest(method, w.api.URL+path, bytes.NewBufferString(body))
	if err != nil {
		w.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (w *world) submit(op string, extra string) (int, approval.Approval) {
	w.t.Helper()
	body := `{"operationId":"` + op + `","requester":"alice","title":"access to payments-db-readonly",
		"fields":{"targetKey":"payments-db-readonly","days":7}` + extra + `}`
	status, b := w.do("POST", "/v1/approvals", body)
	var a approval.Approval
	_ = json.Unmarshal(b, &a)
	return status, a
}

func (w *world) next() cb {
	w.t.Helper()
	select {
	case c := <-w.got:
		return c
	case <-time.After(5 * time.Second):
		w.t.Fatal("no callback within 5s")
	}
	return cb{}
}

// quiet asserts no further callback arrives once deliveries are idle.
func (w *world) quiet() {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.d.Wait(ctx); err != nil {
		w.t.Fatal(err)
	}
	select {
	case c := <-w.got:
		w.t.Fatalf("unexpected callback %+v", c)
	default:
	}
}

func TestSubmitAndRead(t *testing.T) {
	w := newWorld(t, approval.Policy{})
	status, a := w.submit("op-1", `,"ext":{"mrId":"42"},"checkItems":["ack"]`)
	if status != http.StatusCreated || a.ApprovalID == "" || a.Status != approval.Pending || a.Ext["mrId"] != "42" {
		t.Fatalf("submit: %d %+v", status, a)
	}
	t.Run("get by id", func(t *testing.T) {
		status, b := w.do("GET", "/v1/approvals/"+a.ApprovalID, "")
		var got approval.Approval
		_ = json.Unmarshal(b, &got)
		if status != 200 || got.OperationID != "op-1" || got.Fields["targetKey"] != "payments-db-readonly" {
			t.Fatalf("%d %s", status, b)
		}
	})
	t.Run("lookup by operationId", func(t *testing.T) {
		var out struct{ Items []approval.Approval }
		_, b := w.do("GET", "/v1/approvals?operationId=op-1", "")
		_ = json.Unmarshal(b, &out)
		if len(out.Items) != 1 || out.Items[0].ApprovalID != a.ApprovalID {
			t.Fatalf("%s", b)
		}
		_, b = w.do("GET", "/v1/approvals?operationId=nope", "")
		out.Items = nil
		_ = json.Unmarshal(b, &out)
		if out.Items == nil || len(out.Items) != 0 {
			t.Fatalf("unknown operationId: %s", b)
		}
	})
	t.Run("second submit is the same approval with 200", func(t *testing.T) {
		status, again := w.submit("op-1", `,"title":"changed"`)
		if status != http.StatusOK || again.ApprovalID != a.ApprovalID {
			t.Fatalf("%d %+v", status, again)
		}
		if n := len(w.sim.List()); n != 1 {
			t.Fatalf("%d approvals", n)
		}
	})
	t.Run("unknown id is 404", func(t *testing.T) {
		if status, _ := w.do("GET", "/v1/approvals/APR-999999", ""); status != http.StatusNotFound {
			t.Fatal(status)
		}
	})
	for name, body := range map[string]string{
		"malformed JSON":      `{"operationId":`,
		"missing operationId": `{"requester":"a","title":"t"}`,
		"missing requester":   `{"operationId":"x","title":"t"}`,
		"missing title":       `{"operationId":"x","requester":"a"}`,
	} {
		t.Run(name+" is 400", func(t *testing.T) {
			if status, _ := w.do("POST", "/v1/approvals", body); status != http.StatusBadRequest {
				t.Fatal(status)
			}
		})
	}
}

func TestManualDecisions(t *testing.T) {
	w := newWorld(t, approval.Policy{Mode: approval.Manual})
	for _, tc := range []struct{ action, result string }{
		{"approve", "APPROVED"}, {"reject", "REJECTED"}, {"withdraw", "WITHDRAWN"},
	} {
		t.Run(tc.action, func(t *testing.T) {
			_, a := w.submit("op-"+tc.action, `,"ext":{"mrId":"7"}`)
			status, b := w.do("POST", "/_control/approvals/"+a.ApprovalID+"/"+tc.action, `{"comment":"ok"}`)
			if status != 200 {
				t.Fatalf("%d %s", status, b)
			}
			c := w.next()
			if c.Result != tc.result || c.ApprovalID != a.ApprovalID || c.OperationID != "op-"+tc.action ||
				c.RequestID == "" || c.Token != token || c.Ext["mrId"] != "7" {
				t.Fatalf("callback %+v", c)
			}
			if got, _ := w.sim.Get(a.ApprovalID); string(got.Status) != tc.result || got.DecidedAt == nil {
				t.Fatalf("approval %+v", got)
			}
			if status, _ := w.do("POST", "/_control/approvals/"+a.ApprovalID+"/approve", ""); status != http.StatusConflict {
				t.Fatalf("second decision: %d", status)
			}
		})
	}
	t.Run("redeliver keeps the requestId", func(t *testing.T) {
		_, a := w.submit("op-redeliver", "")
		w.do("POST", "/_control/approvals/"+a.ApprovalID+"/approve", "")
		first := w.next()
		if status, _ := w.do("POST", "/_control/approvals/"+a.ApprovalID+"/redeliver", ""); status != 200 {
			t.Fatal(status)
		}
		if again := w.next(); again.RequestID != first.RequestID || again.Result != "APPROVED" {
			t.Fatalf("%+v vs %+v", again, first)
		}
		if first.Ext == nil {
			t.Fatal("ext must be an object even when the form had none")
		}
	})
	t.Run("unknown approval or action", func(t *testing.T) {
		if status, _ := w.do("POST", "/_control/approvals/APR-404/approve", ""); status != 404 {
			t.Fatal(status)
		}
		if status, _ := w.do("POST", "/_control/approvals/APR-404/explode", ""); status != 404 {
			t.Fatal(status)
		}
	})
	w.quiet()
}

func TestAutomaticPolicy(t *testing.T) {
	w := newWorld(t, approval.Policy{Mode: approval.Auto, DelayMs: 20,
		RejectRequesters: []string{"mallory"}, RejectTargets: []string{"legacy-ftp"}})
	t.Run("approves after the delay", func(t *testing.T) {
		start := time.Now()
		w.submit("op-auto", "")
		if c := w.next(); c.Result != "APPROVED" || time.Since(start) < 20*time.Millisecond {
			t.Fatalf("%+v after %v", c, time.Since(start))
		}
	})
	t.Run("rejects by requester", func(t *testing.T) {
		w.do("POST", "/v1/approvals", `{"operationId":"op-m","requester":"mallory","title":"t"}`)
		if c := w.next(); c.Result != "REJECTED" || c.OperationID != "op-m" {
			t.Fatalf("%+v", c)
		}
	})
	t.Run("rejects by target", func(t *testing.T) {
		w.do("POST", "/v1/approvals", `{"operationId":"op-t","requester":"alice","title":"t","fields":{"targetKey":"legacy-ftp"}}`)
		if c := w.next(); c.Result != "REJECTED" {
			t.Fatalf("%+v", c)
		}
	})
	t.Run("switching to auto decides what is pending", func(t *testing.T) {
		if status, _ := w.do("POST", "/_control/policy", `{"mode":"manual"}`); status != 200 {
			t.Fatal(status)
		}
		_, a := w.submit("op-later", "")
		if got, _ := w.sim.Get(a.ApprovalID); got.Status != approval.Pending {
			t.Fatalf("decided in manual mode: %+v", got)
		}
		w.do("POST", "/_control/policy", `{"mode":"auto","delayMs":0}`)
		if c := w.next(); c.ApprovalID != a.ApprovalID || c.Result != "APPROVED" {
			t.Fatalf("%+v", c)
		}
	})
	t.Run("bad policy is 400", func(t *testing.T) {
		for _, body := range []string{`{"mode":"sometimes"}`, `{"mode":"auto","delayMs":-1}`, `{`} {
			if status, _ := w.do("POST", "/_control/policy", body); status != 400 {
				t.Fatalf("%s: %d", body, status)
			}
		}
	})
	w.quiet()
}

func TestCallbackRetriedUntil2xx(t *testing.T) {
	w := newWorld(t, approval.Policy{})
	w.failing.Store(2)
	_, a := w.submit("op-retry", "")
	w.sim.Decide(a.ApprovalID, approval.Approved, "")
	if c := w.next(); c.ApprovalID != a.ApprovalID {
		t.Fatalf("%+v", c)
	}
	w.quiet()
	if log := w.d.Log(); len(log) != 1 || len(log[0].Attempts) != 3 {
		t.Fatalf("log %+v", log)
	}
}

func TestDeliveryFaults(t *testing.T) {
	t.Run("duplicate deliveries carry the same requestId", func(t *testing.T) {
		w := newWorld(t, approval.Policy{})
		if status, _ := w.do("POST", "/_control/deliveries/faults", `{"duplicateNext":1}`); status != 200 {
			t.Fatal(status)
		}
		_, a := w.submit("op-dup", "")
		w.do("POST", "/_control/approvals/"+a.ApprovalID+"/approve", "")
		c1, c2 := w.next(), w.next()
		if c1.RequestID != c2.RequestID || c1.RequestID == "" {
			t.Fatalf("%+v / %+v", c1, c2)
		}
		w.quiet()
	})
	t.Run("delayed callback", func(t *testing.T) {
		w := newWorld(t, approval.Policy{})
		w.do("POST", "/_control/deliveries/faults", `{"delayMs":150}`)
		_, a := w.submit("op-delay", "")
		start := time.Now()
		w.do("POST", "/_control/approvals/"+a.ApprovalID+"/approve", "")
		w.next()
		if el := time.Since(start); el < 150*time.Millisecond {
			t.Fatalf("arrived after %v", el)
		}
	})
	t.Run("out of order: pause then release newest first", func(t *testing.T) {
		w := newWorld(t, approval.Policy{})
		_, a := w.submit("op-a", "")
		_, b := w.submit("op-b", "")
		w.do("POST", "/_control/deliveries/pause", "")
		w.do("POST", "/_control/approvals/"+a.ApprovalID+"/approve", "")
		w.do("POST", "/_control/approvals/"+b.ApprovalID+"/reject", "")
		if status, body := w.do("POST", "/_control/deliveries/resume", `{"reverse":true}`); status != 200 || !bytes.Contains(body, []byte(`"released":2`)) {
			t.Fatalf("%d %s", status, body)
		}
		if c := w.next(); c.ApprovalID != b.ApprovalID {
			t.Fatalf("first callback for %s, want %s", c.ApprovalID, b.ApprovalID)
		}
		if c := w.next(); c.ApprovalID != a.ApprovalID {
			t.Fatalf("second callback for %s", c.ApprovalID)
		}
	})
}

func TestCallbackBeforeSubmitReturns(t *testing.T) {
	w := newWorld(t, approval.Policy{Mode: approval.Manual})
	if status, _ := w.do("POST", "/_control/faults", `{"callbackBeforeResponse":1}`); status != 200 {
		t.Fatal(status)
	}
	status, a := w.submit("op-early", "")
	w.returned.Store(true)
	if status != http.StatusCreated || a.Status != approval.Pending {
		t.Fatalf("submit answered %d %+v", status, a)
	}
	c := w.next()
	if c.SubmitReturned || c.ApprovalID != a.ApprovalID || c.Result != "APPROVED" {
		t.Fatalf("callback %+v", c)
	}
	t.Run("only the next N submits", func(t *testing.T) {
		w.returned.Store(false)
		_, b := w.submit("op-normal", "")
		w.returned.Store(true)
		if got, _ := w.sim.Get(b.ApprovalID); got.Status != approval.Pending {
			t.Fatalf("%+v", got)
		}
		w.quiet()
	})
	t.Run("early result can be a rejection", func(t *testing.T) {
		w.do("POST", "/_control/faults", `{"callbackBeforeResponse":1,"earlyResult":"REJECTED"}`)
		w.returned.Store(false)
		w.submit("op-early-reject", "")
		w.returned.Store(true)
		if c := w.next(); c.SubmitReturned || c.Result != "REJECTED" {
			t.Fatalf("%+v", c)
		}
	})
}

func TestSubmitFaults(t *testing.T) {
	w := newWorld(t, approval.Policy{})
	t.Run("error status N times", func(t *testing.T) {
		w.do("POST", "/_control/faults", `{"failNext":{"status":503,"count":2}}`)
		for range 2 {
			if status, _ := w.submit("op-fail", ""); status != 503 {
				t.Fatal(status)
			}
		}
		if status, _ := w.submit("op-fail", ""); status != 201 {
			t.Fatal(status)
		}
	})
	t.Run("lost response: created, look up before resubmitting", func(t *testing.T) {
		w.do("POST", "/_control/faults", `{"loseResponseNext":1}`)
		resp, err := http.Post(w.api.URL+"/v1/approvals", "application/json",
			bytes.NewBufferString(`{"operationId":"op-lost","requester":"alice","title":"t"}`))
		if err == nil {
			resp.Body.Close()
			t.Fatalf("got a response %d, want a dropped connection", resp.StatusCode)
		}
		_, b := w.do("GET", "/v1/approvals?operationId=op-lost", "")
		if !bytes.Contains(b, []byte(`"operationId":"op-lost"`)) {
			t.Fatalf("lookup: %s", b)
		}
		if status, _ := w.submit("op-lost", ""); status != http.StatusOK {
			t.Fatalf("resubmit: %d", status)
		}
	})
	t.Run("held response: created first, answered after the hold or when the caller gives up", func(t *testing.T) {
		w.do("POST", "/_control/faults", `{"holdResponseNext":{"count":1,"delayMs":60000}}`)
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "POST", w.api.URL+"/v1/approvals",
			bytes.NewBufferString(`{"operationId":"op-held","requester":"alice","title":"t"}`))
		done := make(chan error, 1)
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
		// The form exists while its answer is held.
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, b := w.do("GET", "/v1/approvals?operationId=op-held", "")
			if bytes.Contains(b, []byte(`"operationId":"op-held"`)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the held form was never created")
			}
			time.Sleep(5 * time.Millisecond)
		}
		select {
		case err := <-done:
			t.Fatalf("answered while held: %v", err)
		default:
		}
		cancel()
		if err := <-done; err == nil {
			t.Fatal("the caller gave up, want its error")
		}
		// Only the next one was held.
		if status, _ := w.submit("op-after-hold", ""); status != 201 {
			t.Fatalf("next submit: %d", status)
		}
	})
	t.Run("failed reads: public reads answer the status, control reads do not", func(t *testing.T) {
		w.do("POST", "/_control/faults", `{"failReadsNext":{"status":503,"count":2}}`)
		if status, _ := w.do("GET", "/_control/approvals", ""); status != http.StatusOK {
			t.Fatalf("control read: %d", status)
		}
		if status, _ := w.do("GET", "/v1/approvals?operationId=op-lost", ""); status != http.StatusServiceUnavailable {
			t.Fatalf("first read: %d", status)
		}
		if status, _ := w.do("GET", "/v1/approvals/APR-000001", ""); status != http.StatusServiceUnavailable {
			t.Fatalf("second read: %d", status)
		}
		if status, _ := w.do("GET", "/v1/approvals/APR-000001", ""); status != http.StatusOK {
			t.Fatalf("third read: %d", status)
		}
	})
	t.Run("failed reads aimed at one approval leave the others readable", func(t *testing.T) {
		w.do("POST", "/_control/faults", `{"failReadsNext":{"status":503,"count":1,"approvalId":"APR-000001"}}`)
		if status, _ := w.do("GET", "/v1/approvals/APR-000002", ""); status != http.StatusOK {
			t.Fatalf("another approval's read: %d", status)
		}
		if status, _ := w.do("GET", "/v1/approvals?operationId=op-lost", ""); status != http.StatusOK {
			t.Fatalf("a lookup by operationId: %d", status)
		}
		if status, _ := w.do("GET", "/v1/approvals/APR-000001", ""); status != http.StatusServiceUnavailable {
			t.Fatalf("the aimed read: %d", status)
		}
		if status, _ := w.do("GET", "/v1/approvals/APR-000001", ""); status != http.StatusOK {
			t.Fatalf("the read after the count ran out: %d", status)
		}
	})
	t.Run("bad faults are 400, DELETE resets", func(t *testing.T) {
		for _, body := range []string{`{"earlyResult":"MAYBE"}`, `{"failNext":{"status":200,"count":1}}`, `{"failReadsNext":{"status":302,"count":1}}`, `{`} {
			if status, _ := w.do("POST", "/_control/faults", body); status != 400 {
				t.Fatalf("%s: %d", body, status)
			}
		}
		w.do("POST", "/_control/faults", `{"callbackBeforeResponse":3}`)
		if status, b := w.do("DELETE", "/_control/faults", ""); status != 200 || !bytes.Contains(b, []byte(`"callbackBeforeResponse":0`)) {
			t.Fatalf("%d %s", status, b)
		}
	})
	t.Run("control list and reset", func(t *testing.T) {
		_, b := w.do("GET", "/_control/approvals", "")
		if !bytes.Contains(b, []byte("op-lost")) {
			t.Fatalf("%s", b)
		}
		if status, _ := w.do("DELETE", "/_control/approvals", ""); status != http.StatusNoContent {
			t.Fatal(status)
		}
		if len(w.sim.List()) != 0 {
			t.Fatal("not reset")
		}
	})
}

// TestHeldWithdraw: holdWithdrawsNext withdraws first and then holds the
// answer until the caller gives up; the next withdraw call of the same
// approval answers at once, WITHDRAWN (idempotent).
func TestHeldWithdraw(t *testing.T) {
	w := newWorld(t, approval.Policy{})
	status, a := w.submit("op-wd-held", "")
	if status != http.StatusCreated {
		t.Fatalf("submit: %d", status)
	}
	w.do("POST", "/_control/faults", `{"holdWithdrawsNext":{"count":1,"delayMs":60000}}`)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", w.api.URL+"/v1/approvals/"+a.ApprovalID+"/withdraw", nil)
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	// Withdrawn while its answer is held.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, b := w.do("GET", "/v1/approvals/"+a.ApprovalID, "")
		if bytes.Contains(b, []byte(`"status":"WITHDRAWN"`)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the held withdrawal was never applied")
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("answered while held: %v", err)
	default:
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the caller gave up, want its error")
	}
	// Only the next one was held; a second call answers the state.
	status, b := w.do("POST", "/v1/approvals/"+a.ApprovalID+"/withdraw", "")
	if status != http.StatusOK || !bytes.Contains(b, []byte(`"status":"WITHDRAWN"`)) {
		t.Fatalf("second withdraw: %d %s", status, b)
	}
}
