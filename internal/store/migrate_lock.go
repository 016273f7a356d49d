package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"changeflow/internal/domain"
)

// Several instances may start at once against one database, and each runs
// Migrate. goose's Provider serializes calls within one process only; its
// SessionLocker hook is not enough either, because Provider.Up first calls
// HasPending outside the lock, and HasPending creates the version table:
// two fresh instances racing there fail with "missing zero version
// migration" or stall a second in goose's retry (observed with goose
// v3.30.0 on MariaDB 10.11). So Migrate takes a database-wide lock of its own
// around the whole goose run.
//
// Which lock depends on what the database certifies. A single MariaDB or
// MySQL server: GET_LOCK, released by the server when the session ends. A
// Galera cluster: GET_LOCK locks one node only (three instances on three
// nodes migrated at once, failing with "1050 Table already exists" and once
// leaving goose_db_version empty), so the lock is a lease row, written by
// an INSERT the cluster certifies — twin INSERTs on two nodes end with one
// row and the loser's 1062 or 1213. SQLite: the same lease row, since it
// has no session lock.

// migrateLock takes the database-wide migration lock and returns the
// function that releases it.
func (s *Store) migrateLock(ctx context.Context) (unlock func() error, err error) {
	switch {
	case s.galera:
		return s.leaseMigrateLock(ctx, galeraLease())
	case s.dialect.IsMySQL():
		return mysqlMigrateLock(ctx, s.db, s.opts.migrateLockTimeout)
	}
	return s.leaseMigrateLock(ctx, sqliteLease())
}

// mysqlMigrateLockName is the name of the MariaDB/MySQL named lock.
// GET_LOCK is server-wide, so the name includes the database: two databases
// on one server (tests, staging) must not queue on each other. MySQL 8 caps
// names at 64 characters, hence LEFT (a collision only serializes).
const mysqlMigrateLockName = "LEFT(CONCAT('changeflow_migrate:', DATABASE()), 64)"

// mysqlMigrateLock takes GET_LOCK on a connection pinned for the duration
// of the run. The server releases a named lock when its session ends, so an
// instance killed mid-migration leaks nothing. The pool needs a second
// connection for goose meanwhile (Open keeps at least two).
func mysqlMigrateLock(ctx context.Context, db *sql.DB, timeout time.Duration) (func() error, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("take migration lock: %w", translate(err))
	}
	var got sql.NullInt64
	secs := max(1, int(timeout/time.Second))
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK("+mysqlMigrateLockName+", ?)", secs).Scan(&got); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("take migration lock: %w", translate(err))
	}
	if !got.Valid || got.Int64 != 1 {
		_ = conn.Close()
		return nil, fmt.Errorf("take migration lock: another instance held it for %s: %w", timeout, domain.ErrBusy)
	}
	return func() error {
		// Release even when the caller's context is done; closing the
		// connection would release it too, but back in the pool the session
		// (and the lock) would live on.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, err := conn.ExecContext(ctx, "DO RELEASE_LOCK("+mysqlMigrateLockName+")")
		if err != nil {
			// Make database/sql discard the connection: the session ends and
			// the server drops the lock with it.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
		return errors.Join(err, conn.Close())
	}, nil
}

// The lease row lives in changeflow_migrate_lock (outside the versioned
// schema: it must exist before the first migration). A second process (a
// `changeflow migrate` beside `serve`, an instance on another Galera node)
// waits for the row to go. A process killed mid-migration leaves the row
// behind; it counts as abandoned once its locked_at is older than
// staleAfter by the database clock and is taken over. SQLite migrations
// take milliseconds, so a live holder is never a minute old; a Galera
// migration may take long (an ALTER of a big table), so its holder renews
// locked_at every heartbeat and a row is abandoned only when renewals
// stopped. The statements run on the pool, not a pinned connection, so an
// in-memory SQLite database (one connection) works too.
//
// On Galera the row also orders the migrators' reads: an INSERT of the row
// succeeds only on a node that has applied the previous holder's DELETE
// (else the row is still there, 1062, or the INSERT conflicts with the
// DELETE, 1213), and a node applies write sets in the cluster's order, so
// the new holder's goose sees every migration the previous one recorded.
type lease struct {
	ddl        string
	staleAfter time.Duration
	heartbeat  time.Duration // 0: no renewal
}

// sqliteLease and galeraLease are functions, not package variables, so
// nothing global is mutable.
func sqliteLease() lease {
	return lease{
		ddl: `CREATE TABLE IF NOT EXISTS changeflow_migrate_lock (
		id        INTEGER PRIMARY KEY CHECK (id = 1),
		owner     TEXT NOT NULL,
		locked_at DATETIME NOT NULL
	)`,
		staleAfter: time.Minute,
	}
}

func galeraLease() lease {
	return lease{
		ddl: `CREATE TABLE IF NOT EXISTS changeflow_migrate_lock (
		id        INT NOT NULL PRIMARY KEY,
		owner     VARCHAR(32) NOT NULL,
		locked_at DATETIME(6) NOT NULL
	) ENGINE=InnoDB`,
		staleAfter: 30 * time.Second,
		heartbeat:  5 * time.Second,
	}
}

