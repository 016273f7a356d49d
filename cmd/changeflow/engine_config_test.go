package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"changeflow/internal/config"
	"changeflow/internal/store"
)

// TestServeEngineFollowsWorkflowPollInterval checks that serve's engine
// takes workflow.pollInterval from the configuration: the built-in
// default, a configured value, the clamp of 0 (which would spin), and a
// reload, which applies without a restart.
func TestServeEngineFollowsWorkflowPollInterval(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	file := filepath.Join(dir, "changeflow.yaml")
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.Open(ctx, "sqlite", "file:"+filepath.Join(dir, "cf.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })

	writeConfig(t, file, sqliteConfig(t, dir, ""))
	cfg, err := config.Load(ctx, config.Options{File: file, Getenv: func(string) string { return "" }, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cfg.Close() })
	engine, err := newEngine(cfg, st, logger)
	if err != nil {
		t.Fatal(err)
	}
	if got := engine.PollInterval(); got != time.Second {
		t.Fatalf("unset workflow.pollInterval: engine polls every %v, want the 1s default", got)
	}

	for _, c := range []struct {
		value string
		want  time.Duration
	}{
		{"250ms", 250 * time.Millisecond},
		{"40", 40 * time.Millisecond}, // a bare integer is milliseconds
		{"0", 10 * time.Millisecond},  // clamped: 0 would spin
		{"not-a-duration", time.Second},
	} {
		writeConfig(t, file, sqliteConfig(t, dir, "workflow:\n  pollInterval: "+c.value+"\n"))
		if err := cfg.Reload(ctx); err != nil {
			t.Fatalf("reload with pollInterval %s: %v", c.value, err)
		}
		if got := engine.PollInterval(); got != c.want {
			t.Fatalf("workflow.pollInterval %s: engine polls every %v, want %v", c.value, got, c.want)
		}
	}
}
