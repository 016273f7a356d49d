package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// errUsage marks a command-line mistake; run prints usage for it.
var errUsage = errors.New("usage")

const usage = `changeflow — self-service configuration-as-code changes

Usage:
  changeflow serve   [--config FILE] [--local]   run the service
  changeflow migrate [--config FILE] [--local]   apply database migrations and exit
  changeflow sim     [--listen ADDR] [--callback-url URL]...
                                                 run only the simulators of GitLab, the approval
                                                 system, deployment, permissions and OIDC
  changeflow version                             print the version

--local runs the local profile of SPEC §3.6: SQLite under ./var, the
embedded simulators, loopback only. Its configuration file is
./var/changeflow.yaml (created on first use; edit it, changes apply live).

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

// commonFlags are the flags every command that needs configuration takes.
type commonFlags struct {
	configFile string
	local      bool
}

func parseCommon(name string, args []string, stderr io.Writer) (commonFlags, error) {
	var f commonFlags
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.configFile, "config", "", "configuration file (YAML)")
	fs.BoolVar(&f.local, "local", false, "local profile: SQLite under ./var, embedded simulators")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("%w: unexpected arguments: %s", errUsage, strings.Join(fs.Args(), " "))
	}
	return f, nil
}
