package store

import (
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// mysqlSQLMode makes MariaDB and MySQL 8 reject what they would otherwise
// silently "fix": a too-long string is an error, not a truncated key; a zero
// date is an error. NO_ENGINE_SUBSTITUTION keeps a missing InnoDB from
// turning into MyISAM without transactions.
const mysqlSQLMode = "'STRICT_ALL_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION'"

// sqliteBusyTimeoutMs is how long a connection waits for the write lock
// before SQLITE_BUSY (domain.ErrBusy), unless the DSN says otherwise.
const sqliteBusyTimeoutMs = "5000"

// openSQLite opens an SQLite database with the settings of sqliteDSN,
// creating the parent directory of a file database first.
func openSQLite(dsn string, o options) (*sql.DB, error) {
	full, path, memory, err := sqliteDSN(dsn)
	if err != nil {
		return nil, err
	}
	if !memory {
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			return nil, fmt.Errorf("create directory of %s: %w", path, err)
		}
	}
	db, err := sql.Open(DriverSQLite, full)
	if err != nil {
		return nil, err
	}
	n := o.maxOpenConns
	switch {
	case memory:
		// Every connection to ":memory:" is a separate, empty database, and
		// closing the last one drops it: one connection, kept forever.
		n = 1
		db.SetConnMaxLifetime(0)
		db.SetConnMaxIdleTime(0)
	case n <= 0:
		n = 8
	}
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	if o.pool != nil && !memory {
		o.pool.apply(db, n)
	}
	return db, nil
}

// apply sets the configured idle pool on db, whose open limit is open.
func (p *poolLimits) apply(db *sql.DB, open int) {
	db.SetMaxIdleConns(min(p.maxIdleConns, open))
	db.SetConnMaxLifetime(p.connMaxLifetime)
	db.SetConnMaxIdleTime(p.connMaxIdleTime)
}

// sqliteDSN returns dsn with the parameters the store relies on enforced,
// the database file's path and whether the database lives in memory.
//
// Enforced (a conflicting value in dsn is replaced):
//   - _txlock=immediate: BEGIN takes the write lock at once, so two
//     read-then-write transactions queue under busy_timeout instead of one
//     failing with SQLITE_BUSY_SNAPSHOT at its first write (measured: 67/800
//     vs 800/800 successes, research/databases.md).
//   - _journal_mode=WAL: readers do not block the writer nor it them.
//   - _foreign_keys=1: SQLite leaves them off per connection by default.
//   - _time_format=sqlite, _timezone=UTC: a time.Time bound without
//     Dialect.Time is at least written in UTC and read back.
//   - _texttotime=1: MAX(created_at) and other expressions over DATETIME
//     columns scan into time.Time, as they do on MariaDB.
//
// Defaults kept if dsn sets them: _busy_timeout=5000, _synchronous=NORMAL
// (with WAL, a crash of the process loses nothing; a power cut may lose the
// last commits, never consistency).
func sqliteDSN(dsn string) (full, path string, memory bool, err error) {
	base, query, _ := strings.Cut(dsn, "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		return "", "", false, fmt.Errorf("sqlite DSN parameters: %w", err)
	}
	path = base
	if rest, ok := strings.CutPrefix(base, "file:"); ok {
		u, err := url.Parse(base)
		if err != nil {
			return "", "", false, fmt.Errorf("sqlite DSN %q: %w", base, err)
		}
		switch {
		case u.Opaque != "": // file:var/changeflow.db
			if path, err = url.PathUnescape(u.Opaque); err != nil {
				return "", "", false, fmt.Errorf("sqlite DSN %q: %w", base, err)
			}
		case u.Path != "": // file:///abs/changeflow.db
			path = u.Path
		default:
			path = rest
		}
	}
	memory = path == "" || path == ":memory:" || q.Get("mode") == "memory"

	q.Set("_txlock", "immediate")
	q.Del("_fk") // the alias would win over _foreign_keys
	q.Set("_foreign_keys", "1")
	q.Del("_journal")
	if memory {
		q.Del("_journal_mode") // an in-memory database has no WAL
	} else {
		q.Set("_journal_mode", "WAL")
	}
	if !q.Has("_busy_timeout") && !q.Has("_timeout") {
		q.Set("_busy_timeout", sqliteBusyTimeoutMs)
	}
	if !q.Has("_synchronous") && !q.Has("_sync") {
		q.Set("_synchronous", "NORMAL")
	}
	q.Set("_time_format", "sqlite")
	q.Set("_timezone", "UTC")
	q.Set("_texttotime", "1")
	return base + "?" + q.Encode(), path, memory, nil
}

