package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	"github.com/go-sql-driver/mysql"
)

// Galera (MariaDB's synchronous multi-primary cluster) is the same
// dialect as a single MariaDB server; what differs is what the cluster
// certifies. Open detects it once, and the store then:
//   - takes the migration lock as a lease row the cluster certifies
//     (migrate_lock.go) — GET_LOCK locks one node only;
//   - applies WithSyncWait as the session's wsrep_sync_wait;
//   - answers ClusterReady from the node's wsrep status (GET /readyz).
// The conflict handling (1213 re-run, conflict.go) and the unavailable
// errors (1047, refused connections → domain.ErrBusy, translate) need no
// detection: a single server never sends them for another reason.

// mysqlErrUnknownSystemVariable is MySQL's answer to @@wsrep_on on a
// server without wsrep (MySQL proper; MariaDB always knows the variable).
const mysqlErrUnknownSystemVariable = 1193

// detectGalera reports whether db's server is a Galera node: wsrep on and
// a provider loaded.
func detectGalera(ctx context.Context, db *sql.DB) (bool, error) {
	var on sql.NullInt64
	var provider sql.NullString
	err := db.QueryRowContext(ctx, "SELECT @@GLOBAL.wsrep_on, @@GLOBAL.wsrep_provider").Scan(&on, &provider)
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == mysqlErrUnknownSystemVariable {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("detect Galera: %w", translate(err))
	}
	return on.Int64 == 1 && provider.Valid && provider.String != "" && provider.String != "none", nil
}

// Galera reports whether the database is a Galera cluster node.
func (s *Store) Galera() bool { return s.galera }

// ClusterState is a Galera node's own view of its membership, from its
// wsrep status variables.
type ClusterState struct {
	// Ready is wsrep_ready: the node accepts queries.
	Ready bool
	// State is wsrep_local_state_comment: Synced, Donor/Desynced, Joining,
	// Joined, Initialized …; only Synced has every write applied.
	State string
	// Status is wsrep_cluster_status: Primary while the node belongs to
	// the component holding the quorum.
	Status string
	// Size is wsrep_cluster_size.
	Size int
}

// Serving reports whether the node may serve: ready, Synced and in the
// primary component. A Donor may be serving in a real cluster, but it is
// behind while it sends state, so changeflow treats it as not ready and
// lets the proxy route around it.
func (c ClusterState) Serving() bool {
	return c.Ready && c.State == "Synced" && c.Status == "Primary"
}

// ClusterReady returns the node's cluster state. ok is true when the node
// may serve; on anything but Galera it is always true (state zero).
func (s *Store) ClusterReady(ctx context.Context) (state ClusterState, ok bool, err error) {
	if !s.galera {
		return ClusterState{}, true, nil
	}
	state, err = ReadClusterState(ctx, s.db)
	return state, err == nil && state.Serving(), err
}

// NodeIsGalera reports whether the server behind db (any database/sql pool
// of the MySQL driver, with or without a database in its DSN) is a Galera
// node. For tools that watch a node without being changeflow's store:
// `changeflow clustercheck`.
func NodeIsGalera(ctx context.Context, db *sql.DB) (bool, error) { return detectGalera(ctx, db) }

// ReadClusterState reads the wsrep status of the node behind db.
func ReadClusterState(ctx context.Context, db *sql.DB) (state ClusterState, err error) {
	rows, err := db.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN "+
		"('wsrep_ready', 'wsrep_local_state_comment', 'wsrep_cluster_status', 'wsrep_cluster_size')")
	if err != nil {
		return ClusterState{}, fmt.Errorf("cluster state: %w", translate(err))
	}
	defer rows.Close()
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return ClusterState{}, fmt.Errorf("cluster state: %w", err)
		}
		switch name {
		case "wsrep_ready":
			state.Ready = value == "ON"
		case "wsrep_local_state_comment":
			state.State = value
		case "wsrep_cluster_status":
			state.Status = value
		case "wsrep_cluster_size":
			state.Size, _ = strconv.Atoi(value)
		}
	}
	if err := rows.Err(); err != nil {
		return ClusterState{}, fmt.Errorf("cluster state: %w", translate(err))
	}
	return state, nil
}
