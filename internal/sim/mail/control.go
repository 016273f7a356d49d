package mail

import (
	"net/http"
	"strconv"
	"strings"

	"changeflow/internal/sim/simhttp"
	"github.com/emersion/go-smtp"
)

// Faults are the SMTP server's faults in force.
type Faults struct {
	// RefuseNext refuses the next Count transactions at MAIL FROM with
	// Code (a 4xx is temporary, a 5xx permanent; default 451) and
	// Message: the server down for maintenance, a full queue, a policy.
	RefuseNext RefuseNext `json:"refuseNext"`
}

// RefuseNext refuses Count transactions with Code.
type RefuseNext struct {
	Code    int    `json:"code"`
	Count   int    `json:"count"`
	Message string `json:"message,omitempty"`
}

// Faults returns the faults in force.
func (s *Server) Faults() Faults {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults
}

// SetFaults replaces the faults in force (a zero Faults clears them).
func (s *Server) SetFaults(f Faults) {
	f.RefuseNext.Count = max(f.RefuseNext.Count, 0)
	if f.RefuseNext.Code < 400 || f.RefuseNext.Code > 599 {
		f.RefuseNext.Code = 451
	}
	if f.RefuseNext.Message == "" {
		f.RefuseNext.Message = "refused by the simulator's fault"
	}
	s.mu.Lock()
	s.faults = f
	s.mu.Unlock()
}

// takeRefusal counts down RefuseNext: the error to answer MAIL FROM with,
// or nil.
func (s *Server) takeRefusal() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := &s.faults.RefuseNext
	if f.Count == 0 {
		return nil
	}
	f.Count--
	class := f.Code / 100
	return &smtp.SMTPError{Code: f.Code, EnhancedCode: smtp.EnhancedCode{class, 3, 0}, Message: f.Message}
}

func (s *Server) routes() {
	s.mux.HandleFunc("GET /_control/messages", s.handleMessages)
	s.mux.HandleFunc("DELETE /_control/messages", func(w http.ResponseWriter, r *http.Request) {
		s.Clear()
		s.handleMessages(w, r)
	})
	s.mux.HandleFunc("GET /_control/faults", s.handleGetFaults)
	s.mux.HandleFunc("PUT /_control/faults", s.handleSetFaults)
	s.mux.HandleFunc("DELETE /_control/faults", func(w http.ResponseWriter, r *http.Request) {
		s.SetFaults(Faults{})
		s.handleGetFaults(w, r)
	})
	s.mux.HandleFunc("GET /{$}", s.handleInbox)
	s.mux.HandleFunc("GET /messages/{seq}", s.handleMessagePage)
}

// handleMessages is GET /_control/messages[?to=ADDR]: {"items": [...],
// "smtp": addr}, oldest first; to matches an envelope recipient.
func (s *Server) handleMessages(w http.ResponseWriter, r *http.Request) {
	to := strings.ToLower(r.URL.Query().Get("to"))
	items := []Message{}
	for _, m := range s.Messages() {
		if to == "" || containsFold(m.EnvelopeTo, to) {
			items = append(items, m)
		}
	}
	simhttp.WriteJSON(w, http.StatusOK, map[string]any{"items": items, "smtp": s.Addr()})
}

func containsFold(list []string, v string) bool {
	for _, x := range list {
		if strings.EqualFold(x, v) {
			return true
		}
	}
	return false
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

// message is the kept message seq, if any.
func (s *Server) message(seqText string) (Message, bool) {
	seq, err := strconv.ParseInt(seqText, 10, 64)
	if err != nil {
		return Message{}, false
	}
	for _, m := range s.Messages() {
		if m.Seq == seq {
			return m, true
		}
	}
	return Message{}, false
}
