package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"time"

	"changeflow/internal/approval"
	"changeflow/internal/config"
	"changeflow/internal/doctor"
	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/gitlab"
	"changeflow/internal/httpapi"
	"changeflow/internal/identity"
	"changeflow/internal/metrics"
	"changeflow/internal/permission"
	"changeflow/internal/ratelimit"
	"changeflow/internal/store"
	"changeflow/internal/workflow/batch"
	"changeflow/internal/workflow/callbacks"
	"changeflow/internal/workflow/flow"
	"changeflow/internal/workflow/lifecycle"
	"changeflow/internal/workflow/reconcile"
	"changeflow/internal/workflow/single"
	"changeflow/internal/workflow/withdraw"
)

// runServe is the composition root: configuration, storage, metrics and
// the HTTP server are built here, explicitly, and torn down in reverse on
// cancellation (SIGINT/SIGTERM in main).
func runServe(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	flags, err := parseCommon("serve", args, stderr)
	if err != nil {
		return err
	}
	env, err := setUp(ctx, flags, getenv, stderr)
	if err != nil {
		return err
	}
	defer env.close()
	logger, cfg, st := env.logger, env.cfg, env.store
	// What the configuration alone says about the deployment (a loopback
	// trusted for login headers, a callback kind without a token) is
	// logged at start and after each reload that changes it; the GitLab
	// half needs calls and is `changeflow doctor` / GET /ops/checks.
	warnDeployment(cfg.Current(), flags.local, logger)
	cfg.Subscribe(func(old, cur *config.Snapshot) {
		if !slices.Equal(doctor.LoopbackTrusted(old), doctor.LoopbackTrusted(cur)) {
			warnDeployment(cur, flags.local, logger)
		}
	})

	// Both ports are taken before anything else happens, so a busy port
	// ends the program at once with an error that says which setting to
	// change, instead of after migrations with a bare "address in use".
	ln, err := listenOn(ctx, cfg.Current().Server().Listen, "--listen", config.KeyServerListen)
	if err != nil {
		return err
	}
	defer ln.Close() // after Serve this is a no-op; before it, it frees the port
	if cfg.Current().Endpoints().SimEmbedded {
		warnSimURLs(cfg.Current(), logger)
		sims, err := startEmbeddedSim(ctx, cfg.Current(), "http://"+ln.Addr().String(), logger)
		if err != nil {
			return err
		}
		defer sims.Close()
		fmt.Fprintf(stdout, "changeflow: simulators on %s\n", sims.URL())
	}

	if err := prepareSchema(ctx, st, logger, flags.noMigrate); err != nil {
		return err
	}

	if err := cfg.Watch(ctx); err != nil {
		return fmt.Errorf("watch configuration: %w", err)
	}

	resolver, err := newResolver(cfg, logger)
	if err != nil {
		return err
	}
	perms := permission.New(permission.Options{
		Settings: func() permission.Settings { return permission.SettingsFromConfig(cfg.Current()) },
	})

	// Rate limiting: one limiter per process, its idle
	// buckets swept by the janitor; the quota heartbeats this instance so
	// the optional global quota can divide a limit by the live instances.
	// The defers run before env.close closes the store.
	limiter := ratelimit.New()
	janitor := ratelimit.NewJanitor(limiter, 0, nil)
	quota := ratelimit.NewQuota(ratelimit.QuotaOptions{Store: st, Config: cfg, Logger: logger})

	// Expired idempotency records are removed in bounded chunks on the
	// records' own expiry index.
	idemCleanup := httpapi.NewIdempotencyCleanup(st, cfg, logger)
	gl, glPreview := gitlabClients(func() gitlab.Settings { return gitlab.SettingsFromConfig(cfg.Current()) }, logger)

	m := metrics.New(logger, version)

	// The workflow: durable steps claimed from the database by every
	// instance, the callback sink that applies approval and deploy
	// callbacks, and the success metric counted once per flip (I9).
	appr := approval.New(approval.Options{Settings: func() approval.Settings { return approval.SettingsFromConfig(cfg.Current()) }})
	engine, err := newEngine(cfg, st, logger)
	if err != nil {
		return err
	}
	flowEnv := flow.Env{
		GitLab: gl, Approval: appr, Config: cfg.Current, Logger: logger,
		Approver: gitlab.SelectingApprover{
			CheckItemsEnabled: func() bool { return cfg.Current().Approval().CheckItems },
			Library:           gitlab.LibraryApprover{GitLab: gl},
			CheckItems:        gitlab.NewCheckItemsApprover(gl, logger),
		},
		Observer: metricsObserver{m: m, st: st, logger: logger},
		// Admissions and settlements schedule their project's round here;
		// the rounds service below runs them (docs/flows/batch.md, "When a
		// round runs").
		RoundTrigger: flow.NewRoundTrigger(nil),
	}
	single.Register(engine, single.Steps{Env: flowEnv, Store: st})
	withdrawFlow := withdraw.Flow{Env: flowEnv, Store: st}
	withdraw.Register(engine, withdrawFlow)
	batchFlow := batch.Flow{Env: flowEnv, Store: st}
	batch.Register(engine, batchFlow)
	// Reconciliation of lost deploy callbacks on every instance
	// every reconcile.interval; its flips count the same validated metric
	// through flowEnv.Observer, once per flip. Each run also applies
	// approval decisions recorded but never applied (a crash between the
	// two).
	reconciler := reconcile.New(flowEnv, st)
	reconciler.Wake = engine.Wake
	// The expiry scan on every instance every expiry.interval: each
	// expired grant's revocation is created once however many instances
	// scan at once (docs/flows/lifecycle.md, "Revocation (access ends)").
	expiry := lifecycle.NewExpiry(flowEnv, st)
	expiry.Wake = engine.Wake
	// Batch rounds and the batch timeout sweep on every instance
	// every batch.interval for every gitlab.projects entry; overlapping
	// rounds of several instances are answered by the project's slot.
	rounds := batch.NewRounds(batchFlow, engine)
	// The audit chain on every instance (docs/audit.md): new records
	// chained every audit.chainInterval, retention hourly; each round has
	// one winner however many instances run it.
	auditChain := newAuditChain(cfg, st, flags.local, logger)
	// Every background part starts here, in this order, and stops in the
	// reverse order before the store closes (the defers run before
	// env.close); each Stop waits for its pass in progress.
	stop, err := startParts(ctx, []part{
		{"rate-limit janitor", janitor}, {"instance heartbeat", quota}, {"idempotency cleanup", idemCleanup},
		{"workflow engine", engine}, {"reconciliation", reconciler}, {"expiry scan", expiry}, {"batch rounds", rounds},
		{"audit chain", auditChain},
	})
	if err != nil {
		return err
	}
	defer stop()
	cbs := callbacks.New(flowEnv, st, engine)
	// The live status streams' one poller (docs/api.md, "Live status");
	// closed when the server shuts down, so open streams end and
	// Shutdown does not wait for them.
	events := httpapi.NewEventFeed(st, cfg.Current, logger)
	defer events.Close()
	handler := httpapi.NewServer(httpapi.Deps{
		Logger:    logger,
		Metrics:   m,
		Ready:     st,
		Version:   version,
		RateLimit: httpapi.RateLimiting{Limiter: limiter, Config: cfg, Quota: quota},
		Identity:  resolver,
		Hosts:     func() httpapi.HostPolicy { return httpapi.HostPolicyFromConfig(cfg.Current()) },
		Authz:     httpapi.Authorization{Config: cfg, Permissions: perms, Auditor: storeAuditor{st}},
		Business: httpapi.Business{
			Config: cfg, Requests: st, Ops: st, Callbacks: st, Files: glPreview,
			Sink:         httpapi.NewWorkflowSink(cbs),
			Work:         engine,
			Withdraw:     withdraw.Withdrawer{Flow: withdrawFlow, Engine: engine},
			OpsActions:   httpapi.WorkflowOps{Store: st, Reconciler: reconciler, Callbacks: cbs, Expiry: expiry, Engine: engine, Env: flowEnv},
			BatchActions: httpapi.WorkflowBatchOps{Rounds: rounds, Batch: batchFlow},
			Events:       events,
			Audit:        auditChain,
			Revoker:      httpapi.WorkflowRevoker{Revoker: lifecycle.Revoker{Env: flowEnv, Store: st}, Engine: engine},
			Checks:       deploymentChecks(cfg, flags.local, logger),
		},
	})

	sc := cfg.Current().Server()
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: sc.ReadHeaderTimeout,
		ReadTimeout:       sc.ReadTimeout,
		WriteTimeout:      sc.WriteTimeout,
		IdleTimeout:       sc.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	srv.RegisterOnShutdown(events.Close)
	// The address line goes to stdout so scripts and tests that listen on
	// port 0 can find the server; everything else is structured logs.
	fmt.Fprintf(stdout, "changeflow: serving on http://%s\n", ln.Addr())
	logger.Info("serving", "addr", ln.Addr().String(), "version", version,
		"instance", cfg.Current().Instance().ID)

	return serveUntilDone(ctx, srv, ln, cfg, logger)
}

