package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"
)

// migrationFiles holds the versioned schema of both dialects. The two
// directories carry the same versions and the same logical tables; a change
// to one is a change to both (the conformance tests run on both).
//
//go:embed migrations/mysql/*.sql migrations/sqlite/*.sql
var migrationFiles embed.FS

// migrationTable is goose's version table, goose's default name.
const migrationTable = goose.DefaultTablename

// newProvider builds the goose provider of the store's dialect. It has no
// goose locker: Migrate holds its own lock around the run (migrate_lock.go).
func (s *Store) newProvider() (*goose.Provider, error) {
	fsys, err := s.migrationFS()
	if err != nil {
		return nil, fmt.Errorf("migrations of %s: %w", s.dialect.name, err)
	}
	p, err := goose.NewProvider(s.dialect.goose(), s.db, fsys,
		goose.WithDisableGlobalRegistry(true),
		goose.WithSlog(s.opts.logger),
	)
	if err != nil {
		return nil, fmt.Errorf("migration provider: %w", err)
	}
	return p, nil
}

// randomToken returns 16 random hex characters.
func randomToken() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// Migrate applies every pending migration and returns the versions it
// applied, in order; nil when the schema was already current. Several
// instances may call it at once on one database: they queue on a
// database-wide lock and the later ones find nothing to apply.
//
// On MariaDB DDL is not transactional: a migration that fails half-way
// leaves its earlier statements applied and is not recorded, so migration
// files keep one table per file where they can.
func (s *Store) Migrate(ctx context.Context) (applied []int64, err error) {
	unlock, err := s.migrateLock(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate %s: %w", s.dialect.name, err)
	}
	defer func() {
		if uErr := unlock(); uErr != nil {
			err = errors.Join(err, fmt.Errorf("migrate %s: %w", s.dialect.name, uErr))
		}
	}()
	results, err := s.provider.Up(ctx)
	for _, r := range results {
		if r != nil && r.Source != nil && r.Error == nil {
			applied = append(applied, r.Source.Version)
		}
	}
	if err != nil {
		return applied, fmt.Errorf("migrate %s: %w", s.dialect.name, err)
	}
	return applied, nil
}

// MigrationStatus reports the database's schema version (0 when never
// migrated), the latest version this binary knows, and whether any known
// migration is not applied — the "migrations current" check of GET /readyz.
//
// It reads goose's version table directly rather than through the
// provider: the provider would create the table as a side effect, and it
// serializes with a running Migrate, so a readiness probe would hang for the
// whole migration instead of answering "pending".
func (s *Store) MigrationStatus(ctx context.Context) (current, latest int64, pending bool, err error) {
	known := s.provider.ListSources()
	for _, src := range known {
		latest = max(latest, src.Version)
	}
	var n int
	if err := s.db.QueryRowContext(ctx, s.dialect.tableExistsQuery(), migrationTable).Scan(&n); err != nil {
		return 0, latest, false, fmt.Errorf("migration status: %w", translate(err))
	}
	if n == 0 {
		return 0, latest, len(known) > 0, nil
	}
	rows, err := s.db.QueryContext(ctx,
		"SELECT DISTINCT version_id FROM "+migrationTable+" WHERE is_applied = 1 AND version_id > 0")
	if err != nil {
		return 0, latest, false, fmt.Errorf("migration status: %w", translate(err))
	}
	defer rows.Close()
	applied := map[int64]bool{}
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			return 0, latest, false, fmt.Errorf("migration status: %w", err)
		}
		applied[v] = true
		current = max(current, v)
	}
	if err := rows.Err(); err != nil {
		return 0, latest, false, fmt.Errorf("migration status: %w", translate(err))
	}
	for _, src := range known {
		if !applied[src.Version] {
			pending = true
		}
	}
	return current, latest, pending, nil
}

// MigrationsDigest returns a hex SHA-256 over the names and contents of the
// migration files of driver (DriverSQLite or DriverMySQL): two binaries with
// the same digest build the same schema. The test harness keys its
// pre-migrated template database on it (storetest), so a template built by
// an older binary is never mistaken for the current schema.
func MigrationsDigest(driver string) (string, error) {
	if driver != DriverSQLite && driver != DriverMySQL {
		return "", fmt.Errorf("migrations digest: unknown driver %q", driver)
	}
	fsys, err := fs.Sub(migrationFiles, "migrations/"+driver)
	if err != nil {
		return "", fmt.Errorf("migrations digest of %s: %w", driver, err)
	}
	h := sha256.New()
	// fs.WalkDir visits in lexical order, so the digest is stable.
	err = fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("migrations digest of %s: %w", driver, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
