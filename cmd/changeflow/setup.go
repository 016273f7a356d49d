package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"changeflow/internal/config"
	"changeflow/internal/doctor"
	"changeflow/internal/store"
)

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
