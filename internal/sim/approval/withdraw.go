package approval

import (
	"errors"
	"net/http"
	"time"

	"changeflow/internal/sim/simhttp"
)

// ErrDecided is Withdraw's refusal: the approval was approved or rejected
// before the withdrawal reached it.
var ErrDecided = errors.New("approval already decided")

// handleWithdraw is POST /v1/approvals/{id}/withdraw with an optional
// {"comment": "…"}: the requester's side withdraws a pending approval
// (the service calls it when its user withdraws the request). 200 with
// the approval, now WITHDRAWN — also for one withdrawn before, so a
// caller whose answer was lost may simply call again; 409 when it was
// approved or rejected first; 404 for an unknown id.
func (s *Server) handleWithdraw(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Comment string `json:"comment"`
	}
	if err := simhttp.ReadJSON(r, &body); err != nil {
		simhttp.WriteError(w, http.StatusBadRequest, "malformed JSON body")
		return
	}
	s.mu.Lock()
	if f := &s.faults.FailWithdrawsNext; f.Count > 0 {
		f.Count--
		status := f.Status
		s.mu.Unlock()
		simhttp.WriteError(w, status, "injected failure")
		return
	}
	var hold time.Duration
	if h := &s.faults.HoldWithdrawsNext; h.Count > 0 {
		h.Count--
		hold = time.Duration(h.DelayMs) * time.Millisecond
	}
	s.mu.Unlock()
	a, err := s.Withdraw(r.PathValue("id"), body.Comment)
	if hold > 0 {
		// Applied (or refused) first, then the answer held: the caller
		// that gives up, or dies, has done the remote write.
		t := time.NewTimer(hold)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	switch {
	case errors.Is(err, ErrNotFound):
		simhttp.WriteError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, ErrDecided):
		simhttp.WriteError(w, http.StatusConflict, err.Error()+" ("+string(a.Status)+")")
	default:
		simhttp.WriteJSON(w, http.StatusOK, a)
	}
}

// Withdraw withdraws the pending approval id and returns it. Unlike a
// decision through the control API it sends no callback: the withdrawal
// is the caller's own act, answered synchronously, so there is nothing
// to tell it. Its automatic decision is cancelled, and from now on the
// control API's approve/reject answer ErrNotPending — a withdrawn
// approval can no longer be decided. A callback already sent before the
// withdrawal (a decision that won the race) still arrives; the service
// finds the request no longer waiting and records it as stale. An
// approval already withdrawn is answered as it is (idempotent); one
// approved or rejected is ErrDecided, with the approval.
func (s *Server) Withdraw(id, comment string) (Approval, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.byID[id]
	switch {
	case !ok:
		return Approval{}, ErrNotFound
	case a.Status == Withdrawn:
		return *a, nil
	case a.Status != Pending:
		return *a, ErrDecided
	}
	if t, ok := s.timers[id]; ok {
		t.Stop()
		delete(s.timers, id)
	}
	now := time.Now().UTC()
	a.Status, a.DecidedAt = Withdrawn, &now
	a.Comment = comment
	if a.Comment == "" {
		a.Comment = "withdrawn by the requester"
	}
	s.logger.Info("approval withdrawn by the requester", "approvalId", id, "operationId", a.OperationID)
	return *a, nil
}
