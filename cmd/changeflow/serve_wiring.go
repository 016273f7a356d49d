package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/gitlab"
	"changeflow/internal/httpapi"
	"changeflow/internal/identity"
	"changeflow/internal/metrics"
	"changeflow/internal/store"
)

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

// newResolver builds the one identity resolver: the directory
// file when configured, auth-proxy headers from identity.trustedProxies
// (read per request, so a reload applies), and OIDC bearer tokens when
// oidc.issuer is set.
//
// It returns the directory too (nil when none is configured): the e-mail
// channel finds people's addresses in it.
func newResolver(cfg *config.Manager, logger *slog.Logger) (*identity.Resolver, identity.DirectorySource, error) {
	var dir identity.DirectorySource // nil: no directory configured
	if path := cfg.Current().Endpoints().DirectoryFile; path != "" {
		fd, err := identity.OpenDirectory(path, identity.FileDirectoryOptions{Logger: logger})
		if err != nil {
			return nil, nil, fmt.Errorf("identity directory: %w", err)
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
	}), dir, nil
}

// storeAuditor adapts the store's AuditInsert to httpapi.Auditor: an
// operator's action is recorded as it stands, with no event of its own
// (the changes it makes write theirs).
type storeAuditor struct{ st *store.Store }

func (a storeAuditor) Audit(ctx context.Context, e httpapi.AuditEntry) error {
	_, err := a.st.AuditInsert(ctx, store.AuditInsertParams{
		Key: e.Key, Actor: e.Actor, Action: e.Action, Resource: e.Resource, Params: e.Params, Outcome: e.Outcome,
	})
	return err
}

// gitlabClients builds the workflow's GitLab client and the preview's. Both
// use the same settings (base URL, the committer's token, deadlines), but
// each has its own circuit breaker: the preview is a read any logged-in
// user can trigger, and if its failures counted in the workflow's breaker,
// users could open it and stall every MR (docs/security.md, "Rate limits").
// The cost is a second HTTP connection pool to GitLab. They share one
// Pacer: gitlab.rateLimit.* is this instance's budget towards GitLab, and
// GitLab counts both clients' calls against the same bot account.
func gitlabClients(settings func() gitlab.Settings, logger *slog.Logger, onRateLimited func(kind string)) (workflowClient, previewClient *gitlab.Client) {
	pacer := gitlab.NewPacer()
	workflowClient = gitlab.New(gitlab.Options{Settings: settings, Logger: logger, Pacer: pacer, OnRateLimited: onRateLimited})
	previewClient = gitlab.New(gitlab.Options{Settings: settings, Logger: logger, BreakerName: "gitlab-preview", Pacer: pacer, OnRateLimited: onRateLimited})
	return workflowClient, previewClient
}
