package storetest

import (
	"context"
	"database/sql"
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

// Migrating a fresh database costs 2–4 s under -race on a loaded 2-core
// machine (the SQLite migrations rebuild tables; MariaDB's DDL is a file
// operation per statement), and the suite opens several hundred of them.
// So the harness migrates once per test binary and database kind, into a
// template, and every test gets a copy of it: a byte copy of the SQLite
// file, or on MariaDB the template's tables created again from SHOW CREATE
// TABLE with their rows copied. The copy is the schema Migrate leaves, not
// a stand-in: TestTemplateCopyIsTheMigratedSchema compares the two, and
// Open still runs Migrate on the copy (which must find nothing to apply).
// Tests of migrating itself use NewDatabase, an empty database, as before.

// templateTimeout bounds building a template: migrating, plus the wait for
// another test binary that is building the same MariaDB template.
const templateTimeout = 5 * time.Minute

// NewMigratedDatabase creates a database for driver holding the current
// schema exactly as Migrate leaves it, and returns its DSN; it is removed
// when the test ends. Like NewDatabase, a MariaDB test without a
// configured server skips (or fails, see the package doc).
func NewMigratedDatabase(t testing.TB, driver string) string {
	t.Helper()
	switch driver {
	case store.DriverSQLite:
		image, err := sqliteTemplateImage()
		if err != nil {
			t.Fatalf("storetest: %v", err)
		}
		path := filepath.Join(t.TempDir(), "changeflow.db")
		if err := os.WriteFile(path, image, 0o600); err != nil {
			t.Fatalf("storetest: copy the SQLite template: %v", err)
		}
		return path
	case store.DriverMySQL:
		return newMySQLDatabaseFrom(t, true)
	default:
		t.Fatalf("storetest: unknown driver %q", driver)
		return ""
	}
}

// The templates are test-binary state, built once like buildOnce in the
// process tests; the usual "no mutable package globals" rule is relaxed for
// them as for skipNotice.
var (
	sqliteTemplate struct {
		once  sync.Once
		image []byte
		err   error
	}
	mysqlTemplate struct {
		once sync.Once
		plan *mysqlTemplatePlan
		err  error
	}
)

// sqliteTemplateImage returns the bytes of a migrated SQLite database file,
// built on first use in a directory removed right after.
func sqliteTemplateImage() ([]byte, error) {
	sqliteTemplate.once.Do(func() {
		sqliteTemplate.image, sqliteTemplate.err = buildSQLiteTemplate()
	})
	return sqliteTemplate.image, sqliteTemplate.err
}

func buildSQLiteTemplate() (image []byte, err error) {
	dir, err := os.MkdirTemp("", "changeflow-template-")
	if err != nil {
		return nil, fmt.Errorf("SQLite template: %w", err)
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), templateTimeout)
	defer cancel()
	path := filepath.Join(dir, "template.db")
	s, err := store.Open(ctx, store.DriverSQLite, path)
	if err != nil {
		return nil, fmt.Errorf("SQLite template: %w", err)
	}
	if _, err := s.Migrate(ctx); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("SQLite template: %w", err)
	}
	// Move every page the WAL holds into the main file, so that the file
	// alone is the database once the pool is closed.
	if _, err := s.DB().ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("SQLite template: checkpoint: %w", err)
	}
	if err := s.Close(); err != nil {
		return nil, fmt.Errorf("SQLite template: %w", err)
	}
	if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() > 0 {
		return nil, fmt.Errorf("SQLite template: %d bytes left in the WAL after closing", fi.Size())
	}
	image, err = os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("SQLite template: %w", err)
	}
	return image, nil
}

// mysqlTemplatePlan is how to copy the MariaDB template: each table's
// CREATE statement and, for the tables that hold rows after migrating
// (goose's version table), the columns to copy.
type mysqlTemplatePlan struct {
	database string
	tables   []mysqlTemplateTable
}

type mysqlTemplateTable struct {
	name   string
	create string
	// copyColumns are the stored (not generated) columns, quoted; empty
	// when the table is empty in the template.
	copyColumns string
}

// mysqlTemplateMarker is the table created last in a MariaDB template: a
// template without it was left half-built by a killed test binary.
const mysqlTemplateMarker = "cft_template_complete"

// mysqlTemplateFor returns the plan of the MariaDB template of the current
// migrations on the server of cfg, building the template first if no test
// binary did. The template is named after the migrations' digest and stays
// on the server (one small database per schema version; the test servers
// scripts/test-services.sh starts are thrown away whole), so that the
// binaries of one `go test ./...` share it. They serialize on a named lock
// while one builds it.
func mysqlTemplateFor(cfg *mysql.Config) (*mysqlTemplatePlan, error) {
	mysqlTemplate.once.Do(func() {
		mysqlTemplate.plan, mysqlTemplate.err = buildMySQLTemplate(cfg)
	})
	return mysqlTemplate.plan, mysqlTemplate.err
}