// openMySQL opens a MariaDB/MySQL pool with the settings of mysqlConfig
// and the extra session variables in session.
func openMySQL(dsn string, o options, session map[string]string) (*sql.DB, error) {
	cfg, err := mysqlConfig(dsn, o)
	if err != nil {
		return nil, err
	}
	for k, v := range session {
		cfg.Params[k] = v
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("mysql connector: %w", err)
	}
	db := sql.OpenDB(connector)
	n := o.maxOpenConns
	if n <= 0 {
		n = 20
	}
	// Migrate pins one connection for its lock while goose works on another.
	n = max(n, 2)
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(min(n, 10))
	// Recycle connections well before the server's wait_timeout (8 h) or a
	// proxy's idle cut, and let an idle pool shrink.
	db.SetConnMaxLifetime(5 * time.Minute)
	db.SetConnMaxIdleTime(time.Minute)
	if o.pool != nil {
		o.pool.apply(db, n)
	}
	return db, nil
}

// mysqlConfig parses dsn and enforces, whatever dsn says:
//   - parseTime=true, loc=UTC: DATETIME columns scan into UTC time.Time;
//   - time_zone='+00:00' per session: CURRENT_TIMESTAMP(6) — every DB-clock
//     default and comparison — is UTC, like the values Go binds;
//   - clientFoundRows=true: a guarded UPDATE that matches its row but
//     changes nothing reports 1, not 0 — else it would look pre-empted;
//   - interpolateParams=true: no server-side prepared statements (below);
//   - a strict sql_mode (mysqlSQLMode), so CHECK-like failures are errors;
//   - innodb_lock_wait_timeout from WithLockWaitTimeout;
//   - times truncated to microseconds on the client, so MySQL 8 (which
//     rounds the 7th digit) and MariaDB (which truncates) store the same.
func mysqlConfig(dsn string, o options) (*mysql.Config, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("mysql DSN: %w", err)
	}
	if cfg.DBName == "" {
		return nil, errors.New("mysql DSN names no database (user:pass@tcp(host:3306)/changeflow)")
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	cfg.ClientFoundRows = true
	// Statements go as text (COM_QUERY) with the arguments escaped by the
	// driver, never as server-side prepared statements. On Galera this is
	// a correctness matter: a transaction brute-force aborted by a
	// conflicting write set from another node while the server was
	// processing a COM_STMT_CLOSE — a command that has no reply, so the
	// abort cannot be reported on it — lost its abort: the next
	// statements ran outside the transaction, autocommitted, and COMMIT
	// answered OK (a settlement's UPDATE rolled back, its member release
	// committed alone; SELECT @@in_transaction was 0 before COMMIT).
	// With text statements every command has a reply, and the abort is
	// reported as 1213 on the statement it hits (0 of 240 rounds lost,
	// against 1–3 of 40 with prepared statements; docs/storage.md,
	// "Galera"). It also saves the prepare and close round trips of
	// every statement on any MariaDB/MySQL.
	cfg.InterpolateParams = true
	if err := cfg.Apply(mysql.TimeTruncate(time.Microsecond)); err != nil {
		return nil, fmt.Errorf("mysql DSN: %w", err)
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	cfg.Params["sql_mode"] = mysqlSQLMode
	cfg.Params["innodb_lock_wait_timeout"] = strconv.Itoa(max(1, int(o.lockWaitTimeout/time.Second)))
	return cfg, nil
}

// RedactDSN returns dsn fit for a log line: the MySQL password is replaced.
// An SQLite DSN carries no secret and is returned as is.
func RedactDSN(driver, dsn string) string {
	if driver != DriverMySQL {
		return dsn
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "<unparsable mysql DSN>"
	}
	if cfg.Passwd != "" {
		cfg.Passwd = "xxxxx"
	}
	return cfg.FormatDSN()
}
