package store

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSQLiteDSN(t *testing.T) {
	tests := []struct {
		name       string
		dsn        string
		wantPath   string
		wantMemory bool
		wantBusy   string
		wantSync   string
	}{
		{"relative file URI", "file:var/changeflow.db", "var/changeflow.db", false, "5000", "NORMAL"},
		{"absolute file URI", "file:///tmp/x/changeflow.db", "/tmp/x/changeflow.db", false, "5000", "NORMAL"},
		{"plain path", "var/changeflow.db", "var/changeflow.db", false, "5000", "NORMAL"},
		{"escaped file URI", "file:var/my%20db.db", "var/my db.db", false, "5000", "NORMAL"},
		{"caller's busy timeout and sync kept", "file:x.db?_busy_timeout=100&_synchronous=FULL", "x.db", false, "100", "FULL"},
		{"memory", ":memory:", ":memory:", true, "5000", "NORMAL"},
		{"memory URI", "file::memory:?cache=shared", ":memory:", true, "5000", "NORMAL"},
		{"mode=memory", "file:db1?mode=memory", "db1", true, "5000", "NORMAL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			full, path, memory, err := sqliteDSN(tt.dsn)
			require.NoError(t, err)
			require.Equal(t, tt.wantPath, path)
			require.Equal(t, tt.wantMemory, memory)
			_, query, ok := strings.Cut(full, "?")
			require.True(t, ok)
			q, err := url.ParseQuery(query)
			require.NoError(t, err)
			require.Equal(t, "immediate", q.Get("_txlock"))
			require.Equal(t, "1", q.Get("_foreign_keys"))
			require.Equal(t, tt.wantBusy, q.Get("_busy_timeout"))
			require.Equal(t, tt.wantSync, q.Get("_synchronous"))
			if tt.wantMemory {
				require.False(t, q.Has("_journal_mode"))
			} else {
				require.Equal(t, "WAL", q.Get("_journal_mode"))
			}
		})
	}
}

func TestSQLiteDSNOverridesWeakerSettings(t *testing.T) {
	full, _, _, err := sqliteDSN("file:x.db?_txlock=deferred&_fk=0&_journal=DELETE&_journal_mode=DELETE")
	require.NoError(t, err)
	_, query, _ := strings.Cut(full, "?")
	q, err := url.ParseQuery(query)
	require.NoError(t, err)
	require.Equal(t, "immediate", q.Get("_txlock"))
	require.False(t, q.Has("_fk"), "the alias would win over _foreign_keys")
	require.False(t, q.Has("_journal"), "the alias would win over _journal_mode")
	require.Equal(t, "WAL", q.Get("_journal_mode"))
}

func TestMySQLConfigEnforcesSessionSettings(t *testing.T) {
	cfg, err := mysqlConfig("u:p@tcp(db:3306)/changeflow?parseTime=false&loc=Local&clientFoundRows=false&time_zone=%27SYSTEM%27",
		options{lockWaitTimeout: 3 * time.Second})
	require.NoError(t, err)
	require.True(t, cfg.ParseTime)
	require.Equal(t, time.UTC, cfg.Loc)
	require.True(t, cfg.ClientFoundRows)
	require.Equal(t, "'+00:00'", cfg.Params["time_zone"])
	require.Equal(t, mysqlSQLMode, cfg.Params["sql_mode"])
	require.Equal(t, "3", cfg.Params["innodb_lock_wait_timeout"])
	require.Equal(t, "changeflow", cfg.DBName)
}

func TestMySQLConfigNeedsDatabase(t *testing.T) {
	_, err := mysqlConfig("u:p@tcp(db:3306)/", options{})
	require.ErrorContains(t, err, "names no database")
}

func TestRedactDSN(t *testing.T) {
	got := RedactDSN(DriverMySQL, "changeflow:s3cret@tcp(db:3306)/changeflow")
	require.NotContains(t, got, "s3cret")
	require.Contains(t, got, "changeflow:xxxxx@tcp(db:3306)/changeflow")
	require.Equal(t, "file:var/x.db", RedactDSN(DriverSQLite, "file:var/x.db"))
}
