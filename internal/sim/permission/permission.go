// Package permission simulates the permission service: POST /v1/check
// {subject, ruleCodes} answers {granted:[…]} from a table, with faults
// (error statuses, timeouts, slow answers) switched by a control API.
package permission

import (
	"changeflow/internal/sim/simhttp"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Options configures a Server.
type Options struct {
	// Grants maps a subject to the rule codes it holds.
	Grants map[string][]string
	// CheckLogSize is how many checks the control API remembers (default 1000).
	CheckLogSize int
	Logger       *slog.Logger
}

// LocalGrants is the local world's table (README.md, "The local run"): olivia operates,
// adam administers, alice and bob hold nothing.
func LocalGrants() map[string][]string {
	return map[string][]string{
		"olivia": {"ops.read", "ops.write"},
		"adam":   {"admin"},
		"alice":  {},
		"bob":    {},
	}
}

// Faults are the faults in force. They apply in this order: an error
// status while ErrorCount lasts, then a timeout while TimeoutCount lasts,
// then SlowMs on every answer.
type Faults struct {
	ErrorStatus int `json:"errorStatus"`
	ErrorCount  int `json:"errorCount"`
	// TimeoutCount holds the next N checks until the client gives up or
	// TimeoutMaxMs (default 30000) passes, then answers 504.
	TimeoutCount int `json:"timeoutCount"`
	TimeoutMaxMs int `json:"timeoutMaxMs"`
	// SlowMs delays every answer.
	SlowMs int `json:"slowMs"`
}

// Check is one check as the control API reports it.
type Check struct {
	Subject   string    `json:"subject"`
	RuleCodes []string  `json:"ruleCodes"`
	Granted   []string  `json:"granted"`
	Status    int       `json:"status"` // 0: the client gave up first
	At        time.Time `json:"at"`
}

// Server is the permission simulator; it is an http.Handler.
type Server struct {
	opts   Options
	logger *slog.Logger
	mux    *http.ServeMux

	mu     sync.Mutex
	grants map[string][]string
	faults Faults
	checks []Check
	closed chan struct{}
	once   sync.Once
}

// New returns a Server serving opts.Grants.
func New(opts Options) (*Server, error) {
	if opts.CheckLogSize <= 0 {
		opts.CheckLogSize = 1000
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{opts: opts, logger: logger, mux: http.NewServeMux(),
		grants: cloneGrants(opts.Grants), closed: make(chan struct{})}
	s.mux.HandleFunc("POST /v1/check", s.handleCheck)
	s.mux.HandleFunc("GET /_control/grants", s.handleGetGrants)
	s.mux.HandleFunc("POST /_control/grants", s.handleReplaceGrants)
	s.mux.HandleFunc("PUT /_control/grants/{subject}", s.handlePutGrant)
	s.mux.HandleFunc("DELETE /_control/grants/{subject}", s.handleDeleteGrant)
	s.mux.HandleFunc("GET /_control/faults", s.handleGetFaults)
	s.mux.HandleFunc("POST /_control/faults", s.handleSetFaults)
	s.mux.HandleFunc("DELETE /_control/faults", s.handleResetFaults)
	s.mux.HandleFunc("GET /_control/checks", s.handleChecks)
	return s, nil
}

// ServeHTTP serves the check and control APIs.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close releases checks held by a timeout fault. Safe to call twice.
func (s *Server) Close() error {
	s.once.Do(func() { close(s.closed) })
	return nil
}

// SetGrants replaces subject's rule codes.
func (s *Server) SetGrants(subject string, ruleCodes []string) {
	s.mu.Lock()
	s.grants[subject] = slices.Clone(ruleCodes)
	s.mu.Unlock()
}

// SetFaults replaces the faults in force.
func (s *Server) SetFaults(f Faults) error {
	if f.ErrorCount > 0 && (f.ErrorStatus < 400 || f.ErrorStatus > 599) {
		return errors.New("errorStatus must be an HTTP error status (400-599)")
	}
	s.mu.Lock()
	s.faults = f
	s.mu.Unlock()
	return nil
}

// Checks returns the checks answered so far, oldest first.
func (s *Server) Checks() []Check {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.checks)
}

type checkRequest struct {
	Subject   string   `json:"subject"`
	RuleCodes []string `json:"ruleCodes"`
}

func (s *Server) handleCheck(w http.ResponseWriter, r *http.Request) {
	var in checkRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in); err != nil {
		simhttp.WriteError(w, http.StatusBadRequest, "malformed JSON body")
		return
	}
	if in.Subject == "" {
		simhttp.WriteError(w, http.StatusBadRequest, "subject is required")
		return
	}
	s.mu.Lock()
	f := &s.faults
	var errStatus int
	var hold time.Duration
	if f.ErrorCount > 0 {
		f.ErrorCount--
		errStatus = f.ErrorStatus
	} else if f.TimeoutCount > 0 {
		f.TimeoutCount--
		hold = time.Duration(f.TimeoutMaxMs) * time.Millisecond
		if hold <= 0 {
			hold = 30 * time.Second
		}
	}
	slow := time.Duration(max(f.SlowMs, 0)) * time.Millisecond
	held := s.grants[in.Subject]
	s.mu.Unlock()

	if hold > 0 {
		if !s.wait(r, hold) {
			s.record(in, nil, 0) // the client gave up first
			return
		}
		s.record(in, nil, http.StatusGatewayTimeout)
		simhttp.WriteError(w, http.StatusGatewayTimeout, "permission check timed out")
		return
	}
	if slow > 0 && !s.wait(r, slow) {
		s.record(in, nil, 0)
		return
	}
	if errStatus != 0 {
		s.record(in, nil, errStatus)
		simhttp.WriteError(w, errStatus, "injected failure")
		return
	}
	granted := []string{}
	for _, c := range in.RuleCodes {
		if slices.Contains(held, c) && !slices.Contains(granted, c) {
			granted = append(granted, c)
		}
	}
	s.record(in, granted, http.StatusOK)
	simhttp.WriteJSON(w, http.StatusOK, map[string]any{"subject": in.Subject, "granted": granted})
}

