package workflow_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/approval"
	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/gitlab"
	"changeflow/internal/httpapi"
	"changeflow/internal/metrics"
	"changeflow/internal/sim"
	simapproval "changeflow/internal/sim/approval"
	simgl "changeflow/internal/sim/gitlab"
	"changeflow/internal/store"
	"changeflow/internal/workflow/batch"
	"changeflow/internal/workflow/callbacks"
	"changeflow/internal/workflow/flow"
	"changeflow/internal/workflow/lifecycle"
	"changeflow/internal/workflow/single"
	"changeflow/internal/workflow/withdraw"
)

const (
	e2eToken   = "e2e-callback-token"
	tSingle    = "payments-db"  // batching off: a single-request MR
	tBatched   = "crm-readonly" // batching on
	tOther     = "billing-db"   // batching off, another file
	e2eProject = "1"
)

// world is the whole single-request MR lifecycle over real HTTP: every
// simulator (sim.New) behind an httptest server, the real GitLab and
// approval adapters pointed at it, the real HTTP layer's callback
// endpoints (httpapi) with the workflow's sink, a real store, and an
// engine the test drives with RunDue.
type world struct {
	t     *testing.T
	st    *store.Store
	sim   *sim.Sim
	simTS *httptest.Server
	cbTS  *httptest.Server
	cfg   atomic.Pointer[config.Snapshot]
	eng   *engine.Engine
	cbs   *callbacks.Callbacks

	// deps are the steps' dependencies, as registered on eng.
	deps flowDeps

	mu        sync.Mutex
	validated map[string]int // success side effects per operation (I9)
	approves  int            // approve POSTs the adapter sent
	limited   int            // 429s GitLab answered the adapter
	created   int            // pipelines the adapter created (POST …/pipelines)
	withdrawn map[store.WithdrawPlace]int
}

// countingTransport counts the approve calls that leave the adapter, the
// pipelines it creates and the 429s it is answered.
type countingTransport struct{ w *world }

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/approve") {
		c.w.mu.Lock()
		c.w.approves++
		c.w.mu.Unlock()
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil {
		c.w.mu.Lock()
		if resp.StatusCode == http.StatusTooManyRequests {
			c.w.limited++
		}
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/pipelines") && resp.StatusCode == http.StatusCreated {
			c.w.created++
		}
		c.w.mu.Unlock()
	}
	return resp, err
}

// approveCalls is how many approve POSTs were sent so far.
func (w *world) approveCalls() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.approves
}

// worldSetup is what options may change before the world is built.
type worldSetup struct {
	// ov is the configuration overlay.
	ov map[string]any
	// noEngine: this process runs no steps (another process does).
	noEngine bool
	// roundTrigger, when set, is the steps' Env.RoundTrigger.
	roundTrigger *flow.RoundTrigger
	// onValidated replaces the in-memory success counter.
	onValidated func(ctx context.Context, f store.Flip)
	// wrapGitLab, when set, wraps the steps' GitLab client.
	wrapGitLab func(gitlab.GitLab) gitlab.GitLab
	// deps, when set, edits the steps' dependencies (hooks) before the
	// engine starts.
	deps func(*flowDeps)
	// noGitLabWebhooks keeps the GitLab simulator from sending webhooks:
	// a test that delivers them itself, at the moment it chooses.
	noGitLabWebhooks bool
}

type worldOpt func(*worldSetup)

// withRoundTrigger gives the world's steps and callbacks a round trigger,
// so that admissions and settlements schedule rounds on it.
func withRoundTrigger(t *flow.RoundTrigger) worldOpt {
	return func(s *worldSetup) { s.roundTrigger = t }
}

// withGitLab wraps the GitLab client the steps use.
func withGitLab(wrap func(gitlab.GitLab) gitlab.GitLab) worldOpt {
	return func(s *worldSetup) { s.wrapGitLab = wrap }
}