func buildMySQLTemplate(cfg *mysql.Config) (*mysqlTemplatePlan, error) {
	digest, err := store.MigrationsDigest(store.DriverMySQL)
	if err != nil {
		return nil, fmt.Errorf("MariaDB template: %w", err)
	}
	name := "cft_template_" + digest[:16]
	ctx, cancel := context.WithTimeout(context.Background(), templateTimeout)
	defer cancel()
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, fmt.Errorf("MariaDB template: %w", err)
	}
	defer admin.Close()
	conn, err := admin.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("MariaDB template: %w", err)
	}
	defer conn.Close()

	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", name, int(templateTimeout/time.Second)).Scan(&got); err != nil {
		return nil, fmt.Errorf("MariaDB template: lock: %w", err)
	}
	if got.Int64 != 1 {
		return nil, fmt.Errorf("MariaDB template: another test binary held the lock on %s for %s", name, templateTimeout)
	}
	defer func() { _, _ = conn.ExecContext(context.WithoutCancel(ctx), "DO RELEASE_LOCK(?)", name) }()

	var complete int
	if err := conn.QueryRowContext(ctx,
		"SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
		name, mysqlTemplateMarker).Scan(&complete); err != nil {
		return nil, fmt.Errorf("MariaDB template: %w", err)
	}
	if complete == 0 {
		if err := migrateMySQLTemplate(ctx, conn, cfg, name); err != nil {
			return nil, fmt.Errorf("MariaDB template %s: %w", name, err)
		}
	}
	plan, err := readMySQLTemplate(ctx, conn, name)
	if err != nil {
		return nil, fmt.Errorf("MariaDB template %s: %w", name, err)
	}
	return plan, nil
}

// migrateMySQLTemplate (re)creates the template database name, migrates it
// with the store, and marks it complete.
func migrateMySQLTemplate(ctx context.Context, conn *sql.Conn, cfg *mysql.Config, name string) error {
	for _, q := range []string{
		"DROP DATABASE IF EXISTS `" + name + "`",
		"CREATE DATABASE `" + name + "` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
	} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	dbCfg := cfg.Clone()
	dbCfg.DBName = name
	s, err := store.Open(ctx, store.DriverMySQL, dbCfg.FormatDSN())
	if err != nil {
		return err
	}
	_, err = s.Migrate(ctx)
	if cErr := s.Close(); err == nil {
		err = cErr
	}
	if err != nil {
		return err
	}
	_, err = conn.ExecContext(ctx, "CREATE TABLE `"+name+"`.`"+mysqlTemplateMarker+"` (done INT NOT NULL)")
	return err
}

// readMySQLTemplate reads the copy plan of the template database name. It
// refuses a template holding what the copy does not reproduce (views,
// triggers, routines, events): a migration that adds one must teach the
// copy first, or TestTemplateCopyIsTheMigratedSchema fails.
func readMySQLTemplate(ctx context.Context, conn *sql.Conn, name string) (*mysqlTemplatePlan, error) {
	for _, q := range []string{
		"SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_TYPE <> 'BASE TABLE'",
		"SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ?",
		"SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = ?",
		"SELECT COUNT(*) FROM information_schema.EVENTS WHERE EVENT_SCHEMA = ?",
	} {
		var n int
		if err := conn.QueryRowContext(ctx, q, name).Scan(&n); err != nil {
			return nil, err
		}
		if n > 0 {
			return nil, fmt.Errorf("holds objects the copy does not reproduce (%s): teach storetest's template copy about them", q)
		}
	}
	rows, err := conn.QueryContext(ctx,
		"SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME <> ? ORDER BY TABLE_NAME",
		name, mysqlTemplateMarker)
	if err != nil {
		return nil, err
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return nil, err
		}
		names = append(names, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("has no tables")
	}
	plan := &mysqlTemplatePlan{database: name}
	for _, table := range names {
		tt := mysqlTemplateTable{name: table}
		var ignored string
		if err := conn.QueryRowContext(ctx, "SHOW CREATE TABLE `"+name+"`.`"+table+"`").Scan(&ignored, &tt.create); err != nil {
			return nil, fmt.Errorf("show create table %s: %w", table, err)
		}
		var hasRows int
		if err := conn.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM `"+name+"`.`"+table+"`)").Scan(&hasRows); err != nil {
			return nil, err
		}
		if hasRows == 1 {
			if tt.copyColumns, err = storedColumns(ctx, conn, name, table); err != nil {
				return nil, err
			}
		}
		plan.tables = append(plan.tables, tt)
	}
	return plan, nil
}

// storedColumns lists table's columns that take a value on INSERT, quoted
// and comma-separated, in table order.
func storedColumns(ctx context.Context, conn *sql.Conn, schema, table string) (string, error) {
	rows, err := conn.QueryContext(ctx,
		"SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND IS_GENERATED = 'NEVER' ORDER BY ORDINAL_POSITION",
		schema, table)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var cols []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return "", err
		}
		cols = append(cols, "`"+c+"`")
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	return strings.Join(cols, ", "), nil
}

// copyTo creates the template's tables in the empty database target and
// copies their rows, on one session: foreign_key_checks=0 lets the tables
// be created in any order and is the session's alone.
func (p *mysqlTemplatePlan) copyTo(ctx context.Context, admin *sql.DB, target string) error {
	conn, err := admin.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "USE `"+target+"`"); err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, "SET SESSION foreign_key_checks = 0"); err != nil {
		return err
	}
	for _, tt := range p.tables {
		if _, err := conn.ExecContext(ctx, tt.create); err != nil {
			return fmt.Errorf("create table %s: %w", tt.name, err)
		}
		if tt.copyColumns == "" {
			continue
		}
		if _, err := conn.ExecContext(ctx, "INSERT INTO `"+tt.name+"` ("+tt.copyColumns+") SELECT "+
			tt.copyColumns+" FROM `"+p.database+"`.`"+tt.name+"`"); err != nil {
			return fmt.Errorf("copy rows of %s: %w", tt.name, err)
		}
	}
	// The session goes back to the pool only to be closed with it; reset
	// anyway so nothing else ever runs without foreign key checks.
	_, err = conn.ExecContext(ctx, "SET SESSION foreign_key_checks = 1")
	return err
}