// wait holds the request for d; false when the client went away first.
func (s *Server) wait(r *http.Request, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.closed:
		return true
	case <-r.Context().Done():
		return false
	}
}

func (s *Server) record(in checkRequest, granted []string, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checks = append(s.checks, Check{Subject: in.Subject, RuleCodes: in.RuleCodes, Granted: granted, Status: status, At: time.Now().UTC()})
	if over := len(s.checks) - s.opts.CheckLogSize; over > 0 {
		s.checks = slices.Clone(s.checks[over:])
	}
}

func (s *Server) handleGetGrants(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	g := cloneGrants(s.grants)
	s.mu.Unlock()
	simhttp.WriteJSON(w, http.StatusOK, g)
}

// handleReplaceGrants replaces the whole table: {"subject": ["rule", …], …}.
func (s *Server) handleReplaceGrants(w http.ResponseWriter, r *http.Request) {
	var g map[string][]string
	if err := simhttp.ReadJSON(r, &g); err != nil {
		simhttp.WriteError(w, http.StatusBadRequest, "malformed JSON body")
		return
	}
	s.mu.Lock()
	s.grants = cloneGrants(g)
	s.mu.Unlock()
	s.handleGetGrants(w, r)
}

// handlePutGrant sets one subject's rule codes: {"ruleCodes": [...]}.
func (s *Server) handlePutGrant(w http.ResponseWriter, r *http.Request) {
	var body struct {
		RuleCodes []string `json:"ruleCodes"`
	}
	if err := simhttp.ReadJSON(r, &body); err != nil {
		simhttp.WriteError(w, http.StatusBadRequest, "malformed JSON body")
		return
	}
	s.SetGrants(r.PathValue("subject"), body.RuleCodes)
	s.handleGetGrants(w, r)
}

func (s *Server) handleDeleteGrant(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	delete(s.grants, r.PathValue("subject"))
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleGetFaults(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	f := s.faults
	s.mu.Unlock()
	simhttp.WriteJSON(w, http.StatusOK, f)
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
	s.handleGetFaults(w, r)
}

func (s *Server) handleResetFaults(w http.ResponseWriter, r *http.Request) {
	_ = s.SetFaults(Faults{})
	s.handleGetFaults(w, r)
}

func (s *Server) handleChecks(w http.ResponseWriter, r *http.Request) {
	simhttp.WriteJSON(w, http.StatusOK, map[string]any{"checks": s.Checks()})
}

func cloneGrants(g map[string][]string) map[string][]string {
	out := make(map[string][]string, len(g))
	for k, v := range maps.All(g) {
		out[k] = slices.Clone(v)
		if out[k] == nil {
			out[k] = []string{}
		}
	}
	return out
}
