package approval

import (
	"changeflow/internal/sim/simhttp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// submitRequest is the body of POST /v1/approvals.
type submitRequest struct {
	OperationID string         `json:"operationId"`
	Requester   string         `json:"requester"`
	Title       string         `json:"title"`
	Fields      map[string]any `json:"fields"`
	Ext         map[string]any `json:"ext"`
	CheckItems  []any          `json:"checkItems"`
}

// handleSubmit creates an approval, idempotently on operationId: a second
// submit with the same operationId answers 200 with the existing approval
// (whatever the rest of the body says), a new one 201.
func (s *Server) handleSubmit(w http.ResponseWriter, r *http.Request) {
	var in submitRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in); err != nil {
		simhttp.WriteError(w, http.StatusBadRequest, "malformed JSON body")
		return
	}
	switch {
	case in.OperationID == "":
		simhttp.WriteError(w, http.StatusBadRequest, "operationId is required")
		return
	case in.Requester == "":
		simhttp.WriteError(w, http.StatusBadRequest, "requester is required")
		return
	case in.Title == "":
		simhttp.WriteError(w, http.StatusBadRequest, "title is required")
		return
	}

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		simhttp.WriteError(w, http.StatusServiceUnavailable, "shutting down")
		return
	}
	if f := &s.faults.FailNext; f.Count > 0 {
		f.Count--
		status := f.Status
		s.mu.Unlock()
		simhttp.WriteError(w, status, "injected failure")
		return
	}
	if a, ok := s.byOp[in.OperationID]; ok {
		existing := *a
		s.mu.Unlock()
		simhttp.WriteJSON(w, http.StatusOK, existing)
		return
	}
	s.seq++
	a := &Approval{
		ApprovalID: fmt.Sprintf("APR-%06d", s.seq), OperationID: in.OperationID,
		Requester: in.Requester, Title: in.Title, Fields: in.Fields, Ext: in.Ext,
		CheckItems: in.CheckItems, Status: Pending, CreatedAt: time.Now().UTC(),
	}
	s.byID[a.ApprovalID], s.byOp[a.OperationID] = a, a
	s.order = append(s.order, a)
	created := *a // the answer is what was created, even if decided since
	early, earlyResult := false, s.faults.EarlyResult
	if s.faults.CallbackBeforeResponse > 0 {
		s.faults.CallbackBeforeResponse--
		early = true
		if earlyResult == "" {
			earlyResult = s.policy.decide(a)
		}
	} else {
		s.scheduleLocked(a)
	}
	lose := false
	if s.faults.LoseResponseNext > 0 {
		s.faults.LoseResponseNext--
		lose = true
	}
	var hold time.Duration
	if h := &s.faults.HoldResponseNext; h.Count > 0 {
		h.Count--
		hold = time.Duration(h.DelayMs) * time.Millisecond
	}
	s.mu.Unlock()
	s.logger.Info("approval submitted", "approvalId", a.ApprovalID, "operationId", a.OperationID)

	if early {
		rc, err := s.Decide(created.ApprovalID, earlyResult, "decided before the submit answered (fault)")
		if err == nil && rc != nil {
			ctx, cancel := context.WithTimeout(r.Context(), s.opts.MaxEarlyWait)
			err = rc.Wait(ctx)
			cancel()
			if err != nil {
				s.logger.Warn("early callback not acknowledged before answering the submit", "approvalId", created.ApprovalID, "err", err)
			}
		}
	}
	if hold > 0 {
		t := time.NewTimer(hold)
		select {
		case <-t.C:
		case <-r.Context().Done():
		}
		t.Stop()
	}
	if lose {
		dropConnection(w)
		return
	}
	simhttp.WriteJSON(w, http.StatusCreated, created)
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	a, ok := s.Get(r.PathValue("id"))
	if !ok {
		simhttp.WriteError(w, http.StatusNotFound, "approval not found")
		return
	}
	simhttp.WriteJSON(w, http.StatusOK, a)
}

// handleList answers {items:[…]}, filtered by ?operationId= when given —
// the lookup a caller makes before submitting again after a lost response.
func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	op := r.URL.Query().Get("operationId")
	items := []Approval{}
	for _, a := range s.List() {
		if op == "" || a.OperationID == op {
			items = append(items, a)
		}
	}
	simhttp.WriteJSON(w, http.StatusOK, map[string]any{"items": items})
}

// failingRead wraps a public read with the FailReadsNext fault.
func (s *Server) failingRead(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		if f := &s.faults.FailReadsNext; f.Count > 0 && (f.ApprovalID == "" || f.ApprovalID == r.PathValue("id")) {
			f.Count--
			status := f.Status
			s.mu.Unlock()
			simhttp.WriteError(w, status, "injected failure")
			return
		}
		s.mu.Unlock()
		h(w, r)
	}
}

// dropConnection closes the connection without writing a response.
func dropConnection(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		// HTTP/2 cannot hijack; aborting the handler resets the stream.
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}