// prepareSchema migrates the database, or with noMigrate waits until
// another process (a designated `changeflow migrate`) has: this binary
// must not start on a schema it does not expect.
func prepareSchema(ctx context.Context, st *store.Store, logger *slog.Logger, noMigrate bool) error {
	if noMigrate {
		return waitForSchema(ctx, st, logger, time.Second)
	}
	applied, err := st.Migrate(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if len(applied) > 0 {
		logger.Info("migrations applied", "versions", applied)
	}
	return nil
}

// serveUntilDone serves ln until ctx is cancelled, then shuts down
// gracefully: stop accepting, let in-flight requests finish within
// server.shutdownTimeout, then close the rest.
func serveUntilDone(ctx context.Context, srv *http.Server, ln net.Listener, cfg *config.Manager, logger *slog.Logger) error {
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	select {
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}

	// The context is fresh because ctx is already cancelled.
	timeout := cfg.Current().Server().ShutdownTimeout
	logger.Info("shutting down", "timeout", timeout)
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		logger.Warn("graceful shutdown incomplete; closing connections", "err", err)
		_ = srv.Close()
	}
	if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	logger.Info("stopped")
	return nil
}

// environment is what every command that touches the database sets up.
type environment struct {
	logger *slog.Logger
	cfg    *config.Manager
	store  *store.Store
}