// withoutGitLabWebhooks: the GitLab simulator sends no webhooks, so one
// the test sends is the only event that can expedite a poll (a simulator
// webhook delivered late raced a test's own in CI).
func withoutGitLabWebhooks() worldOpt {
	return func(s *worldSetup) { s.noGitLabWebhooks = true }
}

// withConfig sets configuration keys.
func withConfig(kv map[string]any) worldOpt {
	return func(s *worldSetup) { maps.Copy(s.ov, kv) }
}

// e2eOverlay is the configuration of the simulated world at simURL.
func e2eOverlay(simURL string) map[string]any {
	return map[string]any{
		"gitlab.baseURL":            simURL + "/gitlab/",
		"gitlab.projects":           []any{e2eProject},
		"gitlab.tokens.committer":   "local-committer-token",
		"gitlab.tokens.approver1":   "local-approver-1-token",
		"gitlab.tokens.approver2":   "local-approver-2-token",
		"approval.baseURL":          simURL + "/approval/",
		"approval.maxRetries":       1,
		"approval.backoffMs":        10,
		"callbacks.tokens.approval": e2eToken, "callbacks.tokens.deploy": e2eToken, "callbacks.tokens.gitlab": e2eToken,
		"polling.pipeline.shortInterval": "10ms", "polling.pipeline.shortAttempts": 5,
		"polling.pipeline.longInterval": "30ms", "polling.pipeline.timeout": "5s",
		"polling.rebase.shortInterval": "10ms", "polling.rebase.shortAttempts": 5,
		"polling.rebase.longInterval": "30ms", "polling.rebase.timeout": "5s",
		"targets": map[string]any{
			tSingle:  map[string]any{"accessMode": "OPEN", "batching": false, "maxDays": 30},
			tBatched: map[string]any{"accessMode": "OPEN", "batching": true, "maxDays": 30},
			tOther:   map[string]any{"accessMode": "OPEN", "batching": false, "maxDays": 30},
		},
	}
}

// e2eDeps are the business steps' dependencies over the real adapters.
func e2eDeps(st *store.Store, cfg func() *config.Snapshot, tr http.RoundTripper, onValidated func(context.Context, store.Flip)) flowDeps {
	gl := gitlab.New(gitlab.Options{Settings: func() gitlab.Settings { return gitlab.SettingsFromConfig(cfg()) }, Transport: tr})
	return flowDeps{Store: st, Env: flow.Env{
		GitLab: gl,
		Approver: gitlab.SelectingApprover{
			CheckItemsEnabled: func() bool { return cfg().Approval().CheckItems },
			Library:           gitlab.LibraryApprover{GitLab: gl},
			CheckItems:        gitlab.NewCheckItemsApprover(gl, nil),
		},
		Approval:   approval.New(approval.Options{Settings: func() approval.Settings { return approval.SettingsFromConfig(cfg()) }}),
		Config:     cfg,
		RetryDelay: 20 * time.Millisecond,
		Observer:   &testObserver{validated: onValidated},
	}}
}

// testObserver is the tests' flow.Observer: each event calls its
// function when one is set.
type testObserver struct {
	validated    func(ctx context.Context, f store.Flip)
	withdrawn    func(ctx context.Context, p store.WithdrawPlace)
	revoked      func(ctx context.Context, f store.Flip)
	revocation   func(ctx context.Context, r store.RevocationCreated, reason domain.RevokeReason)
	renewalEnded func(ctx context.Context, operationID string, o domain.RenewalOutcome)
	security     func(ctx context.Context, kind string)
}

// observe returns d's testObserver, installing an empty one when d has
// none, so a test sets the events it counts and keeps the others. Set
// them before the engine starts: the flows read them from then on.
func observe(d *flowDeps) *testObserver {
	o, ok := d.Observer.(*testObserver)
	if !ok {
		o = &testObserver{}
		d.Observer = o
	}
	return o
}

func (o *testObserver) Validated(ctx context.Context, f store.Flip) {
	if o.validated != nil {
		o.validated(ctx, f)
	}
}

