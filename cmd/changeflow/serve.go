package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"syscall"
	"time"

	"changeflow/internal/approval"
	"changeflow/internal/config"
	"changeflow/internal/doctor"
	"changeflow/internal/gitlab"
	"changeflow/internal/httpapi"
	"changeflow/internal/metrics"
	"changeflow/internal/notify/outbox"
	"changeflow/internal/permission"
	"changeflow/internal/ratelimit"
	"changeflow/internal/store"
	"changeflow/internal/workflow/batch"
	"changeflow/internal/workflow/callbacks"
	"changeflow/internal/workflow/flow"
	"changeflow/internal/workflow/lifecycle"
	"changeflow/internal/workflow/reconcile"
	"changeflow/internal/workflow/review"
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
	simSMTP := ""    // the embedded simulators' SMTP server, when they run
	if cfg.Current().Endpoints().SimEmbedded {
		warnSimURLs(cfg.Current(), logger)
		sims, err := startEmbeddedSim(ctx, cfg.Current(), "http://"+ln.Addr().String(), logger)
		if err != nil {
			return err
		}
		defer sims.Close()
		simSMTP = sims.SMTPAddr()
		fmt.Fprintf(stdout, "changeflow: simulators on %s\n", sims.URL())
	}

	if err := prepareSchema(ctx, st, logger, flags.noMigrate); err != nil {
		return err
	}

	if err := cfg.Watch(ctx); err != nil {
		return fmt.Errorf("watch configuration: %w", err)
	}

	resolver, directory, err := newResolver(cfg, logger)
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
	m := metrics.New(logger, version)
	gl, glPreview := gitlabClients(func() gitlab.Settings { return gitlab.SettingsFromConfig(cfg.Current()) }, logger, m.GitLabRateLimited)

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
	// Access reviews on every instance every expiry.interval: scheduled
	// campaigns opened, due ones closed with their default, revokes'
	// removals started — each once (docs/reviews.md).
	revoker := httpapi.WorkflowRevoker{Revoker: lifecycle.Revoker{Env: flowEnv, Store: st}, Engine: engine}
	reviews := &review.Reviews{Store: st, Revoker: revoker, Config: cfg.Current, Logger: logger, Wake: engine.Wake}
	// The audit chain on every instance (docs/audit.md): new records
	// chained every audit.chainInterval, retention hourly; each round has
	// one winner however many instances run it.
	auditChain := newAuditChain(cfg, st, flags.local, logger)
	// The binding files' history into the access history on every
	// instance every access.repoScanInterval; each commit is applied by
	// one of them.
	repoAccess, accessCheck := newRepoAccess(cfg, st, glPreview, logger)
	// Notifications (docs/notifications.md): the outbox's events, written
	// by the transactions above, delivered by every instance through the
	// channels notify.* configures.
	channels, err := buildChannels(cfg.Current(), simSMTP, directoryEmails(directory), storePreferences(st, cfg.Current), nil)
	if err != nil {
		return err
	}
	notifyMetrics := outbox.NewMetrics()
	if err := m.Register(notifyMetrics.Collectors()...); err != nil {
		return err
	}
	notifier := newNotifications(cfg, st, channels, "http://"+ln.Addr().String(), notifyMetrics, logger)
	// Every background part starts here, in this order, and stops in the
	// reverse order before the store closes (the defers run before
	// env.close); each Stop waits for its pass in progress.
	stop, err := startParts(ctx, []part{
		{"rate-limit janitor", janitor}, {"instance heartbeat", quota}, {"idempotency cleanup", idemCleanup},
		{"workflow engine", engine}, {"reconciliation", reconciler}, {"expiry scan", expiry}, {"batch rounds", rounds},
		{"audit chain", auditChain},
		{"review pass", reviews},
		{"repository access history", repoAccess},
		{"notifications", notifier},
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
			AccessCheck:  accessCheck,
			Revoker:      revoker,
			Reviews:      st, ReviewRemovals: reviews, Preferences: st, Notifications: st,
			Checks: deploymentChecks(cfg, flags.local, logger),
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
