package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"

	"changeflow/internal/config"
)

// errUsage marks a command-line mistake; run prints usage for it.
var errUsage = errors.New("usage")

const usage = `changeflow — self-service configuration-as-code changes

Usage:
  changeflow serve   [--config FILE] [--local] [--listen ADDR] [--sim-listen ADDR]
                                                 run the service (--listen: server.listen,
                                                 --sim-listen: sim.listen of the embedded simulators)
  changeflow migrate [--config FILE] [--local]   apply database migrations and exit
  changeflow sim     [--listen ADDR] [--callback-url URL]... [--callback-token T] [--deploy-callback-token T]
                     [--webhook-token T] [--gitlab-token NAME=T]... [--protect-changeflow=false]
                                                 run only the simulators of GitLab, the approval
                                                 system, deployment, permissions and OIDC (tokens:
                                                 the well-known local ones unless given)
  changeflow doctor  [--config FILE] [--local] [--json]
                                                 check the deployment against the configuration and
                                                 the real GitLab (tokens, trusted proxies, changeflow/*
                                                 protection, the bots' roles, the webhook); exit 1 when
                                                 a check fails. Run it after every change (docs/deploy.md)
  changeflow healthcheck [--config FILE] [--url URL] [--live]
                                                 exit 0 when the instance on server.listen is ready
                                                 (GET /readyz; --live: /healthz); for images without a shell
  changeflow clustercheck --dsn DSN [--listen ADDR]
                                                 HAProxy's health check of one Galera node: GET / is 200
                                                 only while the node is Synced in the primary component
  changeflow audit verify FILE --key PUBKEY     verify an audit export (GET /ops/audit/export) offline:
                                                 hashes, links, the signed manifest; names the first
                                                 line that does not match and exits 1 (docs/audit.md)
  changeflow version                             print the version

--local runs the local profile (README.md, "The local run"): SQLite under
./var, the embedded simulators, loopback only. Its configuration file is
./var/changeflow.yaml (created on first use; edit it, changes apply live).
Example on other ports: changeflow serve --local --listen 127.0.0.1:9080 --sim-listen 127.0.0.1:9090

Every configuration key can also be set as CHANGEFLOW_<KEY> (docs/configuration.md).
`

// run is the whole program, taking its environment as arguments so tests
// can run it in-process: several instances, fake environments, captured
// output, cancellation instead of signals.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) < 2 {
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("%w: no command given", errUsage)
	}
	cmd, rest := args[1], args[2:]
	var err error
	switch cmd {
	case "serve":
		err = runServe(ctx, rest, getenv, stdout, stderr)
	case "migrate":
		err = runMigrate(ctx, rest, getenv, stdout, stderr)
	case "sim":
		err = runSim(ctx, rest, stdout, stderr)
	case "doctor":
		err = runDoctor(ctx, rest, getenv, stdout, stderr)
	case "healthcheck":
		err = runHealthcheck(ctx, rest, getenv, stdout, stderr)
	case "clustercheck":
		err = runClustercheck(ctx, rest, getenv, stdout, stderr)
	case "audit":
		err = runAudit(rest, stdout, stderr)
	case "version", "--version", "-v":
		fmt.Fprintf(stdout, "changeflow %s\n", version)
	case "help", "--help", "-h":
		fmt.Fprint(stdout, usage)
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("%w: unknown command %q", errUsage, cmd)
	}
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

// commonFlags are the flags every command that needs configuration takes;
// serve adds the two listen addresses.
type commonFlags struct {
	// command is the subcommand the flags were parsed for.
	command    string
	configFile string
	local      bool
	// listen and simListen are --listen and --sim-listen ("" = not given):
	// they override server.listen and sim.listen from every other source.
	listen, simListen string
	// noMigrate (serve only): do not run the migrations at start; a
	// designated `changeflow migrate` does, and serve waits for it.
	noMigrate bool
}

func parseCommon(name string, args []string, stderr io.Writer) (commonFlags, error) {
	f := commonFlags{command: name}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.configFile, "config", "", "configuration file (YAML)")
	fs.BoolVar(&f.local, "local", false, "local profile: SQLite under ./var, embedded simulators")
	if name == "serve" {
		fs.StringVar(&f.listen, "listen", "", "address to serve on, host:port (overrides "+config.KeyServerListen+")")
		fs.StringVar(&f.simListen, "sim-listen", "", "address of the embedded simulators, host:port (overrides "+config.KeySimListen+"; their URLs follow unless set explicitly)")
		fs.BoolVar(&f.noMigrate, "no-migrate", false, "do not migrate at start (one designated `changeflow migrate` does)")
	}
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("%w: unexpected arguments: %s", errUsage, strings.Join(fs.Args(), " "))
	}
	for _, a := range []struct{ flag, key, v string }{{"--listen", config.KeyServerListen, f.listen}, {"--sim-listen", config.KeySimListen, f.simListen}} {
		if a.v == "" {
			continue
		}
		// A flag is a person typing at a terminal: a malformed address is
		// refused here rather than falling back like a file value would.
		if _, port, err := net.SplitHostPort(a.v); err != nil || port == "" {
			return f, fmt.Errorf("%w: %s %q is not host:port (e.g. 127.0.0.1:8081)", errUsage, a.flag, a.v)
		}
	}
	return f, nil
}

// overlay is what the flags set in the configuration, above every source.
func (f commonFlags) overlay() map[string]any {
	ov := map[string]any{}
	if f.listen != "" {
		ov[config.KeyServerListen] = f.listen
	}
	if f.simListen != "" {
		ov[config.KeySimListen] = f.simListen
	}
	return ov
}
