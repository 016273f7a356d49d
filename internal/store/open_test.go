package store_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

func TestOpenSQLiteFileDSN(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	// The local run's DSN: a relative file URI whose directory does not exist
	// yet, and weaker settings that Open overrides.
	s := storetest.OpenDSN(t, store.DriverSQLite, "file:var/changeflow.db?_journal_mode=DELETE&_fk=0&_txlock=deferred")
	_, err := os.Stat(filepath.Join(dir, "var", "changeflow.db"))
	require.NoError(t, err, "parent directory and file created")

	pragma := func(name string) string {
		var v string
		require.NoError(t, s.DB().QueryRowContext(t.Context(), "PRAGMA "+name).Scan(&v))
		return v
	}
	require.Equal(t, "wal", pragma("journal_mode"))
	require.Equal(t, "1", pragma("foreign_keys"))
	require.Equal(t, "5000", pragma("busy_timeout"))
	require.Equal(t, "1", pragma("synchronous"), "NORMAL")
	require.Equal(t, store.DriverSQLite, s.Dialect().Name())
	require.NoError(t, s.Ping(t.Context()))
}

func TestOpenMySQLSession(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		onlyMySQL(t, s, "session variables")
		var zone, mode string
		var lockWait int
		require.NoError(t, s.DB().QueryRowContext(t.Context(),
			"SELECT @@session.time_zone, @@session.sql_mode, @@session.innodb_lock_wait_timeout").Scan(&zone, &mode, &lockWait))
		require.Equal(t, "+00:00", zone)
		require.Contains(t, mode, "STRICT_ALL_TABLES")
		require.Equal(t, 10, lockWait)
	})
}

func TestOpenRejectsUnknownDriver(t *testing.T) {
	_, err := store.Open(t.Context(), "postgres", "postgres://x")
	require.ErrorContains(t, err, `unknown driver "postgres"`)
}

func TestOpenFailsFastOnUnreachableMySQL(t *testing.T) {
	_, err := store.Open(t.Context(), store.DriverMySQL, "u:p@tcp(127.0.0.1:1)/changeflow?timeout=1s")
	require.Error(t, err)
}