func (e *environment) close() {
	if e.store != nil {
		if err := e.store.Close(); err != nil {
			e.logger.Warn("close database", "err", err)
		}
	}
	if e.cfg != nil {
		if err := e.cfg.Close(); err != nil {
			e.logger.Warn("close configuration", "err", err)
		}
	}
}

// metricsObserver counts what the flows' commits changed in the business
// metrics; the flows tell it each event once, after its commit (I9).
type metricsObserver struct {
	m      *metrics.Metrics
	st     *store.Store
	logger *slog.Logger
}

// Validated counts a grant in effect.
func (o metricsObserver) Validated(_ context.Context, f store.Flip) {
	o.m.RequestValidated(f.TargetKey)
}

// Withdrawn counts a withdrawal by where the request stood.
func (o metricsObserver) Withdrawn(_ context.Context, p store.WithdrawPlace) {
	o.m.RequestWithdrawn(string(p))
}

// Revoked counts a removal confirmed, with its lag behind the expiry. The
// lag is read from the row the flip wrote: both ends are database times
// (expiresAt, and updated_at at the flip).
func (o metricsObserver) Revoked(ctx context.Context, f store.Flip) {
	op, err := o.st.OperationGet(ctx, f.OperationID)
	if err != nil {
		o.logger.Warn("revocation metric", "operation", f.OperationID, "err", err)
		return
	}
	b, err := o.st.BindingGetByOperation(ctx, f.OperationID)
	if err != nil {
		o.logger.Warn("revocation metric", "operation", f.OperationID, "err", err)
		return
	}
	o.m.RevocationDone(string(op.RevokeReason), b.UpdatedAt.Sub(b.ExpiresAt))
}

