package storetest_test

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// TestTemplateCopyIsTheMigratedSchema: the database every test gets (a copy
// of a template migrated once) is the one Migrate builds on an empty
// database — the same tables, columns, generated columns, indexes, CHECK
// and foreign key constraints, triggers, table options and rows (goose's
// version table), on both databases. If a migration adds something the copy
// does not reproduce, this fails and names it.
func TestTemplateCopyIsTheMigratedSchema(t *testing.T) {
	for _, driver := range storetest.Drivers() {
		t.Run(driver, func(t *testing.T) {
			fresh := storetest.OpenDSN(t, driver, storetest.NewDatabase(t, driver))
			applied, err := fresh.Migrate(t.Context())
			require.NoError(t, err)
			require.NotEmpty(t, applied)
			copied := storetest.OpenDSN(t, driver, storetest.NewMigratedDatabase(t, driver))

			want, got := describeSchema(t, fresh), describeSchema(t, copied)
			require.Greater(t, strings.Count(want, "\n"), 50, "the description reads the schema")
			require.Equal(t, want, got)

			applied, err = copied.Migrate(t.Context())
			require.NoError(t, err)
			require.Empty(t, applied, "the copy is current")
			_, _, pending, err := copied.MigrationStatus(t.Context())
			require.NoError(t, err)
			require.False(t, pending)
		})
	}
}

// TestTemplateCopiesAreIsolatedFromTheTemplate: what a test writes in its
// copy is in no other copy, including one made afterwards.
func TestTemplateCopiesAreIsolatedFromTheTemplate(t *testing.T) {
	for _, driver := range storetest.Drivers() {
		t.Run(driver, func(t *testing.T) {
			a := storetest.Open(t, driver)
			_, err := a.DB().ExecContext(t.Context(), "INSERT INTO gitlab_event (event_uuid, kind) VALUES ('u', 'k')")
			require.NoError(t, err)
			b := storetest.Open(t, driver)
			var n int
			require.NoError(t, b.DB().QueryRowContext(t.Context(), "SELECT COUNT(*) FROM gitlab_event").Scan(&n))
			require.Zero(t, n)
		})
	}
}

// describeSchema prints everything a migration leaves in s's database, in
// a stable order, with the database's own name and the migration times
// (which differ between any two runs) left out.
func describeSchema(t *testing.T, s *store.Store) string {
	t.Helper()
	ctx := t.Context()
	var b strings.Builder
	var tables []string
	if s.Dialect().IsMySQL() {
		var schema string
		require.NoError(t, s.DB().QueryRowContext(ctx, "SELECT DATABASE()").Scan(&schema))
		for _, q := range []string{
			"SELECT TABLE_NAME, TABLE_TYPE, ENGINE, TABLE_COLLATION, CREATE_OPTIONS, TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? ORDER BY TABLE_NAME",
			"SELECT TABLE_NAME, COLUMN_NAME, ORDINAL_POSITION, COLUMN_DEFAULT, IS_NULLABLE, COLUMN_TYPE, CHARACTER_SET_NAME, COLLATION_NAME, EXTRA, IS_GENERATED, GENERATION_EXPRESSION FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? ORDER BY TABLE_NAME, ORDINAL_POSITION",
			"SELECT TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX, COLUMN_NAME, NON_UNIQUE, SUB_PART, INDEX_TYPE FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? ORDER BY TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX",
			"SELECT TABLE_NAME, CONSTRAINT_NAME, CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = ? ORDER BY TABLE_NAME, CONSTRAINT_NAME",
			"SELECT TABLE_NAME, CONSTRAINT_NAME, CONSTRAINT_TYPE FROM information_schema.TABLE_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = ? ORDER BY TABLE_NAME, CONSTRAINT_NAME",
			"SELECT TABLE_NAME, CONSTRAINT_NAME, COLUMN_NAME, REFERENCED_TABLE_NAME, REFERENCED_COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE CONSTRAINT_SCHEMA = ? ORDER BY TABLE_NAME, CONSTRAINT_NAME, ORDINAL_POSITION",
			"SELECT TRIGGER_NAME, EVENT_OBJECT_TABLE, ACTION_TIMING, EVENT_MANIPULATION, ACTION_STATEMENT FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ? ORDER BY TRIGGER_NAME",
			"SELECT ROUTINE_NAME FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = ? ORDER BY ROUTINE_NAME",
			"SELECT EVENT_NAME FROM information_schema.EVENTS WHERE EVENT_SCHEMA = ? ORDER BY EVENT_NAME",
		} {
			dumpRows(t, &b, s.DB(), q, schema)
		}
		tables = queryStrings(t, s.DB(), "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? ORDER BY TABLE_NAME", schema)
		for _, table := range tables {
			var ignored, create string
			require.NoError(t, s.DB().QueryRowContext(ctx, "SHOW CREATE TABLE `"+table+"`").Scan(&ignored, &create))
			fmt.Fprintf(&b, "%s\n", create)
		}
	} else {
		dumpRows(t, &b, s.DB(), "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name")
		for _, pragma := range []string{"user_version", "application_id", "foreign_keys", "journal_mode"} {
			dumpRows(t, &b, s.DB(), "PRAGMA "+pragma)
		}
		tables = queryStrings(t, s.DB(), "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
	}
	for _, table := range tables {
		fmt.Fprintf(&b, "rows of %s:\n", table)
		dumpRows(t, &b, s.DB(), "SELECT * FROM `"+table+"` ORDER BY 1")
	}
	return b.String()
}

// migrationTime matches goose's per-migration timestamps.
var migrationTime = regexp.MustCompile(`\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?( \+0000 UTC)?`)

func dumpRows(t *testing.T, b *strings.Builder, db *sql.DB, q string, args ...any) {
	t.Helper()
	rows, err := db.QueryContext(context.WithoutCancel(t.Context()), q, args...)
	require.NoError(t, err, q)
	defer rows.Close()
	cols, err := rows.Columns()
	require.NoError(t, err)
	fmt.Fprintf(b, "%s\n", strings.Join(cols, "|"))
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		require.NoError(t, rows.Scan(ptrs...))
		parts := make([]string, len(vals))
		for i, v := range vals {
			if bs, ok := v.([]byte); ok {
				v = string(bs)
			}
			parts[i] = migrationTime.ReplaceAllString(fmt.Sprint(v), "<time>")
		}
		fmt.Fprintf(b, "%s\n", strings.Join(parts, "|"))
	}
	require.NoError(t, rows.Err())
}

func queryStrings(t *testing.T, db *sql.DB, q string, args ...any) []string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), q, args...)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	return out
}
