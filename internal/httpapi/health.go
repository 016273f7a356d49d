package httpapi

import (
	"context"
	"log/slog"
	"net/http"

	"changeflow/internal/domain"
)

// handleHealthz answers whether the process is up. It touches nothing
// else on purpose: a liveness probe that checks the database restarts
// healthy instances whenever the database blips.
func (s *Server) handleHealthz() http.Handler {
	type body struct {
		Status  string `json:"status"`
		Version string `json:"version"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		respond(w, s.deps.Logger, domain.CodeOK, body{Status: "up", Version: s.deps.Version})
	})
}

// handleReadyz answers whether this instance can serve: the database
// answers, is (on Galera) a Synced node of the primary component, and its
// schema is at the version this binary expects. The body names the failing
// check but never the driver's error text.
//
// A Galera node that is joining, donating or cut off from the quorum still
// accepts connections and answers pings, but it either refuses queries
// (1047) or serves data that may be behind; failing readiness then lets a
// load balancer move traffic to an instance on a healthy node.
func (s *Server) handleReadyz() http.Handler {
	type body struct {
		Status           string `json:"status"`
		Database         string `json:"database"`
		Cluster          string `json:"cluster,omitempty"`
		Migrations       string `json:"migrations"`
		SchemaVersion    int64  `json:"schemaVersion"`
		SchemaVersionMax int64  `json:"schemaVersionExpected"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), s.deps.ReadyTimeout)
		defer cancel()
		b := body{Status: "ready", Database: "ok", Migrations: "current"}
		if err := s.deps.Ready.Ping(ctx); err != nil {
			s.deps.Logger.Warn("readiness: database unreachable", "err", err)
			b.Status, b.Database, b.Migrations = "not ready", "unreachable", "unknown"
			writeJSON(w, s.deps.Logger, http.StatusServiceUnavailable,
				Envelope{Code: domain.CodeRetryLater, Message: "The database is not reachable.", Data: b})
			return
		}
		state, ok, err := s.deps.Ready.ClusterReady(ctx)
		if state.State != "" {
			b.Cluster = state.State + "/" + state.Status
		}
		if err != nil || !ok {
			if err != nil {
				s.deps.Logger.Warn("readiness: cluster state", "err", err)
				b.Cluster = "unknown"
			}
			b.Status, b.Database, b.Migrations = "not ready", "not synced", "unknown"
			writeJSON(w, s.deps.Logger, http.StatusServiceUnavailable,
				Envelope{Code: domain.CodeRetryLater, Message: "The database node is not in sync with its cluster.", Data: b})
			return
		}
		cur, latest, pending, err := s.deps.Ready.MigrationStatus(ctx)
		b.SchemaVersion, b.SchemaVersionMax = cur, latest
		switch {
		case err != nil:
			s.deps.Logger.Warn("readiness: migration status", "err", err)
			b.Status, b.Migrations = "not ready", "unknown"
		case pending || cur != latest:
			b.Status, b.Migrations = "not ready", "pending"
		}
		if b.Status != "ready" {
			writeJSON(w, s.deps.Logger, http.StatusServiceUnavailable,
				Envelope{Code: domain.CodeRetryLater, Message: "The database schema is not current.", Data: b})
			return
		}
		respond(w, s.deps.Logger, domain.CodeOK, b)
	})
}

// slogPromLogger adapts slog to promhttp's error logger.
type slogPromLogger struct{ l *slog.Logger }

func (p slogPromLogger) Println(v ...any) { p.l.Error("metrics scrape", "err", v) }
