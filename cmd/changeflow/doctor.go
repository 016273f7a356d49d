package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"changeflow/internal/config"
	"changeflow/internal/doctor"
	"changeflow/internal/gitlab"
)

// errChecksFailed is doctor's answer when a check failed: the process
// exits non-zero, so a deployment script stops.
var errChecksFailed = errors.New("deployment checks failed")

// runDoctor is `changeflow doctor --config FILE [--json]`: the
// deployment checks of GET /ops/checks, run against the configuration
// and the real GitLab, printed in words (or as the endpoint's JSON). It
// exits non-zero when a check fails; warnings alone pass. It opens no
// database: it checks what changeflow would run on, not what it stored.
func runDoctor(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var asJSON bool
	rest := args[:0:0]
	for _, a := range args {
		if a == "--json" || a == "-json" {
			asJSON = true
			continue
		}
		rest = append(rest, a)
	}
	flags, err := parseCommon("doctor", rest, stderr)
	if err != nil {
		return err
	}
	file := flags.configFile
	if flags.local && file == "" {
		if file, err = prepareLocal(localDir); err != nil {
			return fmt.Errorf("prepare local profile: %w", err)
		}
	}
	if file == "" {
		file = getenv("CHANGEFLOW_CONFIG")
	}
	// Fallbacks and refusals are findings here; the log says only what
	// is worse than that.
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	cfg, err := config.Load(ctx, config.Options{File: file, Getenv: getenv, Logger: logger, RefuseWeakSecrets: !flags.local})
	if err != nil {
		return fmt.Errorf("load configuration: %w", err)
	}
	defer cfg.Close()
	r := deploymentChecks(cfg, flags.local, logger)(ctx)
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return err
		}
	} else {
		printReport(stdout, r)
	}
	if r.Status == doctor.StatusFail {
		n := 0
		for _, f := range r.Findings {
			if f.Status == doctor.StatusFail {
				n++
			}
		}
		return fmt.Errorf("%w: %d to fix (above)", errChecksFailed, n)
	}
	return nil
}

// deploymentChecks is the one implementation behind `changeflow doctor`
// and GET /ops/checks: each run reads the current configuration and asks
// GitLab through a client of its own — its own breaker, so an operator's
// checks can neither open the workflow's breaker nor be refused by it,
// and no cached answer, so a token revoked since the last run shows.
func deploymentChecks(cfg *config.Manager, local bool, logger *slog.Logger) func(context.Context) doctor.Report {
	return func(ctx context.Context) doctor.Report {
		snap := cfg.Current()
		g := gitlab.New(gitlab.Options{Settings: func() gitlab.Settings { return gitlab.SettingsFromConfig(snap) },
			Logger: logger, BreakerName: "gitlab-checks"})
		return doctor.Check(ctx, doctor.Options{Snapshot: snap, Local: local, GitLab: g})
	}
}

// printReport writes the report for a person at a terminal: the verdict
// first, then each finding with what was found and what to change.
func printReport(w io.Writer, r doctor.Report) {
	count := map[doctor.Status]int{}
	for _, f := range r.Findings {
		count[f.Status]++
	}
	verdict := "everything checked is as it should be"
	switch r.Status {
	case doctor.StatusFail:
		verdict = fmt.Sprintf("%d problem%s to fix", count[doctor.StatusFail], plural(count[doctor.StatusFail]))
		if n := count[doctor.StatusWarn]; n > 0 {
			verdict += fmt.Sprintf(", %d warning%s", n, plural(n))
		}
	case doctor.StatusWarn:
		verdict = fmt.Sprintf("no problem, %d warning%s", count[doctor.StatusWarn], plural(count[doctor.StatusWarn]))
	}
	fmt.Fprintf(w, "changeflow doctor: %s (%d checks, %s)\n", verdict, len(r.Findings), r.CheckedAt.Format("2006-01-02 15:04:05 UTC"))
	for _, f := range r.Findings {
		where := ""
		if f.Project != "" {
			where = " (project " + f.Project + ")"
		}
		fmt.Fprintf(w, "\n%-5s %s%s\n", strings.ToUpper(string(f.Status)), f.Title, where)
		fmt.Fprintf(w, "      found:  %s\n", f.Detail)
		if f.Fix != "" {
			fmt.Fprintf(w, "      change: %s\n", f.Fix)
		}
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
