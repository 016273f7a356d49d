package approval

import (
	"changeflow/internal/sim/simhttp"
	"errors"
	"net/http"
)

// handleDecide is POST /_control/approvals/{id}/{approve|reject|withdraw|redeliver}
// with an optional {"comment": "…", "decidedBy": "…"}.
func (s *Server) handleDecide(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Comment   string `json:"comment"`
		DecidedBy string `json:"decidedBy"`
	}
	if err := simhttp.ReadJSON(r, &body); err != nil {
		simhttp.WriteError(w, http.StatusBadRequest, "malformed JSON body")
		return
	}
	id := r.PathValue("id")
	var err error
	switch r.PathValue("action") {
	case "approve":
		_, err = s.DecideAs(id, Approved, body.Comment, body.DecidedBy)
	case "reject":
		_, err = s.DecideAs(id, Rejected, body.Comment, body.DecidedBy)
	case "withdraw":
		_, err = s.DecideAs(id, Withdrawn, body.Comment, body.DecidedBy)
	case "redeliver":
		_, err = s.Redeliver(id)
	default:
		simhttp.WriteError(w, http.StatusNotFound, "action must be approve, reject, withdraw or redeliver")
		return
	}
	switch {
	case errors.Is(err, ErrNotFound):
		simhttp.WriteError(w, http.StatusNotFound, err.Error())
		return
	case errors.Is(err, ErrNotPending):
		simhttp.WriteError(w, http.StatusConflict, err.Error())
		return
	}
	a, _ := s.Get(id)
	simhttp.WriteJSON(w, http.StatusOK, a)
}

// handleReset forgets every approval and pending automatic decision.
func (s *Server) handleReset(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	for id, t := range s.timers {
		t.Stop()
		delete(s.timers, id)
	}
	s.byID, s.byOp, s.order = map[string]*Approval{}, map[string]*Approval{}, nil
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleGetPolicy(w http.ResponseWriter, r *http.Request) {
	simhttp.WriteJSON(w, http.StatusOK, s.Policy())
}

// handleSetPolicy replaces the policy. Switching to auto also schedules
// the approvals already pending, so nothing waits for a decision that
// will never come.
func (s *Server) handleSetPolicy(w http.ResponseWriter, r *http.Request) {
	var p Policy
	if err := simhttp.ReadJSON(r, &p); err != nil {
		simhttp.WriteError(w, http.StatusBadRequest, "malformed JSON body")
		return
	}
	if err := s.SetPolicy(p); err != nil {
		simhttp.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	simhttp.WriteJSON(w, http.StatusOK, s.Policy())
}

// Policy returns the policy in force.
func (s *Server) Policy() Policy {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.policy
}

// SetPolicy replaces the policy (see handleSetPolicy).
func (s *Server) SetPolicy(p Policy) error {
	if err := p.validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.policy = p
	for _, a := range s.order {
		s.scheduleLocked(a)
	}
	return nil
}

func (s *Server) handleGetFaults(w http.ResponseWriter, r *http.Request) {
	simhttp.WriteJSON(w, http.StatusOK, s.Faults())
}

// handleSetFaults changes the fields present in the body, keeping others.
func (s *Server) handleSetFaults(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	f := s.faults
	s.mu.Unlock()
	if err := simhttp.ReadJSON(r, &f); err != nil {
		simhttp.WriteError(w, http.StatusBadRequest, "malformed JSON body")
		return
	}
	if err := s.SetFaults(f); err != nil {
		simhttp.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	simhttp.WriteJSON(w, http.StatusOK, s.Faults())
}

func (s *Server) handleResetFaults(w http.ResponseWriter, r *http.Request) {
	_ = s.SetFaults(Faults{})
	if s.opts.Deliverer != nil {
		s.opts.Deliverer.ResetFaults()
	}
	simhttp.WriteJSON(w, http.StatusOK, s.Faults())
}

// Faults returns the submit-side faults in force.
func (s *Server) Faults() Faults {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults
}

// SetFaults replaces the submit-side faults.
func (s *Server) SetFaults(f Faults) error {
	switch f.EarlyResult {
	case "", Approved, Rejected, Withdrawn:
	default:
		return errors.New("earlyResult must be APPROVED, REJECTED or WITHDRAWN")
	}
	if f.FailNext.Count > 0 && (f.FailNext.Status < 400 || f.FailNext.Status > 599) {
		return errors.New("failNext.status must be an HTTP error status (400-599)")
	}
	if f.FailReadsNext.Count > 0 && (f.FailReadsNext.Status < 400 || f.FailReadsNext.Status > 599) {
		return errors.New("failReadsNext.status must be an HTTP error status (400-599)")
	}
	if f.FailWithdrawsNext.Count > 0 && (f.FailWithdrawsNext.Status < 400 || f.FailWithdrawsNext.Status > 599) {
		return errors.New("failWithdrawsNext.status must be an HTTP error status (400-599)")
	}
	f.CallbackBeforeResponse = max(f.CallbackBeforeResponse, 0)
	f.LoseResponseNext = max(f.LoseResponseNext, 0)
	f.FailNext.Count = max(f.FailNext.Count, 0)
	f.HoldResponseNext.Count = max(f.HoldResponseNext.Count, 0)
	f.HoldResponseNext.DelayMs = max(f.HoldResponseNext.DelayMs, 0)
	f.FailReadsNext.Count = max(f.FailReadsNext.Count, 0)
	f.FailWithdrawsNext.Count = max(f.FailWithdrawsNext.Count, 0)
	f.HoldWithdrawsNext.Count = max(f.HoldWithdrawsNext.Count, 0)
	f.HoldWithdrawsNext.DelayMs = max(f.HoldWithdrawsNext.DelayMs, 0)
	s.mu.Lock()
	s.faults = f
	s.mu.Unlock()
	return nil
}
