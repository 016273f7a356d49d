package store

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/pressly/goose/v3"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"changeflow/internal/domain"
)

// Driver names accepted by Open. They are also the database/sql driver names
// and the directory names under migrations/.
const (
	DriverSQLite = "sqlite"
	DriverMySQL  = "mysql"
)

// InChunkSize is the most values one IN (…) list may carry. Both databases
// accept far more, but long lists make plans unpredictable and statements
// huge (unchunked, a list could reach over a thousand
// placeholders); 500 keeps every list well below SQLite's default limit of
// 32766 variables and MariaDB's packet size.
const InChunkSize = 500

// sqliteTimeLayout is how SQLite stores every time: UTC, fixed width,
// millisecond precision — the exact output of strftime('%Y-%m-%d %H:%M:%f').
// Because DB-clock defaults and Go-side values share this layout, comparing
// the TEXT values compares the instants.
const sqliteTimeLayout = "2006-01-02 15:04:05.000"

// Dialect is the one place where the SQL of the two supported databases
// differs: the clock expressions, the time encoding and precision, and the
// migration dialect. Everything else (placeholders "?", guarded UPDATEs,
// unique keys) is shared SQL. Error classification by driver error number
// lives in translate.
type Dialect struct {
	name string
}

// Name returns the driver name, DriverSQLite or DriverMySQL.
func (d Dialect) Name() string { return d.name }

// IsMySQL reports whether the dialect is MySQL/MariaDB.
func (d Dialect) IsMySQL() bool { return d.name == DriverMySQL }

// Now returns the SQL expression for the database clock, with the same
// precision as the stored defaults. Conditions such as "created_at < now"
// use it so that the write time and the comparison time come from one clock,
// whatever the skew between application hosts.
//
// MariaDB evaluates it once per statement; SQLite once per sqlite3_step.
func (d Dialect) Now() string {
	if d.IsMySQL() {
		return "CURRENT_TIMESTAMP(6)"
	}
	return "strftime('%Y-%m-%d %H:%M:%f','now')"
}

// NowAdd returns an SQL expression for "database clock + offset" with one
// "?" placeholder, and the argument to bind to it. A negative offset gives
// "now minus N": NowAdd(-time.Minute) is a minute ago.
//
//	expr, arg := d.NowAdd(-minAge)
//	q := "… WHERE updated_at < " + expr
//	db.QueryContext(ctx, q, arg)
func (d Dialect) NowAdd(offset time.Duration) (expr string, arg any) {
	if d.IsMySQL() {
		// MICROSECOND keeps sub-second offsets exact; "INTERVAL ? SECOND"
		// would need a DECIMAL argument to do the same.
		return "(CURRENT_TIMESTAMP(6) + INTERVAL ? MICROSECOND)", offset.Microseconds()
	}
	return "strftime('%Y-%m-%d %H:%M:%f','now',?)", fmt.Sprintf("%+.3f seconds", offset.Seconds())
}

// TimeAdd returns an SQL expression for "the time in column col + offset"
// with one "?" placeholder, and the argument to bind to it, like NowAdd.
func (d Dialect) TimeAdd(col string, offset time.Duration) (expr string, arg any) {
	if d.IsMySQL() {
		return "(" + col + " + INTERVAL ? MICROSECOND)", offset.Microseconds()
	}
	return "strftime('%Y-%m-%d %H:%M:%f'," + col + ",?)", fmt.Sprintf("%+.3f seconds", offset.Seconds())
}

// NowMinus is NowAdd(-ago): the expression for "ago before the database
// clock" and its argument.
func (d Dialect) NowMinus(ago time.Duration) (expr string, arg any) {
	return d.NowAdd(-ago)
}

// Precision is the resolution of every stored time: microseconds on
// MariaDB (DATETIME(6)), milliseconds on SQLite (strftime %f). Values read
// back equal the written value truncated to it.
func (d Dialect) Precision() time.Duration {
	if d.IsMySQL() {
		return time.Microsecond
	}
	return time.Millisecond
}

// Time encodes t for binding as a query argument so that it compares
// correctly with DB-clock values: converted to UTC and truncated to
// Precision; on SQLite formatted as fixed-width TEXT (see sqliteTimeLayout).
// A zero t encodes as NULL, the "not set" of every nullable time column.
//
// Always bind times through Time: the SQLite driver would otherwise write
// time.Time in a layout ("…05.1+00:00") that does not sort against the
// stored values.
func (d Dialect) Time(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	t = t.UTC().Truncate(d.Precision())
	if d.IsMySQL() {
		return t
	}
	return t.Format(sqliteTimeLayout)
}

// PrimaryKeyHint returns the table hint that pins a statement to the
// primary key, to place right after the table name:
//
//	"UPDATE merge_batch_request " + d.PrimaryKeyHint() + " SET batch_id = ? WHERE batch_id IS NULL AND id IN (…)"
//
// The claim's guarded UPDATE by id list must lock only the listed rows
// (I3). When the list covers most of a small table, MariaDB 10.11 plans a
// full index scan instead, which under REPEATABLE READ next-key-locks every
// row and the supremum, so a concurrent admission waits for the claim to
// end (measured: 1205 after the lock wait timeout). FORCE INDEX (PRIMARY)
// keeps the range plan whatever the statistics say. SQLite needs nothing: it
// has a single writer and no row locks.
func (d Dialect) PrimaryKeyHint() string {
	if d.IsMySQL() {
		return "FORCE INDEX (PRIMARY)"
	}
	return ""
}

