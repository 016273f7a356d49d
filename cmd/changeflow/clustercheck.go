package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"changeflow/internal/store"
)

// clustercheckDSNEnv names the node's DSN when --dsn is not given, so the
// password need not be on the command line (visible in ps).
const clustercheckDSNEnv = "CHANGEFLOW_CLUSTERCHECK_DSN"

// runClustercheck serves HAProxy's health check of one Galera node: GET /
// answers 200 while the node may serve (wsrep_ready ON, Synced, in the
// primary component) and 503 otherwise — joining, donor, desynced, out of
// the primary component, or not answering. A plain TCP check sees only a
// node that is down: a node that has just been restarted accepts
// connections while it still catches up by IST and, being the proxy's
// preferred server again, would take every new connection and answer 1047
// or hold reads in wsrep_sync_wait until it is Synced. Run one next to
// each node (docs/storage.md, "Galera").
func runClustercheck(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("clustercheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:9200", "address HAProxy's httpchk asks")
	dsn := fs.String("dsn", "", "the node's MariaDB DSN, user:password@tcp(host:port)/ (default: $"+clustercheckDSNEnv+")")
	timeout := fs.Duration("timeout", 2*time.Second, "how long one check may ask the node")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments: %s", errUsage, strings.Join(fs.Args(), " "))
	}
	if *dsn == "" {
		*dsn = getenv(clustercheckDSNEnv)
	}
	if *dsn == "" {
		return fmt.Errorf("%w: clustercheck needs the node's DSN: --dsn or %s", errUsage, clustercheckDSNEnv)
	}
	// A plain pool, not changeflow's store: the check needs no database
	// (the DSN may name none) and must not migrate or tune sessions. A
	// node that is down or not Galera at start is a reason to fail now,
	// while the operator is watching.
	redacted := store.RedactDSN(store.DriverMySQL, *dsn)
	cfg, err := mysql.ParseDSN(*dsn)
	if err != nil {
		return fmt.Errorf("%w: clustercheck DSN %s: %w", errUsage, redacted, err)
	}
	cfg.Timeout = *timeout
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return fmt.Errorf("clustercheck: %w", err)
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	db.SetMaxOpenConns(2)
	db.SetConnMaxIdleTime(time.Minute)
	probe, cancel := context.WithTimeout(ctx, *timeout)
	galera, err := store.NodeIsGalera(probe, db)
	cancel()
	if err != nil {
		return fmt.Errorf("clustercheck: %s: %w", redacted, err)
	}
	if !galera {
		return fmt.Errorf("clustercheck: %s is not a Galera node (wsrep_on is not ON)", redacted)
	}
	logger := slog.New(slog.NewJSONHandler(stderr, nil))
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("clustercheck: port %s is already in use by another process: choose another with --listen ADDR: %w", *listen, err)
		}
		return fmt.Errorf("clustercheck: listen on %s (--listen): %w", *listen, err)
	}
	srv := &http.Server{Handler: clustercheckHandler(db, *timeout, logger), ReadHeaderTimeout: 2 * time.Second}
	fmt.Fprintf(stdout, "changeflow: clustercheck of %s on http://%s\n", redacted, ln.Addr())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("clustercheck: %w", err)
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("clustercheck: shutdown: %w", err)
	}
	return nil
}

// clustercheckHandler answers every GET or HEAD with the node's state in
// words (the body is for the operator who curls it; HAProxy reads only the
// status).
func clustercheckHandler(db *sql.DB, timeout time.Duration, logger *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		state, err := store.ReadClusterState(ctx, db)
		ok := err == nil && state.Serving()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		switch {
		case err != nil:
			logger.Warn("clustercheck: node not answering", "err", err)
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "node not answering")
		case !ok:
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not serving: state %s, cluster %s, ready %v, size %d\n", state.State, state.Status, state.Ready, state.Size)
		default:
			fmt.Fprintf(w, "serving: %s in the %s component of %d\n", state.State, state.Status, state.Size)
		}
	})
}
