package config

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// watched loads path with a log buffer, starts Watch, and returns the
// manager, its swap channel and the log.
func watched(t *testing.T, path string) (*Manager, <-chan *Snapshot, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	o := testOptions(path)
	o.Logger = logs.logger()
	m := mustLoad(t, o)
	ch := swaps(m)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	require.NoError(t, m.Watch(ctx))
	return m, ch, logs
}

func approveFirst(s *Snapshot) bool { return s.Workflow().ApproveFirst }

func TestWatchAppliesFileEditsWithoutRestart(t *testing.T) {
	p := writeFile(t, t.TempDir(), "changeflow.yaml", "workflow:\n  approveFirst: false\n")
	m, ch, _ := watched(t, p)
	require.False(t, approveFirst(m.Current()))
	require.Equal(t, uint64(1), m.Current().Version())

	require.NoError(t, os.WriteFile(p, []byte("workflow:\n  approveFirst: true\n"), 0o644))
	s := waitFor(t, ch, "approveFirst is true", approveFirst)
	require.Same(t, s, m.Current())
	require.Greater(t, s.Version(), uint64(1))
}

func TestWatchPicksUpRenameReplace(t *testing.T) {
	p := writeFile(t, t.TempDir(), "changeflow.yaml", "batch:\n  maxRequests: 5\n")
	m, ch, _ := watched(t, p)
	for _, n := range []string{"6", "7"} { // twice: the watch survives the first replacement
		replaceFile(t, p, "batch:\n  maxRequests: "+n+"\n")
		waitFor(t, ch, "maxRequests is "+n, func(s *Snapshot) bool { return s.Batch().MaxRequests == atoi(n) })
	}
	require.Equal(t, 7, m.Current().Batch().MaxRequests)
}

func atoi(s string) int {
	n, _ := parseInt(s)
	return int(n)
}

// TestWatchFollowsAConfigMapSymlinkSwap reproduces the kubelet's layout:
// changeflow.yaml → ..data/changeflow.yaml, ..data → ..<timestamp>/, and an
// update that renames a new ..data symlink over the old one.
func TestWatchFollowsAConfigMapSymlinkSwap(t *testing.T) {
	dir := t.TempDir()
	mkVersion := func(name, content string) {
		require.NoError(t, os.Mkdir(filepath.Join(dir, name), 0o755))
		writeFile(t, filepath.Join(dir, name), "changeflow.yaml", content)
	}
	mkVersion("..2026_01", "ratelimit:\n  apply:\n    limit: 1\n")
	require.NoError(t, os.Symlink("..2026_01", filepath.Join(dir, "..data")))
	require.NoError(t, os.Symlink("..data/changeflow.yaml", filepath.Join(dir, "changeflow.yaml")))

	m, ch, _ := watched(t, filepath.Join(dir, "changeflow.yaml"))
	limit, _, _ := m.Current().RateLimit("apply")
	require.Equal(t, 1, limit)

	mkVersion("..2026_02", "ratelimit:\n  apply:\n    limit: 2\n")
	require.NoError(t, os.Symlink("..2026_02", filepath.Join(dir, "..data_tmp")))
	require.NoError(t, os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "..2026_01")))

	waitFor(t, ch, "apply limit is 2", func(s *Snapshot) bool { l, _, _ := s.RateLimit("apply"); return l == 2 })
}

func TestBrokenFileKeepsTheLastGoodSnapshot(t *testing.T) {
	good := "workflow:\n  approveFirst: true\n"
	for _, c := range []struct {
		name   string
		break_ func(t *testing.T, path string)
		msg    string
	}{
		{"invalid YAML", func(t *testing.T, p string) { writeFile(t, filepath.Dir(p), filepath.Base(p), "workflow: [unclosed\n") }, "parse"},
		{"not a mapping", func(t *testing.T, p string) { writeFile(t, filepath.Dir(p), filepath.Base(p), "- a\n- b\n") }, "parse"},
		{"unknown database driver", func(t *testing.T, p string) {
			writeFile(t, filepath.Dir(p), filepath.Base(p), "database:\n  driver: oracle\n")
		}, "database.driver 'oracle'"},
		{"mysql without DSN", func(t *testing.T, p string) {
			writeFile(t, filepath.Dir(p), filepath.Base(p), "database:\n  driver: mysql\n")
		}, "database.dsn is empty"},
		{"file truncated to nothing", func(t *testing.T, p string) { writeFile(t, filepath.Dir(p), filepath.Base(p), "") }, "is empty (partial write?)"},
		{"file deleted", func(t *testing.T, p string) { require.NoError(t, os.Remove(p)) }, "no such file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := writeFile(t, t.TempDir(), "changeflow.yaml", good)
			logs := &logBuffer{}
			o := testOptions(p)
			o.Logger = logs.logger()
			m := mustLoad(t, o)
			notified := swaps(m)
			before := m.Current()

			c.break_(t, p)
			err := m.Reload(context.Background())
			require.ErrorIs(t, err, ErrInvalid)
			require.ErrorContains(t, err, c.msg)
			require.Same(t, before, m.Current(), "the last good snapshot stays in force")
			require.True(t, approveFirst(m.Current()))
			require.Empty(t, notified)
			require.Contains(t, logs.String(), "level=ERROR")
			require.Contains(t, logs.String(), "keeping the last good configuration")

			// Fixing the file recovers.
			writeFile(t, filepath.Dir(p), filepath.Base(p), "workflow:\n  approveFirst: false\n")
			require.NoError(t, m.Reload(context.Background()))
			require.False(t, approveFirst(m.Current()))
			require.Equal(t, uint64(2), m.Current().Version())
		})
	}
}

