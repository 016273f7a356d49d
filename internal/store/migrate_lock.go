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

// migrateLock takes the database-wide migration lock and returns the
// function that releases it.
func (s *Store) migrateLock(ctx context.Context) (unlock func() error, err error) {
	if s.dialect.IsMySQL() {
		return mysqlMigrateLock(ctx, s.db, s.opts.migrateLockTimeout)
	}
	return s.sqliteMigrateLock(ctx)
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

// SQLite's lock is a lease row in changeflow_migrate_lock. SQLite has no
// session lock, and holding its write lock across the run would block goose
// itself. A second process (a `changeflow migrate` beside `serve`) waits for
// the row to go. A process killed mid-migration leaves the row behind; it
// counts as abandoned after sqliteLockStaleAfter and is taken over —
// SQLite migrations take milliseconds, so a live holder is never that old.
// The statements run on the pool, not a pinned connection, so an in-memory
// database (one connection) works too.
const (
	sqliteLockStaleAfter = time.Minute
	sqliteLockPoll       = 25 * time.Millisecond
)

// sqliteMigrateLock inserts the lock row, waiting while another owner holds
// it, and returns the function that deletes it.
func (s *Store) sqliteMigrateLock(ctx context.Context) (func() error, error) {
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS changeflow_migrate_lock (
		id        INTEGER PRIMARY KEY CHECK (id = 1),
		owner     TEXT NOT NULL,
		locked_at DATETIME NOT NULL
	)`); err != nil {
		return nil, fmt.Errorf("create migration lock table: %w", translate(err))
	}
	owner := randomToken()
	stale, staleArg := s.dialect.NowMinus(sqliteLockStaleAfter)
	deadline := time.NewTimer(s.opts.migrateLockTimeout)
	defer deadline.Stop()
	for {
		_, err := s.db.ExecContext(ctx,
			"INSERT INTO changeflow_migrate_lock (id, owner, locked_at) VALUES (1, ?, "+s.dialect.Now()+")", owner)
		if err == nil {
			break
		}
		switch err = translate(err); {
		case errors.Is(err, domain.ErrDuplicate):
			// Held: take it over only if abandoned.
			_, err := s.db.ExecContext(ctx, "DELETE FROM changeflow_migrate_lock WHERE id = 1 AND locked_at < "+stale, staleArg)
			if err = translate(err); err != nil && !errors.Is(err, domain.ErrBusy) {
				return nil, fmt.Errorf("clear stale migration lock: %w", err)
			}
		case errors.Is(err, domain.ErrBusy):
			// The holder is writing; try again.
		default:
			return nil, fmt.Errorf("take migration lock: %w", err)
		}
		poll := time.NewTimer(sqliteLockPoll)
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
	return func() error {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, err := s.db.ExecContext(ctx, "DELETE FROM changeflow_migrate_lock WHERE id = 1 AND owner = ?", owner)
		if err != nil {
			return fmt.Errorf("release migration lock: %w", translate(err))
		}
		return nil
	}, nil
}
