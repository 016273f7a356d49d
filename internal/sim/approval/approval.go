// Package approval simulates the company's approval system: it accepts
// approval forms (POST /v1/approvals), decides them by control API or by
// an automatic policy, and calls the service back at /callbacks/approval
// through a deliver.Deliverer, with the faults the workflow must survive —
// duplicate, delayed and reordered callbacks, and a callback that arrives
// before the submit call has returned.
package approval

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"changeflow/internal/sim/deliver"
)

// Result is an approval's status; every one but Pending is a decision.
type Result string

// The statuses of an approval.
const (
	Pending   Result = "PENDING"
	Approved  Result = "APPROVED"
	Rejected  Result = "REJECTED"
	Withdrawn Result = "WITHDRAWN"
)

// DefaultCallbackPath is where decisions are delivered on the service.
const DefaultCallbackPath = "/callbacks/approval"

// ErrNotFound and ErrNotPending are the control API's decision errors.
var (
	ErrNotFound   = errors.New("approval not found")
	ErrNotPending = errors.New("approval already decided")
)

// The names the simulator reports as the decider when no person is named:
// the automatic policy's decisions and the buttons of its page.
const (
	AutoDecider = "automatic policy"
	PageDecider = "approval page"
)

// Options configures a Server.
type Options struct {
	// Deliverer sends the callbacks; nil means decisions are recorded but
	// never called back (useful only in tests of the API itself).
	Deliverer *deliver.Deliverer
	// CallbackToken is sent as X-Callback-Token on every callback.
	CallbackToken string
	// CallbackPath is appended to the deliverer's targets; default
	// DefaultCallbackPath.
	CallbackPath string
	// Policy is the decision policy at start; the zero value is manual.
	Policy Policy
	// MaxEarlyWait bounds how long a submit answered after its callback
	// waits for that callback's 2xx (default 30 s).
	MaxEarlyWait time.Duration
	Logger       *slog.Logger
}

// Approval is one approval form and its decision.
type Approval struct {
	ApprovalID  string         `json:"approvalId"`
	OperationID string         `json:"operationId"`
	Requester   string         `json:"requester"`
	Title       string         `json:"title"`
	Fields      map[string]any `json:"fields,omitempty"`
	Ext         map[string]any `json:"ext,omitempty"`
	CheckItems  []any          `json:"checkItems,omitempty"`
	Status      Result         `json:"status"`
	Comment     string         `json:"comment,omitempty"`
	// DecidedBy names who decided ("" when nobody was named).
	DecidedBy string     `json:"decidedBy,omitempty"`
	CreatedAt time.Time  `json:"createdAt"`
	DecidedAt *time.Time `json:"decidedAt,omitempty"`
	// CallbackRequestID is the delivery id of the decision's callback; it
	// stays the same across redeliveries of that decision.
	CallbackRequestID string `json:"callbackRequestId,omitempty"`
}

// Server is the approval simulator. It is an http.Handler.
type Server struct {
	opts   Options
	logger *slog.Logger
	mux    *http.ServeMux

	mu       sync.Mutex
	seq      int
	byID     map[string]*Approval
	byOp     map[string]*Approval
	order    []*Approval
	policy   Policy
	faults   Faults
	timers   map[string]*time.Timer
	closed   bool
	closedCh chan struct{}
}

// New returns a Server with the given options.
func New(opts Options) (*Server, error) {
	if opts.CallbackPath == "" {
		opts.CallbackPath = DefaultCallbackPath
	}
	if opts.MaxEarlyWait <= 0 {
		opts.MaxEarlyWait = 30 * time.Second
	}
	if err := opts.Policy.validate(); err != nil {
		return nil, fmt.Errorf("approval: %w", err)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		opts: opts, logger: logger, mux: http.NewServeMux(),
		byID: map[string]*Approval{}, byOp: map[string]*Approval{},
		policy: opts.Policy, timers: map[string]*time.Timer{},
		closedCh: make(chan struct{}),
	}
	s.routes()
	return s, nil
}

// ServeHTTP serves the public and the control API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close stops pending automatic decisions. The deliverer belongs to the
// caller and is not closed. Safe to call more than once.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	close(s.closedCh)
	for id, t := range s.timers {
		t.Stop()
		delete(s.timers, id)
	}
	return nil
}

func (s *Server) routes() {
	s.mux.HandleFunc("POST /v1/approvals", s.handleSubmit)
	s.mux.HandleFunc("GET /v1/approvals", s.failingRead(s.handleList))
	s.mux.HandleFunc("GET /v1/approvals/{id}", s.failingRead(s.handleGet))
	s.mux.HandleFunc("POST /v1/approvals/{id}/withdraw", s.handleWithdraw)

	s.mux.HandleFunc("GET /_control/approvals", s.handleList)
	s.mux.HandleFunc("DELETE /_control/approvals", s.handleReset)
	s.mux.HandleFunc("POST /_control/approvals/{id}/{action}", s.handleDecide)
	s.mux.HandleFunc("GET /_control/policy", s.handleGetPolicy)
	s.mux.HandleFunc("POST /_control/policy", s.handleSetPolicy)
	s.mux.HandleFunc("GET /_control/faults", s.handleGetFaults)
	s.mux.HandleFunc("POST /_control/faults", s.handleSetFaults)
	s.mux.HandleFunc("DELETE /_control/faults", s.handleResetFaults)
	// The control page for a person (page.go).
	s.mux.HandleFunc("GET /_control/ui", s.handlePage)
	s.mux.HandleFunc("POST /_control/ui/approvals/{id}/{action}", s.handlePageDecide)
	s.mux.HandleFunc("POST /_control/ui/policy", s.handlePagePolicy)
	if s.opts.Deliverer != nil {
		s.opts.Deliverer.RegisterControl(s.mux, "/_control/deliveries")
	}
}

// Get returns a copy of the approval with id.
func (s *Server) Get(id string) (Approval, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.byID[id]
	if !ok {
		return Approval{}, false
	}
	return *a, true
}

// List returns copies of every approval, oldest first.
func (s *Server) List() []Approval {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Approval, len(s.order))
	for i, a := range s.order {
		out[i] = *a
	}
	return out
}
