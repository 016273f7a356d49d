// Package deploy simulates the deployment pipeline: it is told about
// merges (from the GitLab simulator's merge feed, or by its control API),
// deploys them one after another in merge order, and calls the service
// back at /callbacks/deploy through a deliver.Deliverer — with faults:
// drop, duplicate, delay, pause.
package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"changeflow/internal/sim/deliver"
)

// DefaultCallbackPath is where deployments are reported on the service.
const DefaultCallbackPath = "/callbacks/deploy"

// MergeEvent is one merge the pipeline deploys. It mirrors the GitLab
// simulator's event so this package does not depend on it; the composition
// converts one into the other.
type MergeEvent struct {
	ProjectID      int64
	MRIID          int64
	MergeCommitSHA string
	TargetBranch   string
	MergedAt       time.Time
}

// MergeFeed is anything that announces merges, in merge order.
type MergeFeed interface {
	OnMerge(func(MergeEvent))
}

// Status is where a deployment stands.
type Status string

// The statuses of a deployment.
const (
	Queued     Status = "QUEUED"      // waiting for its turn, its delay or a resume
	Deploying  Status = "DEPLOYING"   // its callback is being delivered
	CalledBack Status = "CALLED_BACK" // the service answered 2xx
	Dropped    Status = "DROPPED"     // deployed, but the callback was dropped by a fault
	Abandoned  Status = "ABANDONED"   // the simulator closed before the callback got through
)

// Deployment is one deployment of a merge.
type Deployment struct {
	ID             int64      `json:"id"`
	Project        int64      `json:"project"`
	MRIID          int64      `json:"mrIid"`
	MergeCommitSHA string     `json:"mergeCommitSha,omitempty"`
	TargetBranch   string     `json:"targetBranch,omitempty"`
	MergedAt       time.Time  `json:"mergedAt"`
	Manual         bool       `json:"manual"`
	Status         Status     `json:"status"`
	RequestID      string     `json:"requestId"`
	Callbacks      int        `json:"callbacks"` // deliveries sent (duplicates and redeliveries count)
	QueuedAt       time.Time  `json:"queuedAt"`
	DeployedAt     *time.Time `json:"deployedAt,omitempty"`
}

// Faults are the pipeline's faults; delivery faults of the callbacks
// themselves live on the deliverer under /_control/deliveries.
type Faults struct {
	// DropNext deploys the next N merges without calling back (a lost
	// callback: reconciliation must converge them).
	DropNext int `json:"dropNext"`
	// DuplicateNext calls back twice for the next N deployments.
	DuplicateNext int `json:"duplicateNext"`
	// DelayMs is how long after its merge a deployment calls back.
	DelayMs int `json:"delayMs"`
	// Paused queues deployments until resumed; they then run in order.
	Paused bool `json:"paused"`
}

// Options configures a Server.
type Options struct {
	// Deliverer sends the callbacks (required).
	Deliverer *deliver.Deliverer
	// CallbackToken is sent as X-Callback-Token.
	CallbackToken string
	// CallbackPath defaults to DefaultCallbackPath.
	CallbackPath string
	// Delay is the initial DelayMs fault: the time from merge to callback.
	Delay time.Duration
	// Branches are the target branches deployed from (default "main");
	// "*" deploys every branch. Manual triggers are always deployed.
	Branches []string
	Logger   *slog.Logger
}

// Server is the deployment pipeline simulator; it is an http.Handler.
type Server struct {
	opts   Options
	logger *slog.Logger
	mux    *http.ServeMux

	mu     sync.Mutex
	seq    int64
	all    []*Deployment
	queue  []*Deployment
	faults Faults
	kick   chan struct{}

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// New starts the pipeline's runner.
func New(opts Options) (*Server, error) {
	if opts.Deliverer == nil {
		return nil, fmt.Errorf("deploy: a deliverer is required")
	}
	if opts.CallbackPath == "" {
		opts.CallbackPath = DefaultCallbackPath
	}
	if len(opts.Branches) == 0 {
		opts.Branches = []string{"main"}
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		opts: opts, logger: logger, mux: http.NewServeMux(),
		faults: Faults{DelayMs: int(max(opts.Delay, 0).Milliseconds())},
		kick:   make(chan struct{}, 1),
		ctx:    ctx, cancel: cancel, done: make(chan struct{}),
	}
	s.routes()
	go s.run()
	return s, nil
}

// ServeHTTP serves the control API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close stops the runner; queued deployments stay queued. The deliverer
// belongs to the caller. Safe to call more than once.
func (s *Server) Close() error {
	s.once.Do(s.cancel)
	<-s.done
	return nil
}

// Subscribe registers HandleMerge with feed.
func (s *Server) Subscribe(feed MergeFeed) { feed.OnMerge(s.HandleMerge) }

// HandleMerge queues a deployment of e when its branch is deployed. It
// returns at once; deployments run in the order HandleMerge was called.
func (s *Server) HandleMerge(e MergeEvent) {
	if !slices.Contains(s.opts.Branches, "*") && !slices.Contains(s.opts.Branches, e.TargetBranch) {
		s.logger.Debug("merge not deployed: branch not watched", "project", e.ProjectID, "mrIid", e.MRIID, "branch", e.TargetBranch)
		return
	}
	s.enqueue(e, false)
}

func (s *Server) enqueue(e MergeEvent, manual bool) Deployment {
	now := time.Now().UTC()
	if e.MergedAt.IsZero() {
		e.MergedAt = now
	}
	s.mu.Lock()
	s.seq++
	d := &Deployment{
		ID: s.seq, Project: e.ProjectID, MRIID: e.MRIID, MergeCommitSHA: e.MergeCommitSHA,
		TargetBranch: e.TargetBranch, MergedAt: e.MergedAt.UTC(), Manual: manual,
		Status: Queued, RequestID: fmt.Sprintf("deploy-%d", s.seq), QueuedAt: now,
	}
	s.all = append(s.all, d)
	s.queue = append(s.queue, d)
	c := *d
	s.mu.Unlock()
	s.wake()
	s.logger.Info("deployment queued", "id", c.ID, "project", c.Project, "mrIid", c.MRIID)
	return c
}

func (s *Server) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// List returns copies of every deployment, oldest first.
func (s *Server) List() []Deployment {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Deployment, len(s.all))
	for i, d := range s.all {
		out[i] = *d
	}
	return out
}

// callback is the body POSTed to /callbacks/deploy (docs/api.md, "Callbacks").
type callback struct {
	RequestID string `json:"requestId"`
	Project   int64  `json:"project"`
	MRIID     int64  `json:"mrIid"`
	Status    string `json:"status"`
}

// send delivers d's callback once; callers hold no lock.
func (s *Server) send(d Deployment) *deliver.Receipt {
	b, _ := json.Marshal(callback{RequestID: d.RequestID, Project: d.Project, MRIID: d.MRIID, Status: "SUCCESS"})
	h := http.Header{"Content-Type": {"application/json"}, "X-Callback-Token": {s.opts.CallbackToken}}
	s.mu.Lock()
	for _, x := range s.all {
		if x.ID == d.ID {
			x.Callbacks++
		}
	}
	s.mu.Unlock()
	return s.opts.Deliverer.Submit(s.ctx, s.opts.CallbackPath, h, b)
}