func (o *testObserver) Withdrawn(ctx context.Context, p store.WithdrawPlace) {
	if o.withdrawn != nil {
		o.withdrawn(ctx, p)
	}
}

func (o *testObserver) Revoked(ctx context.Context, f store.Flip) {
	if o.revoked != nil {
		o.revoked(ctx, f)
	}
}

func (o *testObserver) RevocationCreated(ctx context.Context, r store.RevocationCreated, reason domain.RevokeReason) {
	if o.revocation != nil {
		o.revocation(ctx, r, reason)
	}
}

func (o *testObserver) RenewalEnded(ctx context.Context, operationID string, out domain.RenewalOutcome) {
	if o.renewalEnded != nil {
		o.renewalEnded(ctx, operationID, out)
	}
}

func (o *testObserver) SecurityEvent(ctx context.Context, kind string) {
	if o.security != nil {
		o.security(ctx, kind)
	}
}

func newWorld(t *testing.T, st *store.Store, opts ...worldOpt) *world {
	t.Helper()
	w := &world{t: t, st: st, validated: map[string]int{}, withdrawn: map[store.WithdrawPlace]int{}}
	var handler atomic.Pointer[http.Handler]
	w.cbTS = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if h := handler.Load(); h != nil {
			(*h).ServeHTTP(rw, r)
			return
		}
		http.Error(rw, "not ready", http.StatusServiceUnavailable)
	}))
	t.Cleanup(w.cbTS.Close)

	// The simulator is built before the setup (it needs the simulator's
	// address); the options that shape the simulator are read from a
	// throwaway setup first.
	pre := &worldSetup{ov: map[string]any{}}
	for _, o := range opts {
		o(pre)
	}
	manual := simapproval.Policy{Mode: simapproval.Manual}
	deployDelay := 5 * time.Millisecond
	s, err := sim.New(sim.Config{
		Listen: "127.0.0.1:0", CallbackURLs: []string{w.cbTS.URL}, CallbackToken: e2eToken, WebhookToken: e2eToken,
		ApprovalPolicy: &manual, DeployDelay: &deployDelay, DeliveryBackoffMax: 50 * time.Millisecond,
		GitLab: func(o *simgl.Options) {
			o.MergeabilityDelay = 10 * time.Millisecond
			o.PipelineStartDelay = 2 * time.Millisecond
			o.PipelineDuration = 20 * time.Millisecond
			o.RebaseDuration = 10 * time.Millisecond
			if pre.noGitLabWebhooks {
				o.Deliver = nil
			}
		},
	})
	require.NoError(t, err)
	w.sim = s
	w.simTS = httptest.NewServer(s.Handler())
	t.Cleanup(func() { w.simTS.Close(); _ = s.Close() })

	ws := &worldSetup{ov: e2eOverlay(w.simTS.URL)}
	for _, o := range opts {
		o(ws)
	}
	w.load(ws.ov)

	onValidated := ws.onValidated
	if onValidated == nil {
		onValidated = func(_ context.Context, f store.Flip) {
			w.mu.Lock()
			w.validated[f.OperationID]++
			w.mu.Unlock()
		}
	}
	deps := e2eDeps(st, w.cfg.Load, countingTransport{w}, onValidated)
	if ws.wrapGitLab != nil {
		deps.GitLab = ws.wrapGitLab(deps.GitLab)
	}
	deps.RoundTrigger = ws.roundTrigger
	observe(&deps).withdrawn = func(_ context.Context, p store.WithdrawPlace) {
		w.mu.Lock()
		w.withdrawn[p]++
		w.mu.Unlock()
	}
	if ws.deps != nil {
		ws.deps(&deps)
	}
	w.deps = deps
	if ws.noEngine {
		w.cbs = callbacks.New(deps.Env, deps.Store, nil)
	} else {
		w.startEngine(deps)
	}

	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := httpapi.NewServer(httpapi.Deps{
		Logger: logger, Metrics: metrics.New(logger, "test"), Version: "test",
		Business: httpapi.Business{Config: w, Callbacks: st, Sink: httpapi.NewWorkflowSink(w.cbs)},
	})
	handler.Store(&srv)
	return w
}

