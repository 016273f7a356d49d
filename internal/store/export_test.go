package store

import (
	"errors"
	"time"

	"github.com/go-sql-driver/mysql"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Test-only access to unexported helpers for the external store_test
// package (which may import storetest; this package may not).

// Translate is translate.
func Translate(err error) error { return translate(err) }

// IsCheckViolation reports whether err is a CHECK constraint failure:
// MariaDB 4025 (ER_CONSTRAINT_FAILED), MySQL 8 3819
// (ER_CHECK_CONSTRAINT_VIOLATED), SQLite 275 (SQLITE_CONSTRAINT_CHECK).
// Production code has no use for it — an unknown enum value is a bug, a
// 500 — so it lives with the tests that tell it from other failures.
func IsCheckViolation(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == 4025 || me.Number == 3819
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() == sqlite3.SQLITE_CONSTRAINT_CHECK
	}
	return false
}

// PreparedReads is how many prepared read statements s keeps (prepared.go).
func PreparedReads(s *Store) int {
	s.reads.mu.Lock()
	defer s.reads.mu.Unlock()
	return len(s.reads.stmts)
}

// ParseDBTime is parseDBTime, for the test that feeds it the database
// clock's own text on each dialect.
func ParseDBTime(s string) (time.Time, bool) { return parseDBTime(s) }