// RevocationCreated counts a revocation by its reason.
func (o metricsObserver) RevocationCreated(_ context.Context, _ store.RevocationCreated, reason domain.RevokeReason) {
	o.m.RevocationCreated(string(reason))
}

// RenewalEnded counts a renewal's end by its outcome.
func (o metricsObserver) RenewalEnded(_ context.Context, _ string, outcome domain.RenewalOutcome) {
	o.m.RenewalEnded(string(outcome))
}

// SecurityEvent counts a security event by its kind.
func (o metricsObserver) SecurityEvent(_ context.Context, kind string) { o.m.SecurityEvent(kind) }

// newEngine builds the workflow engine from workflow.*: the pool's size is
// fixed at start (workflow.workers, workflow.queueSize are restart-only);
// the lease and the idle poll interval are read from the current snapshot
// at every claim and before every idle wait, so a reload applies them
// without a restart. A changed workflow.pollInterval also wakes the
// engine, so a wait started under a long old interval does not delay the
// new one.
func newEngine(cfg *config.Manager, st *store.Store, logger *slog.Logger) (*engine.Engine, error) {
	wfc := cfg.Current().Workflow()
	eng, err := engine.New(engine.Options{
		Store: st, Owner: cfg.Current().Instance().ID,
		Workers: wfc.Workers, QueueSize: wfc.QueueSize, Lease: wfc.LeaseDuration,
		LeaseSource:        func() time.Duration { return cfg.Current().Workflow().LeaseDuration },
		PollInterval:       wfc.PollInterval,
		PollIntervalSource: func() time.Duration { return cfg.Current().Workflow().PollInterval },
		Logger:             logger,
	})
	if err != nil {
		return nil, fmt.Errorf("workflow engine: %w", err)
	}
	cfg.Subscribe(func(old, cur *config.Snapshot) {
		if old.Workflow().PollInterval != cur.Workflow().PollInterval {
			eng.Wake()
		}
	})
	return eng, nil
}

// setUp loads configuration (preparing the local profile when asked),
// builds the logger whose level follows log.level across reloads, and
// opens the database.
func setUp(ctx context.Context, flags commonFlags, getenv func(string) string, stderr io.Writer) (*environment, error) {
	level := new(slog.LevelVar)
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))

	file := flags.configFile
	if flags.local && file == "" {
		f, err := prepareLocal(localDir)
		if err != nil {
			return nil, fmt.Errorf("prepare local profile: %w", err)
		}
		file = f
	}
	if file == "" {
		file = getenv("CHANGEFLOW_CONFIG")
	}
	// Outside the local profile a weak token is refused (it falls back to
	// unset, and serve will not start on it); the local profile runs on the
	// simulators' published tokens by design.
	cfg, err := config.Load(ctx, config.Options{File: file, Getenv: getenv, Logger: logger, Overlay: flags.overlay(),
		RefuseWeakSecrets: !flags.local})
	if err != nil {
		return nil, fmt.Errorf("load configuration: %w", err)
	}
	env := &environment{logger: logger, cfg: cfg}
	// Before the database is opened, so the refusal is the whole answer.
	if flags.command == "serve" && !flags.local {
		if err := refuseWeakSecrets(cfg.Current()); err != nil {
			env.close()
			return nil, err
		}
	}
	lv, _ := cfg.Current().LogLevel()
	level.Set(lv)
	cfg.Subscribe(func(_, s *config.Snapshot) {
		lv, _ := s.LogLevel()
		level.Set(lv)
	})

	db := cfg.Current().Database()
	st, err := store.Open(ctx, db.Driver, db.DSN,
		store.WithLogger(logger), store.WithMaxOpenConns(db.MaxOpenConns), store.WithSyncWait(db.SyncWait),
		store.WithPoolLimits(db.MaxIdleConns, db.ConnMaxLifetime, db.ConnMaxIdleTime))
	if err != nil {
		env.close()
		return nil, fmt.Errorf("open %s database %s: %w", db.Driver, store.RedactDSN(db.Driver, db.DSN), err)
	}
	env.store = st
	return env, nil
}

