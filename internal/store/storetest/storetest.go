// Package storetest is the conformance harness for storage tests: it runs
// one test body against every supported database, each a fresh, migrated,
// throwaway database.
//
//	func TestClaim(t *testing.T) {
//		storetest.Each(t, func(t *testing.T, s *store.Store) { … })
//	}
//
// A migrated database is a copy of a template migrated once per test
// binary (template.go), which TestTemplateCopyIsTheMigratedSchema proves is
// the schema Migrate builds; NewDatabase gives an empty one, for tests of
// migrating itself.
//
// SQLite always runs (a temp file). MariaDB runs when
// CHANGEFLOW_TEST_MYSQL_DSN names a server account allowed to CREATE
// DATABASE (scripts/test-services.sh starts one and sets it); each test gets
// its own database, dropped at cleanup. Without the variable the MariaDB
// subtest skips with one loud line — or fails when
// CHANGEFLOW_TEST_REQUIRE_SERVICES=1, so CI never passes by skipping.
package storetest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"changeflow/internal/store"
)

// Environment variables the harness reads.
const (
	EnvMySQLDSN        = "CHANGEFLOW_TEST_MYSQL_DSN"
	EnvRequireServices = "CHANGEFLOW_TEST_REQUIRE_SERVICES"
)

// Drivers lists the databases Each runs against, in order.
func Drivers() []string { return []string{store.DriverSQLite, store.DriverMySQL} }

// Each runs fn as a subtest named after each driver ("sqlite", "mysql"),
// with a fresh migrated database.
func Each(t *testing.T, fn func(t *testing.T, s *store.Store)) {
	t.Helper()
	for _, driver := range Drivers() {
		t.Run(driver, func(t *testing.T) {
			fn(t, Open(t, driver))
		})
	}
}

// JourneySubtest is the name of OnSQLite's one subtest. make test runs the
// subtests of this name in a run of its own without -race, and skips them
// in the -race run (Makefile, docs/storage.md "Which tests run under
// -race"): they prove a sequence of steps, which the race detector adds
// nothing to and makes several times slower.
const JourneySubtest = "sqlite-journey"

// OnSQLite runs fn as the one subtest JourneySubtest, with a fresh migrated
// SQLite database: for an end-to-end journey through the workflow, whose
// claim is the journey's and not the database's. Every statement the
// journey runs is the store's, proven alike on both databases by the
// store's own conformance tests (Each); a test whose claim is about the
// database — several actors racing over one, a lease, a lock, a crash, a
// clock, the size of an IN list — runs on both with Each (docs/storage.md,
// "Tests: the conformance harness"). A test on SQLite alone whose own
// goroutines race each other uses RaceOnSQLite.
func OnSQLite(t *testing.T, fn func(t *testing.T, s *store.Store)) {
	t.Helper()
	t.Run(JourneySubtest, func(t *testing.T) {
		fn(t, Open(t, store.DriverSQLite))
	})
}

// RaceOnSQLite runs fn as the one subtest "sqlite", with a fresh migrated
// SQLite database, and stays in make test's -race run: for a test on one
// database whose claim is about goroutines racing each other — Start and
// Stop called concurrently, a background loop, two rounds at once, a step
// raced by the test — where the race detector is part of the proof.
func RaceOnSQLite(t *testing.T, fn func(t *testing.T, s *store.Store)) {
	t.Helper()
	t.Run(store.DriverSQLite, func(t *testing.T) {
		fn(t, Open(t, store.DriverSQLite))
	})
}

// EachDSN runs fn as a subtest per driver with the DSN of a fresh, empty
// (unmigrated) database, for tests of Open and Migrate themselves.
func EachDSN(t *testing.T, fn func(t *testing.T, driver, dsn string)) {
	t.Helper()
	for _, driver := range Drivers() {
		t.Run(driver, func(t *testing.T) {
			fn(t, driver, NewDatabase(t, driver))
		})
	}
}

