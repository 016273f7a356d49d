package gitlab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// Deliverer sends one webhook request. path is like "/callbacks/gitlab";
// the implementation picks the target base URL and retries until a 2xx.
type Deliverer interface {
	Deliver(ctx context.Context, path string, header http.Header, body []byte)
}

// MergeEvent is published, in merge order, for every merge into any branch.
type MergeEvent struct {
	ProjectID      int64
	MRIID          int64
	MergeCommitSHA string
	TargetBranch   string
	MergedAt       time.Time
}

// Options configures a Server. Durations: zero means the default, a
// negative value means "immediately".
type Options struct {
	DataDir      string    // where bare repos live; "" → a temp dir removed on Close
	Deliver      Deliverer // webhook sender; nil → no webhooks
	WebhookToken string    // X-Gitlab-Token value
	// BotTokens replace the well-known tokens of changeflow's bot
	// accounts (BotTokens); zero keeps them.
	BotTokens BotTokens
	// ProtectChangeflow seeds the protected branch pattern changeflow/*
	// that only changeflow-bot may push to and merge into, force push
	// allowed (the local run's world, as docs/deploy.md configures GitLab).
	// Off, nothing is protected.
	ProtectChangeflow bool
	// HookURLs seed the project's webhooks (GET /projects/:id/hooks), one
	// per URL, with merge request and pipeline events and WebhookToken; ""
	// means one at DefaultHookURL. Deliveries still go to Deliver.
	HookURLs []string
	Logger   *slog.Logger // nil → discard
	Now      func() time.Time

	// ExternalURL is the simulator's public base, used in web_url fields
	// (default "http://127.0.0.1:8090/gitlab").
	ExternalURL string
	// MergeabilityDelay is how long a new or changed MR stays unchecked
	// (first half) then checking (second half) before its mergeability is
	// known (default 300ms).
	MergeabilityDelay time.Duration
	// PipelineStartDelay is created → running (default 100ms).
	PipelineStartDelay time.Duration
	// PipelineDuration is running → success/failed (default 400ms).
	PipelineDuration time.Duration
	// RebaseDuration is how long an accepted rebase stays in progress
	// (default 100ms).
	RebaseDuration time.Duration
	// ApprovalsRequired per MR (default 2).
	ApprovalsRequired int
	// CompatAll401Approvals makes every approve refusal 401, as GitLab 13.x
	// answered.
	CompatAll401Approvals bool
	// LegacyMerge406 answers 406 where current GitLab answers 422.
	LegacyMerge406 bool
	// RequireCheckItems makes an approve call without a check_items field a
	// 422 when the project has items configured (default: the field is
	// checked only when present).
	RequireCheckItems bool
	// KeepApprovalsOnPush keeps approvals when new commits reach the source
	// branch (default: they are reset, as with GitLab's "remove all
	// approvals when commits are added"). A rebase never resets them.
	KeepApprovalsOnPush bool
	// RequestLogSize is how many API requests GET /_control/requests keeps
	// (default 1000); older ones are overwritten.
	RequestLogSize int
}

// settings is the mutable subset of Options the control API changes.
type settings struct {
	MergeabilityDelay     time.Duration
	PipelineStartDelay    time.Duration
	PipelineDuration      time.Duration
	RebaseDuration        time.Duration
	ApprovalsRequired     int
	CompatAll401Approvals bool
	LegacyMerge406        bool
	RequireCheckItems     bool
	KeepApprovalsOnPush   bool
	// APIRatePerMinute bounds API requests per user per RateWindow, and
	// PipelineRatePerMinute pipeline creations per project (0 = off).
	APIRatePerMinute      int
	PipelineRatePerMinute int
	// RateWindow is the limits' window (default 1m; tests shorten it).
	RateWindow time.Duration
}