// warnDeployment logs each configuration finding that is not ok, at
// WARN, naming its item and what to change.
func warnDeployment(snap *config.Snapshot, local bool, logger *slog.Logger) {
	for _, f := range doctor.ConfigFindings(snap, local) {
		if f.Status != doctor.StatusOK {
			logger.Warn("deployment check: "+f.Detail, "check", f.ID, "key", f.Subject, "status", string(f.Status), "fix", f.Fix)
		}
	}
}

// errWeakSecrets marks a start refused because of weak tokens.
var errWeakSecrets = errors.New("refusing to start on unsafe secrets")

// refuseWeakSecrets is the start-up half of the token rules (the reload
// half is the configuration's fallback): outside --local the service does
// not start while a token is a simulator's well-known value, too short, or
// shared with another token, and says which item and how to fix it.
func refuseWeakSecrets(snap *config.Snapshot) error {
	refused := snap.RefusedSecrets()
	if len(refused) == 0 {
		return nil
	}
	var b strings.Builder
	for _, r := range refused {
		fmt.Fprintf(&b, "\n  %s %s; %s", r.Key, r.Problem, r.Fix)
	}
	return fmt.Errorf("%w (outside --local every token must be a secret of its own):%s", errWeakSecrets, b.String())
}

// newResolver builds the one identity resolver: the directory
// file when configured, auth-proxy headers from identity.trustedProxies
// (read per request, so a reload applies), and OIDC bearer tokens when
// oidc.issuer is set.
func newResolver(cfg *config.Manager, logger *slog.Logger) (*identity.Resolver, error) {
	var dir identity.DirectorySource // nil: no directory configured
	if path := cfg.Current().Endpoints().DirectoryFile; path != "" {
		fd, err := identity.OpenDirectory(path, identity.FileDirectoryOptions{Logger: logger})
		if err != nil {
			return nil, fmt.Errorf("identity directory: %w", err)
		}
		dir = fd
	}
	var verifier *identity.OIDC
	if issuer := cfg.Current().Endpoints().OIDCIssuer; issuer != "" {
		verifier = identity.NewOIDC(identity.OIDCOptions{
			Issuer:   issuer,
			Policy:   func() identity.OIDCPolicy { return identity.PolicyFromConfig(cfg.Current()) },
			Settings: func() identity.DependencySettings { return identity.SettingsFromConfig(cfg.Current(), "oidc") },
			Logger:   logger,
		})
	}
	return identity.NewResolver(identity.Options{
		Directory: dir,
		TrustedProxies: func() []netip.Prefix {
			p, _ := cfg.Current().IdentityTrustedProxies()
			return p
		},
		OIDC:   verifier,
		Logger: logger,
	}), nil
}

// storeAuditor adapts the store's AuditInsert to httpapi.Auditor; the two
// record types have the same fields, so a conversion is the whole adapter.
type storeAuditor struct{ st *store.Store }

func (a storeAuditor) Audit(ctx context.Context, e httpapi.AuditEntry) error {
	_, err := a.st.AuditInsert(ctx, store.AuditInsertParams(e))
	return err
}

