package hooks

import (
	"net/http"
	"time"

	"changeflow/internal/sim/simhttp"
)

// Faults are the receivers' faults in force. Each counts down per post it
// applies to; Name limits one to a receiver ("chat/<name>" for a chat
// post), empty means every post.
type Faults struct {
	// FailNext answers the next Count posts with Status (500 for a
	// receiver that fails, 410 for one that is gone), recording them
	// unverified.
	FailNext FailNext `json:"failNext"`
	// DelayNext holds the next Count posts DelayMs before answering them
	// as usual (or until the sender gives up): a sender's timeout.
	DelayNext DelayNext `json:"delayNext"`
}

// FailNext answers Count posts with Status, with a Retry-After of
// RetryAfterS seconds when set (a 429 that names its wait).
type FailNext struct {
	Status      int    `json:"status"`
	Count       int    `json:"count"`
	Name        string `json:"name,omitempty"`
	RetryAfterS int    `json:"retryAfterS,omitempty"`
}

// DelayNext holds Count posts DelayMs long.
type DelayNext struct {
	DelayMs int    `json:"delayMs"`
	Count   int    `json:"count"`
	Name    string `json:"name,omitempty"`
}

// Faults returns the faults in force.
func (s *Server) Faults() Faults {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults
}

// SetFaults replaces the faults in force (a zero Faults clears them).
func (s *Server) SetFaults(f Faults) {
	f.FailNext.Count, f.DelayNext.Count = max(f.FailNext.Count, 0), max(f.DelayNext.Count, 0)
	f.DelayNext.DelayMs = max(f.DelayNext.DelayMs, 0)
	if f.FailNext.Status == 0 {
		f.FailNext.Status = http.StatusInternalServerError
	}
	s.mu.Lock()
	s.faults = f
	s.mu.Unlock()
}

// takeFaults counts down the faults that apply to a post to target.
func (s *Server) takeFaults(target string) (delay time.Duration, status, retryAfterS int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d := &s.faults.DelayNext; d.Count > 0 && (d.Name == "" || d.Name == target) {
		d.Count--
		delay = time.Duration(d.DelayMs) * time.Millisecond
	}
	if f := &s.faults.FailNext; f.Count > 0 && (f.Name == "" || f.Name == target) {
		f.Count--
		status, retryAfterS = f.Status, f.RetryAfterS
	}
	return delay, status, retryAfterS
}

func (s *Server) controlRoutes() {
	s.mux.HandleFunc("GET /_control/deliveries", s.handleDeliveries)
	s.mux.HandleFunc("DELETE /_control/deliveries", func(w http.ResponseWriter, r *http.Request) {
		s.Clear()
		s.handleDeliveries(w, r)
	})
	s.mux.HandleFunc("GET /_control/receivers", s.handleReceivers)
	s.mux.HandleFunc("PUT /_control/receivers/{name}", s.handlePutReceiver)
	s.mux.HandleFunc("DELETE /_control/receivers/{name}", func(w http.ResponseWriter, r *http.Request) {
		s.RemoveReceiver(r.PathValue("name"))
		s.handleReceivers(w, r)
	})
	s.mux.HandleFunc("GET /_control/faults", s.handleGetFaults)
	s.mux.HandleFunc("PUT /_control/faults", s.handleSetFaults)
	s.mux.HandleFunc("DELETE /_control/faults", func(w http.ResponseWriter, r *http.Request) {
		s.SetFaults(Faults{})
		s.handleGetFaults(w, r)
	})
}

// handleDeliveries is GET /_control/deliveries[?name=N][&channel=C]:
// {"items": [...]}, oldest first.
func (s *Server) handleDeliveries(w http.ResponseWriter, r *http.Request) {
	name, channel := r.URL.Query().Get("name"), r.URL.Query().Get("channel")
	items := []Delivery{}
	for _, d := range s.Deliveries() {
		if (name == "" || d.Name == name) && (channel == "" || d.Channel == channel) {
			items = append(items, d)
		}
	}
	simhttp.WriteJSON(w, http.StatusOK, map[string]any{"items": items})
}

// handleReceivers lists the receivers' names; secrets are not shown (the
// one who set a secret knows it).
func (s *Server) handleReceivers(w http.ResponseWriter, r *http.Request) {
	simhttp.WriteJSON(w, http.StatusOK, map[string]any{"items": s.Receivers()})
}

// handlePutReceiver is PUT /_control/receivers/{name} {"secret": "…"}.
func (s *Server) handlePutReceiver(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Secret string `json:"secret"`
	}
	if err := simhttp.ReadJSON(r, &in); err != nil {
		simhttp.WriteError(w, http.StatusBadRequest, "malformed JSON body")
		return
	}
	if err := s.SetReceiver(r.PathValue("name"), in.Secret); err != nil {
		simhttp.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	s.handleReceivers(w, r)
}

func (s *Server) handleGetFaults(w http.ResponseWriter, r *http.Request) {
	simhttp.WriteJSON(w, http.StatusOK, s.Faults())
}

// handleSetFaults is PUT /_control/faults: the body replaces the faults.
func (s *Server) handleSetFaults(w http.ResponseWriter, r *http.Request) {
	var f Faults
	if err := simhttp.ReadJSON(r, &f); err != nil {
		simhttp.WriteError(w, http.StatusBadRequest, "malformed JSON body")
		return
	}
	s.SetFaults(f)
	s.handleGetFaults(w, r)
}
