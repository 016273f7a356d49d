package config

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testOptions are deterministic Options: fixed host name, pid and clock,
// no environment, a short debounce.
func testOptions(file string) Options {
	return Options{
		File:     file,
		Hostname: func() (string, error) { return "testhost", nil },
		Pid:      func() int { return 42 },
		Now:      func() time.Time { return time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC) },
		Debounce: 20 * time.Millisecond,
	}
}

// mustLoad loads and closes the manager when the test ends.
func mustLoad(tb testing.TB, opts Options) *Manager {
	tb.Helper()
	m, err := Load(context.Background(), opts)
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, m.Close()) })
	return m
}

// writeFile writes content to dir/name and returns the path.
func writeFile(tb testing.TB, dir, name, content string) string {
	tb.Helper()
	p := filepath.Join(dir, name)
	require.NoError(tb, os.WriteFile(p, []byte(content), 0o644))
	return p
}

// loadYAML loads a snapshot from one YAML document.
func loadYAML(tb testing.TB, doc string) *Snapshot {
	tb.Helper()
	p := writeFile(tb, tb.TempDir(), "changeflow.yaml", doc)
	return mustLoad(tb, testOptions(p)).Current()
}

// yamlFor renders key: value as nested YAML; value is YAML source text
// ("" renders `key:` i.e. null).
func yamlFor(key, value string) string { return yamlDoc(map[string]string{key: value}) }

// yamlDoc renders several dotted keys as one nested YAML document, values
// as YAML source text.
func yamlDoc(kv map[string]string) string {
	tree := map[string]any{}
	for k, v := range kv {
		node := tree
		parts := strings.Split(k, ".")
		for _, p := range parts[:len(parts)-1] {
			next, ok := node[p].(map[string]any)
			if !ok {
				next = map[string]any{}
				node[p] = next
			}
			node = next
		}
		node[parts[len(parts)-1]] = v
	}
	var b strings.Builder
	var render func(n map[string]any, depth int)
	render = func(n map[string]any, depth int) {
		for _, k := range sortedKeys(n) {
			b.WriteString(strings.Repeat("  ", depth) + k + ":")
			switch v := n[k].(type) {
			case map[string]any:
				b.WriteString("\n")
				render(v, depth+1)
			case string:
				if v != "" {
					b.WriteString(" " + v)
				}
				b.WriteString("\n")
			}
		}
	}
	render(tree, 0)
	return b.String()
}

// logBuffer is a goroutine-safe log sink for asserting on log lines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// swaps subscribes to m and returns a channel of new snapshots.
func swaps(m *Manager) <-chan *Snapshot {
	ch := make(chan *Snapshot, 64)
	m.Subscribe(func(_, s *Snapshot) {
		select {
		case ch <- s:
		default:
		}
	})
	return ch
}

// waitFor waits (bounded) for a swapped-in snapshot satisfying ok.
func waitFor(tb testing.TB, ch <-chan *Snapshot, what string, ok func(*Snapshot) bool) *Snapshot {
	tb.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case s := <-ch:
			if ok(s) {
				return s
			}
		case <-deadline:
			tb.Fatalf("timed out waiting for a reload where %s", what)
			return nil
		}
	}
}

// replaceFile writes content next to path and renames it over path, the
// way editors and config-management tools do.
func replaceFile(tb testing.TB, path, content string) {
	tb.Helper()
	tmp := path + ".tmp"
	require.NoError(tb, os.WriteFile(tmp, []byte(content), 0o644))
	require.NoError(tb, os.Rename(tmp, path))
}