// listenOn listens on addr; a port another process holds is reported with
// the flag and the configuration key that move it.
func listenOn(ctx context.Context, addr, flagName, key string) (net.Listener, error) {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, busyPortError(err, addr, flagName, key)
	}
	return ln, nil
}

// busyPortError names the setting to change when addr could not be
// listened on; any other listen error is wrapped as it is.
func busyPortError(err error, addr, flagName, key string) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("port %s is already in use by another process: stop it, or choose another address with %s ADDR or the %s key (%s): %w",
			addr, flagName, key, config.EnvName(key), err)
	}
	return fmt.Errorf("listen on %s (%s, %s): %w", addr, flagName, key, err)
}

// warnSimURLs logs each dependency URL that is set explicitly but does not
// point at the embedded simulators: usually a configuration file written
// before the simulators moved (the service would keep talking to whatever
// listens on the old port).
func warnSimURLs(snap *config.Snapshot, logger *slog.Logger) {
	base := config.LocalURL(snap.Endpoints().SimListen)
	if base == "" {
		return
	}
	for _, key := range []string{config.KeyGitLabBaseURL, config.KeyApprovalBaseURL, config.KeyPermissionBaseURL, config.KeyOIDCIssuer} {
		v, r := snap.String(key)
		if v == "" || r.Source == config.SourceDefault || strings.HasPrefix(v, base+"/") {
			continue
		}
		logger.Warn("a dependency URL is set explicitly and does not point at the embedded simulators; remove it to follow sim.listen",
			"key", key, "value", v, "simulators", base, "source", r.Source)
	}
}

// waitForSchema returns once the database's schema is the one this binary
// expects, checking every poll; `serve --no-migrate` starts with it. It
// logs once while it waits, and fails only when ctx ends.
func waitForSchema(ctx context.Context, st *store.Store, logger *slog.Logger, poll time.Duration) error {
	t := time.NewTicker(poll)
	defer t.Stop()
	logged := false
	for {
		cur, latest, pending, err := st.MigrationStatus(ctx)
		switch {
		case err == nil && !pending && cur == latest:
			logger.Info("schema is current (--no-migrate)", "version", cur)
			return nil
		case !logged:
			logger.Info("waiting for the schema to be migrated (--no-migrate)", "version", cur, "expected", latest, "err", err)
			logged = true
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for migrations (--no-migrate): %w", ctx.Err())
		case <-t.C:
		}
	}
}

// gitlabClients builds the workflow's GitLab client and the preview's. Both
// use the same settings (base URL, the committer's token, deadlines), but
// each has its own circuit breaker: the preview is a read any logged-in
// user can trigger, and if its failures counted in the workflow's breaker,
// users could open it and stall every MR (docs/security.md, "Rate limits").
// The cost is a second HTTP connection pool to GitLab.
func gitlabClients(settings func() gitlab.Settings, logger *slog.Logger) (workflowClient, previewClient *gitlab.Client) {
	workflowClient = gitlab.New(gitlab.Options{Settings: settings, Logger: logger})
	previewClient = gitlab.New(gitlab.Options{Settings: settings, Logger: logger, BreakerName: "gitlab-preview"})
	return workflowClient, previewClient
}

// part is a background part of a serving process: started once, stopped
// once, Stop waiting for its work in progress.
type part struct {
	name string
	svc  interface {
		Start(context.Context) error
		Stop()
	}
}

// startParts starts parts in order and returns the function that stops
// them in the reverse order. If one fails to start, those started before
// it are stopped and the error names it.
func startParts(ctx context.Context, parts []part) (stop func(), err error) {
	started := make([]part, 0, len(parts))
	stop = func() {
		for i := len(started) - 1; i >= 0; i-- {
			started[i].svc.Stop()
		}
	}
	for _, p := range parts {
		if err := p.svc.Start(ctx); err != nil {
			stop()
			return nil, fmt.Errorf("start %s: %w", p.name, err)
		}
		started = append(started, p)
	}
	return stop, nil
}