// Open returns a store on a fresh database of driver, migrated, closed and
// dropped when the test ends. The database is a copy of a template migrated
// once per test binary (NewMigratedDatabase); Migrate still runs on it and
// must find nothing to apply.
func Open(t testing.TB, driver string) *store.Store {
	t.Helper()
	s := OpenDSN(t, driver, NewMigratedDatabase(t, driver))
	applied, err := s.Migrate(testContext(t))
	if err != nil {
		t.Fatalf("storetest: migrate %s: %v", driver, err)
	}
	if len(applied) > 0 {
		t.Fatalf("storetest: the %s template was not current: Migrate applied %v to its copy", driver, applied)
	}
	return s
}

// OpenDSN opens a store on dsn, closed when the test ends. It does not
// migrate.
func OpenDSN(t testing.TB, driver, dsn string, opts ...store.Option) *store.Store {
	t.Helper()
	s, err := store.Open(testContext(t), driver, dsn, opts...)
	if err != nil {
		t.Fatalf("storetest: open %s: %v", driver, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("storetest: %v", err)
		}
	})
	return s
}

// NewDatabase creates an empty database for driver and returns its DSN; it
// is removed when the test ends. A MariaDB test without a configured server
// skips (or fails, see the package doc) here.
func NewDatabase(t testing.TB, driver string) string {
	t.Helper()
	switch driver {
	case store.DriverSQLite:
		// A plain path, not a file: URI: TempDir keeps characters such as
		// '#' and '%' from the test name that a URI would misread.
		return filepath.Join(t.TempDir(), "changeflow.db")
	case store.DriverMySQL:
		return newMySQLDatabaseFrom(t, false)
	default:
		t.Fatalf("storetest: unknown driver %q", driver)
		return ""
	}
}

// skipNotice prints the "MariaDB skipped" line once per test binary rather
// than once per test; it is output-only state, so the usual "no mutable
// package globals" rule is relaxed for it.
var skipNotice sync.Once

// newMySQLDatabaseFrom creates a uniquely named database on the server of
// EnvMySQLDSN, a copy of the migrated template when migrated is set, and
// drops it at cleanup.
func newMySQLDatabaseFrom(t testing.TB, migrated bool) string {
	t.Helper()
	base := os.Getenv(EnvMySQLDSN)
	if base == "" {
		const msg = "storetest: " + EnvMySQLDSN + " is not set — MariaDB conformance tests SKIPPED; run them with scripts/test-services.sh"
		if os.Getenv(EnvRequireServices) == "1" {
			t.Fatal(msg + " (" + EnvRequireServices + "=1 requires them)")
		}
		skipNotice.Do(func() { fmt.Fprintln(os.Stderr, msg) })
		t.Skip(msg)
	}
	cfg, err := mysql.ParseDSN(base)
	if err != nil {
		t.Fatalf("storetest: %s: %v", EnvMySQLDSN, err)
	}
	cfg.DBName = ""
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	defer admin.Close()

	name := databaseName(t.Name())
	ctx := testContext(t)
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		t.Fatalf("storetest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		// Runs after the store's Close: OpenDSN registers that later, and
		// cleanups run last-in first-out. t.Context() is already done here.
		admin, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			t.Errorf("storetest: %v", err)
			return
		}
		defer admin.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
			t.Errorf("storetest: drop database %s: %v", name, err)
		}
	})
	if migrated {
		plan, err := mysqlTemplateFor(cfg)
		if err != nil {
			t.Fatalf("storetest: %v", err)
		}
		if err := plan.copyTo(ctx, admin, name); err != nil {
			t.Fatalf("storetest: copy the MariaDB template into %s: %v", name, err)
		}
	}
	cfg.DBName = name
	return cfg.FormatDSN()
}

// databaseName derives a unique, legal database name (at most 64
// characters of [a-z0-9_]) from a test name, readable in SHOW DATABASES.
func databaseName(testName string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(testName) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	slug := b.String()
	if len(slug) > 40 {
		slug = slug[len(slug)-40:]
	}
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix) // crypto/rand.Read never fails
	return "cft_" + slug + "_" + hex.EncodeToString(suffix)
}

// testContext is the context for harness work: the test's own, which ends
// when the test does.
func testContext(t testing.TB) context.Context {
	return t.Context()
}