// leasePoll is how often a waiting migrator tries to take the row.
const leasePoll = 25 * time.Millisecond

// leaseMigrateLock inserts the lock row, waiting while another owner holds
// it, and returns the function that deletes it.
func (s *Store) leaseMigrateLock(ctx context.Context, l lease) (func() error, error) {
	owner := randomToken()
	stale, staleArg := s.dialect.NowMinus(l.staleAfter)
	deadline := time.NewTimer(s.opts.migrateLockTimeout)
	defer deadline.Stop()
	created := false
	for {
		taken, err := s.tryLease(ctx, l, &created, owner, stale, staleArg)
		if err != nil {
			return nil, err
		}
		if taken {
			break
		}
		poll := time.NewTimer(leasePoll)
		select {
		case <-ctx.Done():
			poll.Stop()
			return nil, fmt.Errorf("take migration lock: %w", ctx.Err())
		case <-deadline.C:
			poll.Stop()
			return nil, fmt.Errorf("take migration lock: another process held it for %s: %w",
				s.opts.migrateLockTimeout, domain.ErrBusy)
		case <-poll.C:
		}
	}
	stopRenewal := s.renewLease(ctx, l, owner)
	return func() error {
		stopRenewal()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		// A lost certification against a renewal still in flight on
		// another connection is re-run; the row must go.
		err := retryConflict(ctx, func() error {
			_, err := s.db.ExecContext(ctx, "DELETE FROM changeflow_migrate_lock WHERE id = 1 AND owner = ?", owner)
			return err
		})
		if err != nil {
			return fmt.Errorf("release migration lock: %w", translate(err))
		}
		return nil
	}, nil
}

// tryLease makes one attempt at the lease row: true when this owner holds
// it now, false to wait and try again.
//
// A waiter only reads while the row is held by a live owner. It used to
// try the INSERT (and the stale DELETE) every leasePoll: on SQLite each is
// a write transaction, and four waiters writing every 25 ms starved the
// holder's own migration statements of the single write lock (SQLite's
// busy handler is not fair) until one failed with SQLITE_BUSY after
// busy_timeout — seen once on a loaded machine
// (TestMigrateConcurrentInstances). A read takes no write lock in WAL
// mode. Writes happen only when the row is absent or abandoned, and a
// busy answer to them (the holder is writing; on Galera a twin INSERT
// certified first, 1213) is one more wait.
func (s *Store) tryLease(ctx context.Context, l lease, created *bool, owner, stale string, staleArg any) (bool, error) {
	if !*created {
		// Before the first migration the table may not exist; several
		// processes may race to create it (IF NOT EXISTS makes that safe,
		// a busy answer is a wait).
		if _, err := s.db.ExecContext(ctx, l.ddl); err != nil {
			if err = translate(err); errors.Is(err, domain.ErrBusy) {
				return false, nil
			}
			return false, fmt.Errorf("create migration lock table: %w", err)
		}
		*created = true
	}
	var abandoned bool
	err := s.db.QueryRowContext(ctx,
		"SELECT CASE WHEN locked_at < "+stale+" THEN 1 ELSE 0 END FROM changeflow_migrate_lock WHERE id = 1", staleArg).Scan(&abandoned)
	switch err = translate(err); {
	case errors.Is(err, domain.ErrNotFound):
		// Free: take it below.
	case errors.Is(err, domain.ErrBusy):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read migration lock: %w", err)
	case !abandoned:
		return false, nil // held by a live owner
	default:
		// Held, but abandoned (its owner died mid-migration): clear it,
		// then race for it like everyone else.
		_, err := s.db.ExecContext(ctx, "DELETE FROM changeflow_migrate_lock WHERE id = 1 AND locked_at < "+stale, staleArg)
		if err = translate(err); err != nil && !errors.Is(err, domain.ErrBusy) {
			return false, fmt.Errorf("clear stale migration lock: %w", err)
		}
	}
	_, err = s.db.ExecContext(ctx,
		"INSERT INTO changeflow_migrate_lock (id, owner, locked_at) VALUES (1, ?, "+s.dialect.Now()+")", owner)
	switch err = translate(err); {
	case err == nil:
		return true, nil
	case errors.Is(err, domain.ErrDuplicate), errors.Is(err, domain.ErrBusy):
		return false, nil // another waiter was quicker, or the holder is writing
	default:
		return false, fmt.Errorf("take migration lock: %w", err)
	}
}

// renewLease renews the row's locked_at every l.heartbeat until the
// returned function is called (which waits for the renewer to stop). A
// failed renewal is only logged: the next one may succeed, and the
// migration itself will fail loudly if the database is really gone.
func (s *Store) renewLease(ctx context.Context, l lease, owner string) (stop func()) {
	if l.heartbeat <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(l.heartbeat)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if _, err := s.db.ExecContext(ctx, "UPDATE changeflow_migrate_lock SET locked_at = "+s.dialect.Now()+
				" WHERE id = 1 AND owner = ?", owner); err != nil && ctx.Err() == nil {
				s.opts.logger.Warn("renew migration lock", "err", err)
			}
		}
	}()
	return func() { cancel(); <-done }
}
