package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"changeflow/internal/config"
)

// runHealthcheck asks a running instance whether it is up and exits 0 or
// 1. It exists for images without a shell (the FROM scratch image has no
// curl or wget): the container runtime's health check runs the binary
// itself. By default it asks GET /readyz — database reachable and schema
// current — on the address server.listen names, read from the same
// configuration sources as serve (--config, CHANGEFLOW_CONFIG,
// CHANGEFLOW_SERVER_LISTEN); a wildcard host is asked over loopback.
// --live asks /healthz instead (process up), for a check that must not
// fail while the database is away.
func runHealthcheck(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("config", "", "configuration file (YAML) naming server.listen")
	target := fs.String("url", "", "base URL to check instead of http://<server.listen>")
	live := fs.Bool("live", false, "check /healthz (process up) instead of /readyz (database and schema)")
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait for the answer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments: %s", errUsage, strings.Join(fs.Args(), " "))
	}
	base := strings.TrimRight(*target, "/")
	if base == "" {
		if *file == "" {
			*file = getenv("CHANGEFLOW_CONFIG")
		}
		// Only server.listen is needed: no database, no etcd, no other
		// item's validation (the probe's environment need not hold the
		// DSN or the tokens); configuration warnings are serve's to print.
		listen, err := config.Listen(config.Options{File: *file, Getenv: getenv, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return fmt.Errorf("healthcheck: %w", err)
		}
		if base = config.LocalURL(listen); base == "" {
			return fmt.Errorf("server.listen %q cannot be checked (port chosen at start): pass --url", listen)
		}
	}
	path := "/readyz"
	if *live {
		path = "/healthz"
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck %s: %w", base+path, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck %s: %s", base+path, resp.Status)
	}
	fmt.Fprintf(stdout, "changeflow: %s ok\n", base+path)
	return nil
}