func durationOr(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

func settingsFrom(o Options) settings {
	s := settings{
		MergeabilityDelay:     durationOr(o.MergeabilityDelay, 300*time.Millisecond),
		PipelineStartDelay:    durationOr(o.PipelineStartDelay, 100*time.Millisecond),
		PipelineDuration:      durationOr(o.PipelineDuration, 400*time.Millisecond),
		RebaseDuration:        durationOr(o.RebaseDuration, 100*time.Millisecond),
		ApprovalsRequired:     o.ApprovalsRequired,
		CompatAll401Approvals: o.CompatAll401Approvals,
		LegacyMerge406:        o.LegacyMerge406,
		RequireCheckItems:     o.RequireCheckItems,
		KeepApprovalsOnPush:   o.KeepApprovalsOnPush,
		RateWindow:            time.Minute,
	}
	if s.ApprovalsRequired <= 0 {
		s.ApprovalsRequired = 2
	}
	return s
}

// Server is the GitLab simulator. It serves /api/v4/... and /_control/...;
// mount it with http.StripPrefix("/gitlab", s).
type Server struct {
	opts    Options
	log     *slog.Logger
	now     func() time.Time
	baseURL string
	dataDir string
	ownDir  bool

	api     http.Handler
	control http.Handler

	ctx    context.Context
	cancel context.CancelFunc
	sched  *scheduler
	hooks  *queue // webhook deliveries, in order
	merges *queue // OnMerge notifications, in merge order
	reqLog *requestLog
	// apiRate and pipelineRate count requests per user and pipeline
	// creations per project (ratelimit.go).
	apiRate, pipelineRate windowCounter

	mu     sync.Mutex // guards everything below
	set    settings
	w      *world
	gen    int
	faults []*Fault
	// released is closed (and replaced) by POST /_control/faults/release:
	// every call a delay fault holds then goes on at once.
	released  chan struct{}
	held      int // calls a delay fault holds now
	nextFault int
	force     []pipelineForce // "next N pipelines" overrides
	closeRace int             // close calls that merge first
	mergeFail []string        // messages of the next merges that fail (422)
	events    []*hookEvent
	mergeSubs []func(MergeEvent)
	closed    bool
}

// New creates the simulator and seeds the local world.
func New(opts Options) (*Server, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.ExternalURL == "" {
		opts.ExternalURL = "http://127.0.0.1:8090/gitlab"
	}
	s := &Server{
		opts:    opts,
		log:     opts.Logger.With("sim", "gitlab"),
		now:     func() time.Time { return opts.Now().UTC() },
		baseURL: opts.ExternalURL,
		dataDir: opts.DataDir,
		set:     settingsFrom(opts),
		sched:   newScheduler(),
		reqLog:  newRequestLog(opts.RequestLogSize),
	}
	if s.dataDir == "" {
		dir, err := os.MkdirTemp("", "gitlab-sim-")
		if err != nil {
			return nil, fmt.Errorf("gitlab sim: temp dir: %w", err)
		}
		s.dataDir, s.ownDir = dir, true
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.hooks = newQueue(s.ctx)
	s.merges = newQueue(s.ctx)
	w, err := newWorld(s.ctx, filepath.Join(s.dataDir, "world-0"), s.now(), seedOf(opts))
	if err != nil {
		s.cancel()
		return nil, fmt.Errorf("gitlab sim: seed: %w", err)
	}
	s.w = w
	s.api = s.withRequestLog(s.withFaults(s.withAuth(s.withAPIRate(s.apiRoutes()))))
	s.control = s.controlRoutes()
	return s, nil
}

// ServeHTTP serves the REST API under /api/v4/ and the control API under
// /_control/.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case hasPrefix(r.URL.Path, "/api/v4/"):
		s.api.ServeHTTP(w, r)
	case hasPrefix(r.URL.Path, "/_control/"):
		s.control.ServeHTTP(w, r)
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		if path, iid, ok := mrPagePath(r.URL.Path); ok {
			s.handleMRPage(w, r, path, iid)
			return
		}
		writeError(w, http.StatusNotFound, "404 Not Found")
	default:
		writeError(w, http.StatusNotFound, "404 Not Found")
	}
}

func hasPrefix(p, prefix string) bool {
	return len(p) >= len(prefix) && p[:len(prefix)] == prefix
}

// OnMerge subscribes fn to merges; fn runs on one goroutine, in merge order.
func (s *Server) OnMerge(fn func(MergeEvent)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mergeSubs = append(s.mergeSubs, fn)
}

// Close stops timers and deliveries and removes a temporary data dir. Safe
// to call twice.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.sched.stop(true)
	s.cancel()
	s.hooks.wait()
	s.merges.wait()
	if s.ownDir {
		return os.RemoveAll(s.dataDir)
	}
	return nil
}

// reset replaces the world with a freshly seeded one.
func (s *Server) reset(ctx context.Context) error {
	s.mu.Lock()
	s.gen++
	gen := s.gen
	old := s.w
	s.mu.Unlock()
	s.sched.stop(false)
	w, err := newWorld(ctx, filepath.Join(s.dataDir, "world-"+strconv.Itoa(gen)), s.now(), seedOf(s.opts))
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.w = w
	s.faults, s.force, s.closeRace, s.mergeFail, s.events = nil, nil, 0, nil, nil
	s.set = settingsFrom(s.opts)
	s.mu.Unlock()
	s.reqLog.clear()
	s.apiRate.clear()
	s.pipelineRate.clear()
	for _, p := range old.projects {
		p.mu.Lock()
		p.dead = true
		p.mu.Unlock()
	}
	if err := os.RemoveAll(old.dir); err != nil {
		s.log.Warn("remove old world", "err", err)
	}
	return nil
}

func (s *Server) settings() settings {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.set
}

func (s *Server) world() *world {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w
}

// errNoProject is a lookup miss.
var errNoProject = errors.New("project not found")

// project finds a project by numeric id or URL-encoded path.
func (s *Server) project(id string) (*project, error) {
	w := s.world()
	if n, err := strconv.ParseInt(id, 10, 64); err == nil {
		if p, ok := w.projects[n]; ok {
			return p, nil
		}
		return nil, errNoProject
	}
	if p, ok := w.byPath[id]; ok {
		return p, nil
	}
	return nil, errNoProject
}