func TestWatchSkipsABrokenWriteAndAppliesTheFix(t *testing.T) {
	p := writeFile(t, t.TempDir(), "changeflow.yaml", "batch:\n  maxRequests: 5\n")
	m, ch, logs := watched(t, p)
	replaceFile(t, p, "batch: [broken\n")
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "reload failed") }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, 5, m.Current().Batch().MaxRequests)
	replaceFile(t, p, "batch:\n  maxRequests: 9\n")
	s := waitFor(t, ch, "maxRequests is 9", func(s *Snapshot) bool { return s.Batch().MaxRequests == 9 })
	require.Equal(t, uint64(2), s.Version(), "the broken write produced no version")
}

func TestReloadWithoutChangesKeepsTheSnapshot(t *testing.T) {
	p := writeFile(t, t.TempDir(), "changeflow.yaml", "batch:\n  maxRequests: 5\n")
	m := mustLoad(t, testOptions(p))
	ch := swaps(m)
	before := m.Current()
	require.NoError(t, m.Reload(context.Background()))
	require.NoError(t, m.Reload(context.Background()))
	require.Same(t, before, m.Current())
	require.Empty(t, ch)
}

func TestSubscribersSeeOldAndNew(t *testing.T) {
	p := writeFile(t, t.TempDir(), "changeflow.yaml", "batch:\n  maxRequests: 5\n")
	m := mustLoad(t, testOptions(p))
	var got [][2]int
	m.Subscribe(func(old, s *Snapshot) { got = append(got, [2]int{old.Batch().MaxRequests, s.Batch().MaxRequests}) })
	writeFile(t, filepath.Dir(p), filepath.Base(p), "batch:\n  maxRequests: 6\n")
	require.NoError(t, m.Reload(context.Background()))
	require.Equal(t, [][2]int{{5, 6}}, got)
}

func TestRestartOnlyChangesAreLogged(t *testing.T) {
	p := writeFile(t, t.TempDir(), "changeflow.yaml", "server:\n  listen: 127.0.0.1:8080\n")
	logs := &logBuffer{}
	o := testOptions(p)
	o.Logger = logs.logger()
	m := mustLoad(t, o)
	writeFile(t, filepath.Dir(p), filepath.Base(p), "server:\n  listen: 127.0.0.1:9090\nworkflow:\n  approveFirst: true\n")
	require.NoError(t, m.Reload(context.Background()))
	require.Equal(t, "127.0.0.1:9090", m.Current().Server().Listen, "the snapshot shows the new value")
	require.Contains(t, logs.String(), "takes effect after a restart")
	require.Contains(t, logs.String(), "key=server.listen")
	require.NotContains(t, logs.String(), "key=workflow.approveFirst value=true", "per-request items are not restart-only")
}

func TestLoadFailsOnAnUnusableFile(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, path, msg string
	}{
		{"missing file", filepath.Join(dir, "nope.yaml"), "no such file"},
		{"invalid YAML", writeFile(t, dir, "bad.yaml", "a: [\n"), "parse"},
		{"a directory", dir, "read"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(context.Background(), testOptions(c.path))
			require.ErrorIs(t, err, ErrInvalid)
			require.ErrorContains(t, err, c.msg)
		})
	}
}

func TestEmptyFileAtStartupIsAnEmptyConfiguration(t *testing.T) {
	s := loadYAML(t, "")
	require.Equal(t, 50, s.Batch().MaxRequests)
	s = loadYAML(t, "# only a comment\n")
	require.Equal(t, 50, s.Batch().MaxRequests)
}

func TestUnknownKeysAndFallbacksAreLogged(t *testing.T) {
	logs := &logBuffer{}
	o := testOptions(writeFile(t, t.TempDir(), "changeflow.yaml", "workflow:\n  aproveFirst: true\nbatch:\n  maxRequests: -1\n"))
	o.Logger = logs.logger()
	mustLoad(t, o)
	require.Contains(t, logs.String(), `msg="config: unknown key ignored (misspelled?)" key="file: workflow.aproveFirst"`)
	require.Contains(t, logs.String(), `msg="config: item fell back" key=batch.maxRequests value=1`)
}

func TestWatchLifecycle(t *testing.T) {
	p := writeFile(t, t.TempDir(), "changeflow.yaml", "{}\n")
	m, err := Load(context.Background(), testOptions(p))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, m.Watch(ctx))
	require.ErrorIs(t, m.Watch(ctx), ErrWatching)
	cancel()
	require.NoError(t, m.Close())
	require.NoError(t, m.Close(), "Close is safe twice")

	t.Run("a manager without a file can watch", func(t *testing.T) {
		m := mustLoad(t, testOptions(""))
		require.NoError(t, m.Watch(context.Background()))
	})
	t.Run("close without watch", func(t *testing.T) {
		m, err := Load(context.Background(), testOptions(p))
		require.NoError(t, err)
		require.NoError(t, m.Close())
	})
}