// startEngine runs the steps in this process, driven by RunDue.
func (w *world) startEngine(deps flowDeps) {
	w.t.Helper()
	e, err := engine.New(engine.Options{Store: w.st, Owner: "e2e", Workers: 4, QueueSize: 4, Lease: 30 * time.Second,
		PollInterval: time.Hour, MaxRetries: 20})
	require.NoError(w.t, err)
	single.Register(e, single.Steps{Env: deps.Env, Store: deps.Store})
	withdraw.Register(e, withdrawFlow(deps))
	w.eng = e
	w.cbs = callbacks.New(deps.Env, deps.Store, e)
	require.NoError(w.t, e.Start(w.t.Context()))
	w.t.Cleanup(e.Stop)

}

// Current implements httpapi.ConfigSource.
func (w *world) Current() *config.Snapshot { return w.cfg.Load() }

func (w *world) load(ov map[string]any) {
	w.t.Helper()
	mgr, err := config.Load(w.t.Context(), config.Options{Overlay: maps.Clone(ov)})
	require.NoError(w.t, err)
	w.cfg.Store(mgr.Current())
	_ = mgr.Close()
}

// submit writes a request as the HTTP submit does: the operation and its
// binding at the flow's entry state, its first action due at once.
func (w *world) submit(opID, subject, target string, approveFirst bool) {
	w.t.Helper()
	entry := flow.Entry(approveFirst)
	_, err := w.st.OperationSubmit(w.t.Context(), store.OperationSubmitParams{
		Operation: store.OperationCreateParams{
			OperationID: opID, Subject: subject, TargetKey: target, ProjectID: 1, Flow: entry.Flow,
			Step: int(entry.Step), Reason: "e2e", Days: 7, ExpiresAt: time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC),
			Actor: subject, NextAction: entry.Action,
		},
		BindingStatus: entry.Binding,
	})
	require.NoError(w.t, err)
	if w.eng != nil {
		w.eng.Wake()
	}
}

