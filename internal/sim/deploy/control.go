package deploy

import (
	"changeflow/internal/sim/simhttp"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
)

func (s *Server) routes() {
	s.mux.HandleFunc("GET /_control/deployments", s.handleList)
	s.mux.HandleFunc("POST /_control/deployments", s.handleTrigger)
	s.mux.HandleFunc("POST /_control/deployments/{id}/redeliver", s.handleRedeliver)
	s.mux.HandleFunc("GET /_control/faults", s.handleGetFaults)
	s.mux.HandleFunc("POST /_control/faults", s.handleSetFaults)
	s.mux.HandleFunc("DELETE /_control/faults", s.handleResetFaults)
	s.mux.HandleFunc("POST /_control/pause", func(w http.ResponseWriter, r *http.Request) {
		on := true
		s.SetFaults(FaultsPatch{Paused: &on})
		s.handleGetFaults(w, r)
	})
	s.mux.HandleFunc("POST /_control/resume", func(w http.ResponseWriter, r *http.Request) {
		off := false
		s.SetFaults(FaultsPatch{Paused: &off})
		s.handleGetFaults(w, r)
	})
	s.opts.Deliverer.RegisterControl(s.mux, "/_control/deliveries")
}

// Faults returns the faults in force.
func (s *Server) Faults() Faults {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults
}

// FaultsPatch changes the fields that are set.
type FaultsPatch struct {
	DropNext      *int  `json:"dropNext"`
	DuplicateNext *int  `json:"duplicateNext"`
	DelayMs       *int  `json:"delayMs"`
	Paused        *bool `json:"paused"`
}

// SetFaults applies p and wakes the runner (a shorter delay or a resume
// takes effect at once).
func (s *Server) SetFaults(p FaultsPatch) {
	s.mu.Lock()
	if p.DropNext != nil {
		s.faults.DropNext = max(*p.DropNext, 0)
	}
	if p.DuplicateNext != nil {
		s.faults.DuplicateNext = max(*p.DuplicateNext, 0)
	}
	if p.DelayMs != nil {
		s.faults.DelayMs = max(*p.DelayMs, 0)
	}
	if p.Paused != nil {
		s.faults.Paused = *p.Paused
	}
	s.mu.Unlock()
	s.wake()
}

// Pause queues deployments until Resume.
func (s *Server) Pause() { on := true; s.SetFaults(FaultsPatch{Paused: &on}) }

// Resume runs the queued deployments, in order.
func (s *Server) Resume() { off := false; s.SetFaults(FaultsPatch{Paused: &off}) }

func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	items := s.List()
	s.mu.Lock()
	queued := len(s.queue)
	s.mu.Unlock()
	simhttp.WriteJSON(w, http.StatusOK, map[string]any{"items": items, "queued": queued, "faults": s.Faults()})
}

// handleTrigger deploys a merge by hand: {"project":1,"mrIid":5,
// "mergeCommitSha":"…","targetBranch":"main"}; the branch filter does not
// apply.
func (s *Server) handleTrigger(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Project        int64  `json:"project"`
		MRIID          int64  `json:"mrIid"`
		MergeCommitSHA string `json:"mergeCommitSha"`
		TargetBranch   string `json:"targetBranch"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in); err != nil {
		simhttp.WriteError(w, http.StatusBadRequest, "malformed JSON body")
		return
	}
	if in.Project <= 0 || in.MRIID <= 0 {
		simhttp.WriteError(w, http.StatusBadRequest, "project and mrIid are required")
		return
	}
	d := s.enqueue(MergeEvent{ProjectID: in.Project, MRIID: in.MRIID, MergeCommitSHA: in.MergeCommitSHA, TargetBranch: in.TargetBranch}, true)
	simhttp.WriteJSON(w, http.StatusAccepted, d)
}

// handleRedeliver sends a deployed merge's callback again, same requestId.
func (s *Server) handleRedeliver(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	var found *Deployment
	s.mu.Lock()
	for _, d := range s.all {
		if d.ID == id {
			c := *d
			found = &c
		}
	}
	s.mu.Unlock()
	switch {
	case found == nil:
		simhttp.WriteError(w, http.StatusNotFound, "deployment not found")
		return
	case found.Status == Queued:
		simhttp.WriteError(w, http.StatusConflict, "deployment not deployed yet")
		return
	}
	s.send(*found)
	simhttp.WriteJSON(w, http.StatusAccepted, found)
}

func (s *Server) handleGetFaults(w http.ResponseWriter, r *http.Request) {
	simhttp.WriteJSON(w, http.StatusOK, s.Faults())
}

func (s *Server) handleSetFaults(w http.ResponseWriter, r *http.Request) {
	var p FaultsPatch
	err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&p)
	if err != nil && !errors.Is(err, io.EOF) {
		simhttp.WriteError(w, http.StatusBadRequest, "malformed JSON body")
		return
	}
	s.SetFaults(p)
	s.handleGetFaults(w, r)
}

// handleResetFaults switches drop, duplicate and pause off (the delay is
// a setting more than a fault and stays) and resets the deliverer's.
func (s *Server) handleResetFaults(w http.ResponseWriter, r *http.Request) {
	zero, off := 0, false
	s.SetFaults(FaultsPatch{DropNext: &zero, DuplicateNext: &zero, Paused: &off})
	s.opts.Deliverer.ResetFaults()
	s.handleGetFaults(w, r)
}
