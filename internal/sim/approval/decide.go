package approval

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"changeflow/internal/sim/deliver"
)

// callback is the body POSTed to /callbacks/approval (docs/api.md, "Callbacks").
type callback struct {
	RequestID   string         `json:"requestId"`
	ApprovalID  string         `json:"approvalId"`
	OperationID string         `json:"operationId"`
	Result      Result         `json:"result"`
	Ext         map[string]any `json:"ext"`
	// DecidedBy and Comment are optional: who decided, and their comment
	// (a rejection's reason), as approval systems commonly report them.
	DecidedBy string `json:"decidedBy,omitempty"`
	Comment   string `json:"comment,omitempty"`
}

// Decide records result for the pending approval id and delivers its
// callback. The receipt (nil without a deliverer) tells when the service
// has answered 2xx.
func (s *Server) Decide(id string, result Result, comment string) (*deliver.Receipt, error) {
	return s.DecideAs(id, result, comment, "")
}

// DecideAs is Decide by the approver named by ("" names nobody): the
// approval and its callback report who decided.
func (s *Server) DecideAs(id string, result Result, comment, by string) (*deliver.Receipt, error) {
	s.mu.Lock()
	a, ok := s.byID[id]
	if !ok {
		s.mu.Unlock()
		return nil, ErrNotFound
	}
	if a.Status != Pending {
		s.mu.Unlock()
		return nil, ErrNotPending
	}
	if t, ok := s.timers[id]; ok {
		t.Stop()
		delete(s.timers, id)
	}
	now := time.Now().UTC()
	a.Status, a.Comment, a.DecidedBy, a.DecidedAt = result, comment, by, &now
	// One decision per approval, so the approval id names the delivery;
	// every redelivery of it carries the same requestId.
	a.CallbackRequestID = "cb-" + a.ApprovalID
	body := s.callbackBody(a)
	s.mu.Unlock()
	s.logger.Info("approval decided", "approvalId", id, "operationId", a.OperationID, "result", result, "by", by)
	return s.send(body), nil
}

// Redeliver sends the decided approval's callback again, same requestId.
func (s *Server) Redeliver(id string) (*deliver.Receipt, error) {
	s.mu.Lock()
	a, ok := s.byID[id]
	if !ok {
		s.mu.Unlock()
		return nil, ErrNotFound
	}
	if a.Status == Pending {
		s.mu.Unlock()
		return nil, ErrNotPending
	}
	body := s.callbackBody(a)
	s.mu.Unlock()
	return s.send(body), nil
}

// callbackBody marshals a's callback. Callers hold s.mu.
func (s *Server) callbackBody(a *Approval) []byte {
	ext := a.Ext
	if ext == nil {
		ext = map[string]any{}
	}
	b, _ := json.Marshal(callback{
		RequestID: a.CallbackRequestID, ApprovalID: a.ApprovalID, OperationID: a.OperationID,
		Result: a.Status, Ext: ext, DecidedBy: a.DecidedBy, Comment: a.Comment,
	})
	return b
}

func (s *Server) send(body []byte) *deliver.Receipt {
	if s.opts.Deliverer == nil {
		return nil
	}
	h := http.Header{"Content-Type": {"application/json"}, "X-Callback-Token": {s.opts.CallbackToken}}
	return s.opts.Deliverer.Submit(context.Background(), s.opts.CallbackPath, h, body)
}

// scheduleLocked arms the automatic decision of a. Callers hold s.mu.
func (s *Server) scheduleLocked(a *Approval) {
	if s.closed || s.policy.Mode != Auto || a.Status != Pending {
		return
	}
	if _, ok := s.timers[a.ApprovalID]; ok {
		return
	}
	id := a.ApprovalID
	s.timers[id] = time.AfterFunc(time.Duration(s.policy.DelayMs)*time.Millisecond, func() { s.autoDecide(id) })
}

// autoDecide is the timer's decision; the policy is read again when it
// fires, so switching to manual stops decisions already scheduled.
func (s *Server) autoDecide(id string) {
	s.mu.Lock()
	delete(s.timers, id)
	a, ok := s.byID[id]
	if s.closed || !ok || s.policy.Mode != Auto || a.Status != Pending {
		s.mu.Unlock()
		return
	}
	result := s.policy.decide(a)
	s.mu.Unlock()
	_, _ = s.DecideAs(id, result, "decided by the automatic policy", AutoDecider)
}