// until drives the engine (RunDue) until cond holds for opID.
func (w *world) until(opID string, what string, cond func(store.Operation, store.Binding) bool) (store.Operation, store.Binding) {
	w.t.Helper()
	var (
		o store.Operation
		b store.Binding
	)
	// A liveness bound, not a latency one: 20 s was exceeded at load 25 on
	// a 2-core machine by requests that then converged.
	deadline := time.Now().Add(time.Minute)
	for {
		if w.eng != nil {
			_, _ = w.eng.RunDue(w.t.Context())
		}
		var err error
		o, err = w.st.OperationGet(w.t.Context(), opID)
		require.NoError(w.t, err)
		b, err = w.st.BindingGet(w.t.Context(), o.Subject, o.TargetKey)
		require.NoError(w.t, err)
		if cond(o, b) {
			return o, b
		}
		if time.Now().After(deadline) {
			hist, _ := w.st.OperationStepList(w.t.Context(), opID)
			for _, h := range hist {
				w.t.Logf("history: %s → %s %s→%s %s: %s", domain.StepStatus(h.FromStep), domain.StepStatus(h.ToStep), h.FromBinding, h.ToBinding, h.Actor, h.Note)
			}
			w.t.Fatalf("%s never reached %s: step %s, binding %s, next %q, last error %q",
				opID, what, domain.StepStatus(o.Step), b.Status, o.NextAction, o.LastError)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// at is a condition: the step and binding given ("" = any binding), the
// row not running.
func at(step domain.StepStatus, binding domain.BindingStatus) func(store.Operation, store.Binding) bool {
	return func(o store.Operation, b store.Binding) bool {
		return domain.StepStatus(o.Step) == step && (binding == "" || b.Status == binding) && o.LeaseOwner == ""
	}
}

// simJSON calls a simulator's HTTP API and decodes the answer into out.
func (w *world) simJSON(method, path string, body any, out any) int {
	w.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(w.t.Context(), method, w.simTS.URL+path, rd)
	require.NoError(w.t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("PRIVATE-TOKEN", "local-maintainer-token")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(w.t, err)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && len(raw) > 0 {
		require.NoError(w.t, json.Unmarshal(raw, out), "%s %s: %s", method, path, raw)
	}
	return resp.StatusCode
}

// approvalOf returns the approval system's approvals for opID.
func (w *world) approvalsOf(opID string) []approval.Approval {
	w.t.Helper()
	var out struct {
		Items []approval.Approval `json:"items"`
	}
	w.simJSON(http.MethodGet, "/approval/v1/approvals?operationId="+opID, nil, &out)
	return out.Items
}

// decide decides opID's approval in the approval system, which calls back.
func (w *world) decide(opID, verb string) {
	w.t.Helper()
	var as []approval.Approval
	require.Eventually(w.t, func() bool { as = w.approvalsOf(opID); return len(as) > 0 }, 10*time.Second, 10*time.Millisecond)
	require.Len(w.t, as, 1, "exactly one approval per operation")
	code := w.simJSON(http.MethodPost, "/approval/_control/approvals/"+as[0].ApprovalID+"/"+verb, map[string]any{}, nil)
	require.Equal(w.t, http.StatusOK, code, "decide %s", verb)
}

// mrsOf lists the MRs of opID's branch, any state.
func (w *world) mrsOf(opID string) []map[string]any {
	w.t.Helper()
	var out []map[string]any
	w.simJSON(http.MethodGet, "/gitlab/api/v4/projects/1/merge_requests?state=all&source_branch="+
		urlQuery(flow.BranchName(opID)), nil, &out)
	return out
}

// validatedOnce waits for the success side effect of id, which runs after
// the flip's commit (so it may trail the VALIDATED state the test saw: the
// flip may be a deploy callback's, in an HTTP handler goroutine), and
// checks it ran exactly once. Read it through this, never once.
func (w *world) validatedOnce(id string) {
	w.t.Helper()
	require.Eventually(w.t, func() bool { return w.validations(id) >= 1 }, 10*time.Second, 5*time.Millisecond,
		"%s: no success side effect", id)
	require.Equal(w.t, 1, w.validations(id), "%s: one success side effect", id)
}

// validations is how often the success side effect ran for opID.
func (w *world) validations(opID string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.validated[opID]
}

// fileOnMain reads the binding file of target on main.
func (w *world) fileOnMain(target string) string {
	w.t.Helper()
	req, _ := http.NewRequestWithContext(w.t.Context(), http.MethodGet,
		w.simTS.URL+"/gitlab/api/v4/projects/1/repository/files/bindings%2F"+target+".yaml/raw?ref=main", nil)
	req.Header.Set("PRIVATE-TOKEN", "local-maintainer-token")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(w.t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func urlQuery(s string) string {
	var b bytes.Buffer
	for _, c := range []byte(s) {
		if c == '/' {
			b.WriteString("%2F")
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// revoker gives access back and revokes it over d, as the API does.
func revoker(d flowDeps) lifecycle.Revoker {
	return lifecycle.Revoker{Env: d.Env, Store: d.Store}
}

// batchFlow is the batch path over d.
func batchFlow(d flowDeps) batch.Flow {
	return batch.Flow{Env: d.Env, Store: d.Store}
}

// flowDeps are one process's flows' dependencies over the real adapters:
// the shared Env and the store each flow reads through its own interface.
type flowDeps struct {
	flow.Env
	Store *store.Store
}

// withdrawFlow is the withdrawal over d.
func withdrawFlow(d flowDeps) withdraw.Flow {
	return withdraw.Flow{Env: d.Env, Store: d.Store}
}
