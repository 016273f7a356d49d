package approval

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestWithdrawCancelsTheAutomaticDecision: under the automatic policy a
// withdrawn approval's pending decision is cancelled, and the decision
// firing anyway (its timer raced the withdrawal) changes nothing — a
// withdrawn approval can no longer be decided, by the control API or by
// the policy. Deterministic: the timer's function is called by hand.
func TestWithdrawCancelsTheAutomaticDecision(t *testing.T) {
	s, err := New(Options{Policy: Policy{Mode: Auto, DelayMs: 3_600_000}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	body, _ := json.Marshal(map[string]any{"operationId": "op-auto", "requester": "alice", "title": "t"})
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/approvals", bytes.NewReader(body)))
	if rec.Code != http.StatusCreated {
		t.Fatalf("submit: %d %s", rec.Code, rec.Body)
	}
	var a Approval
	_ = json.Unmarshal(rec.Body.Bytes(), &a)
	s.mu.Lock()
	_, armed := s.timers[a.ApprovalID]
	s.mu.Unlock()
	if !armed {
		t.Fatal("the automatic decision was not scheduled")
	}

	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/approvals/"+a.ApprovalID+"/withdraw", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("withdraw: %d %s", rec.Code, rec.Body)
	}
	s.mu.Lock()
	_, armed = s.timers[a.ApprovalID]
	s.mu.Unlock()
	if armed {
		t.Fatal("the automatic decision is still scheduled")
	}
	s.autoDecide(a.ApprovalID) // the timer firing in spite of the stop
	if got, _ := s.Get(a.ApprovalID); got.Status != Withdrawn || got.CallbackRequestID != "" {
		t.Fatalf("a withdrawn approval was decided: %+v", got)
	}
	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/_control/approvals/"+a.ApprovalID+"/approve", nil))
	if rec.Code != http.StatusConflict {
		t.Fatalf("control approve of a withdrawn approval: %d, want 409", rec.Code)
	}
}