// goose returns the goose dialect of the migration files.
func (d Dialect) goose() goose.Dialect {
	if d.IsMySQL() {
		return goose.DialectMySQL
	}
	return goose.DialectSQLite3
}

// tableExistsQuery returns a query counting the tables named by its one
// argument in the current database.
func (d Dialect) tableExistsQuery() string {
	if d.IsMySQL() {
		return "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?"
	}
	return "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?"
}

// MySQL/MariaDB server error numbers that carry a meaning for us.
const (
	mysqlErrDupKey          = 1022 // ER_DUP_KEY: "Can't write; duplicate key in table"
	mysqlErrDupEntry        = 1062 // ER_DUP_ENTRY
	mysqlErrDupEntryWithKey = 1586 // ER_DUP_ENTRY_WITH_KEY_NAME
	mysqlErrRecordChanged   = 1020 // "Record has changed since last read" (innodb_snapshot_isolation=ON)
	mysqlErrLockWaitTimeout = 1205 // ER_LOCK_WAIT_TIMEOUT
	mysqlErrLockDeadlock    = 1213 // ER_LOCK_DEADLOCK: InnoDB already rolled the transaction back; also Galera's lost certification

	// The server cannot serve this session now; another node (or the same
	// one a moment later) can.
	mysqlErrWsrepNotReady   = 1047 // ER_UNKNOWN_COM_ERROR: "WSREP has not yet prepared node for application use" (a Galera node joining, leaving or outside the primary component)
	mysqlErrServerShutdown  = 1053 // ER_SERVER_SHUTDOWN
	mysqlErrConnectionCount = 1040 // ER_CON_COUNT_ERROR: too many connections
	mysqlErrConnectionKill  = 1927 // ER_CONNECTION_KILLED
)

// SQLite result codes. Connections run with extended result codes on, so a
// constraint failure says which constraint kind failed; BUSY and LOCKED
// come as families (BUSY_SNAPSHOT, BUSY_TIMEOUT, LOCKED_SHAREDCACHE …)
// sharing the primary code in the low byte.
const (
	sqlitePrimaryMask       = 0xff
	sqliteConstraintUnique  = sqlite3.SQLITE_CONSTRAINT_UNIQUE     // 2067
	sqliteConstraintPrimary = sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY // 1555
	sqliteBusy              = sqlite3.SQLITE_BUSY                  // 5
	sqliteLocked            = sqlite3.SQLITE_LOCKED                // 6
)

// translate maps a driver error onto the domain sentinels, keeping the
// driver error in the chain (both are %w) so logs show the cause and
// errors.As still finds *mysql.MySQLError or *sqlite.Error:
//
//   - sql.ErrNoRows → domain.ErrNotFound
//   - unique or primary key violation → domain.ErrDuplicate
//   - MariaDB 1020 (snapshot isolation saw a concurrent change) → domain.ErrPreempted
//   - lock wait timeout, deadlock, SQLITE_BUSY/LOCKED → domain.ErrBusy
//   - the database unavailable — a Galera node not ready (1047), a server
//     shutting down, out of connections or killing the session, a refused
//     or broken connection — → domain.ErrBusy too: the request did not
//     happen (or its transaction was rolled back) and a retry, on this
//     instance once the node is back or through the proxy on another,
//     is the answer (503 RETRY_LATER at the HTTP edge)
//
// Anything else, and an error that already carries a sentinel, is returned
// unchanged, so translate is safe to apply twice.
func translate(err error) error {
	if err == nil {
		return nil
	}
	for _, s := range []error{domain.ErrNotFound, domain.ErrDuplicate, domain.ErrPreempted, domain.ErrBusy} {
		if errors.Is(err, s) {
			return err
		}
	}
	if sentinel := classify(err); sentinel != nil {
		return fmt.Errorf("%w: %w", sentinel, err)
	}
	return err
}

// classify returns the sentinel err stands for, or nil. The two drivers'
// error types are distinct, so one function serves both dialects.
func classify(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return domain.ErrNotFound
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case mysqlErrDupEntry, mysqlErrDupEntryWithKey, mysqlErrDupKey:
			return domain.ErrDuplicate
		case mysqlErrRecordChanged:
			return domain.ErrPreempted
		case mysqlErrLockWaitTimeout, mysqlErrLockDeadlock,
			mysqlErrWsrepNotReady, mysqlErrServerShutdown, mysqlErrConnectionCount, mysqlErrConnectionKill:
			return domain.ErrBusy
		}
		return nil
	}
	if unavailable(err) {
		return domain.ErrBusy
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		code := se.Code()
		switch {
		case code == sqliteConstraintUnique, code == sqliteConstraintPrimary:
			return domain.ErrDuplicate
		case code&sqlitePrimaryMask == sqliteBusy, code&sqlitePrimaryMask == sqliteLocked:
			return domain.ErrBusy
		}
	}
	return nil
}

// unavailable reports whether err says the connection to the database
// failed rather than the statement: database/sql's ErrBadConn (it retried
// on a fresh connection and gave up), the MySQL driver's invalid
// connection (the server went away mid-statement) and network errors
// (connection refused while a node is down). A context's own deadline is
// not among them: that is the caller's limit, not the database's state.
func unavailable(err error) bool {
	var ne *net.OpError
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) || errors.As(err, &ne)
}
