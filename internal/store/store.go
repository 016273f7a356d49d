// Package store is changeflow's storage edge: database/sql over SQLite (the
// embedded default, one instance) and MariaDB/MySQL (production, several
// instances sharing one database).
//
// The schema lives in versioned migrations per dialect (migrations/), applied
// by Migrate. The two dialects share the "?" placeholder and almost all SQL;
// the differences sit in one small hook, Dialect. Driver errors are
// translated at this edge onto the domain sentinels (domain.ErrDuplicate,
// ErrPreempted, ErrBusy, ErrNotFound), so callers never import a driver.
//
// Named operations (ClaimWaiting, AdmitRequest, …) are added to Store by the
// packages' owners; docs/storage.md explains every table and index.
package store

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"log/slog"
	"strconv"
	"time"

	"github.com/pressly/goose/v3"
)

// Store is a handle on one migrated (or to-be-migrated) database. It is safe
// for concurrent use; Close it once.
type Store struct {
	db       *sql.DB
	dialect  Dialect
	opts     options
	provider *goose.Provider
	// galera is true when the MariaDB server is a Galera node (galera.go).
	galera bool
	// reads are the prepared statements of the hottest reads (prepared.go).
	reads preparedReads
}

// options are the tunables of Open; the zero value of each field means
// "the documented default".
type options struct {
	maxOpenConns       int
	logger             *slog.Logger
	migrateLockTimeout time.Duration
	lockWaitTimeout    time.Duration
	syncWait           int
	// pool, when set, replaces the idle-pool defaults of openSQLite and
	// openMySQL (WithPoolLimits).
	pool *poolLimits
}

// poolLimits are database/sql's idle-pool knobs; zero keeps database/sql's
// meaning (no idle pool; connections live forever; idle ones never closed).
type poolLimits struct {
	maxIdleConns    int
	connMaxLifetime time.Duration
	connMaxIdleTime time.Duration
}

// Option tunes Open.
type Option func(*options)

// WithMaxOpenConns caps the connection pool. Defaults: 8 for an SQLite file
// (readers run in parallel under WAL, writers queue on the database lock),
// 1 for an in-memory SQLite database (each connection would otherwise see
// its own empty database), 20 for MariaDB (three instances stay far below
// the server's default max_connections of 151; at least 2, since Migrate
// pins one connection for its lock while goose uses another).
func WithMaxOpenConns(n int) Option { return func(o *options) { o.maxOpenConns = n } }

// WithPoolLimits sets the idle pool: at most maxIdle idle connections
// (capped at the open limit), each closed after lifetime in total and after
// idleTime unused; 0 is database/sql's meaning for each (no idle pool,
// forever, never). Without it the store keeps its own defaults: for an
// SQLite file every open connection may stay idle and lives forever (a
// local file has no server to cut it), for MariaDB 10 idle, 5 minutes'
// lifetime and 1 minute idle. An in-memory SQLite database ignores it: its
// one connection is the database and must never be closed.
func WithPoolLimits(maxIdle int, lifetime, idleTime time.Duration) Option {
	return func(o *options) {
		o.pool = &poolLimits{maxIdleConns: max(maxIdle, 0), connMaxLifetime: max(lifetime, 0), connMaxIdleTime: max(idleTime, 0)}
	}
}

// WithLogger receives the migration log (one line per applied file).
// Default: discarded — Migrate returns the applied versions for the caller
// to log.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithMigrateLockTimeout bounds how long Migrate waits for another instance
// that is migrating the same database. Default 2 minutes.
func WithMigrateLockTimeout(d time.Duration) Option {
	return func(o *options) { o.migrateLockTimeout = d }
}

// WithLockWaitTimeout sets MariaDB's session innodb_lock_wait_timeout
// (whole seconds, at least 1). Default 10 s instead of the server's 50 s: a
// request-path transaction that waits that long has already lost its
// caller, and a quick 1205 (domain.ErrBusy) lets rounds "try next round".
// Claim transactions may lower it further per statement. Ignored on SQLite,
// whose wait is busy_timeout in the DSN.
func WithLockWaitTimeout(d time.Duration) Option {
	return func(o *options) { o.lockWaitTimeout = d }
}

// WithSyncWait sets Galera's wsrep_sync_wait for every session: a bit mask
// of the statement kinds (1 = reads, 2 = UPDATE/DELETE, 4 = INSERT/REPLACE)
// that first wait until the node has applied every write the cluster
// committed before them, so that a read on one node sees what another node
// has just acknowledged (no 404 for a request another instance answered
// 202 for). 0, the default, is Galera's default: no wait. Ignored unless
// the database is a Galera node; values outside 0..15 are clamped.
func WithSyncWait(mask int) Option {
	return func(o *options) { o.syncWait = min(max(mask, 0), 15) }
}

// Open connects to the database driver names (DriverSQLite or DriverMySQL)
// at dsn, enforcing the connection settings the store relies on (see
// sqliteDSN and mysqlConfig), and checks it answers. It does not migrate.
func Open(ctx context.Context, driver, dsn string, opts ...Option) (*Store, error) {
	o := options{
		logger:             slog.New(slog.DiscardHandler),
		migrateLockTimeout: 2 * time.Minute,
		lockWaitTimeout:    10 * time.Second,
	}
	for _, opt := range opts {
		opt(&o)
	}

	var (
		db  *sql.DB
		err error
	)
	switch driver {
	case DriverSQLite:
		db, err = openSQLite(dsn, o)
	case DriverMySQL:
		db, err = openMySQL(dsn, o, nil)
	default:
		return nil, fmt.Errorf("open store: unknown driver %q (want %q or %q)", driver, DriverSQLite, DriverMySQL)
	}
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	s := &Store{db: db, dialect: Dialect{name: driver}, opts: o}
	if err := s.Ping(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	if driver == DriverMySQL {
		if s.galera, err = detectGalera(ctx, db); err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("open store: %w", err)
		}
		if s.galera && o.syncWait > 0 {
			// The session variable must be set on every connection the pool
			// opens, which the driver does for DSN parameters; the first
			// pool could not know it talks to Galera, so it is replaced. A
			// plain MariaDB or MySQL never gets the parameter (MySQL
			// rejects the unknown variable).
			_ = db.Close()
			if s.db, err = openMySQL(dsn, o, map[string]string{"wsrep_sync_wait": strconv.Itoa(o.syncWait)}); err != nil {
				return nil, fmt.Errorf("open store: %w", err)
			}
			db = s.db
			if err := s.Ping(ctx); err != nil {
				_ = db.Close()
				return nil, fmt.Errorf("open store: %w", err)
			}
		}
	}
	if s.provider, err = s.newProvider(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	return s, nil
}

// DB returns the connection pool, for named operations and tests.
func (s *Store) DB() *sql.DB { return s.db }

// Dialect returns the SQL dialect hook of this store's database.
func (s *Store) Dialect() Dialect { return s.dialect }

// Ping checks that the database answers (GET /readyz).
func (s *Store) Ping(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("ping %s: %w", s.dialect.name, translate(err))
	}
	return nil
}

// Close closes the connection pool. In-flight transactions fail.
func (s *Store) Close() error {
	s.reads.closeAll()
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close %s: %w", s.dialect.name, err)
	}
	return nil
}

// migrationFS returns the migration files of the store's dialect.
func (s *Store) migrationFS() (fs.FS, error) {
	return fs.Sub(migrationFiles, "migrations/"+s.dialect.name)
}
