package gitlab_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"changeflow/internal/config"
	"changeflow/internal/gitlab"
)

func writeConfig(t *testing.T, file, base string, checkItems bool) {
	t.Helper()
	ci := "false"
	if checkItems {
		ci = "true"
	}
	y := `gitlab:
  baseURL: ` + base + `
  tokens:
    committer: local-committer-token
    approver1: local-approver-1-token
    approver2: local-approver-2-token
http:
  timeout:
    gitlab: 3s
breaker:
  failures: 7
  openFor: 45s
approval:
  maxRetries: 2
  backoffMs: 20
  checkItems:
    enabled: ` + ci + "\n"
	if err := os.WriteFile(file, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
}

// The adapter and the approver switch read configuration on every call:
// a reload flips the approver with no restart.
func TestConfigurationIsReadPerCall(t *testing.T) {
	e := newEnv(t)
	file := filepath.Join(t.TempDir(), "changeflow.yaml")
	writeConfig(t, file, e.base, false)
	m, err := config.Load(context.Background(), config.Options{File: file})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })

	s := gitlab.SettingsFromConfig(m.Current())
	if s.BaseURL != e.base || s.Tokens.Approver2 != "local-approver-2-token" || s.Timeout != 3*time.Second ||
		s.BreakerFailures != 7 || s.BreakerOpenFor != 45*time.Second {
		t.Fatalf("settings: %+v", s)
	}
	if l := gitlab.LoopSettingsFromConfig(m.Current()); l.MaxRetries != 2 || l.Backoff != 20*time.Millisecond {
		t.Fatalf("loop settings: %+v", l)
	}

	g := gitlab.New(gitlab.Options{Settings: func() gitlab.Settings { return gitlab.SettingsFromConfig(m.Current()) }})
	sel := gitlab.SelectingApprover{
		CheckItemsEnabled: func() bool { return m.Current().Approval().CheckItems },
		Library:           gitlab.LibraryApprover{GitLab: g},
		CheckItems:        gitlab.NewCheckItemsApprover(g, nil),
	}
	e.setCheckItems(gitlab.CheckItem{Key: "security", Version: 1})
	e.control("PUT", "/settings", map[string]any{"require_check_items": true})
	mr := e.openMR("req-config")

	wantErr(t, sel.Approve(ctx(t), gitlab.Approver1, project, mr.IID, mr.SHA), "Approve", 422)
	writeConfig(t, file, e.base, true)
	if err := m.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := sel.Approve(ctx(t), gitlab.Approver1, project, mr.IID, mr.SHA); err != nil {
		t.Fatalf("after the reload: %v", err)
	}
}
