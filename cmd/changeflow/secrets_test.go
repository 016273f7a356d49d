package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"changeflow/internal/config"
	"changeflow/internal/sim/simtoken"
)

// serveErr runs `changeflow serve --config file` in-process with env and
// returns its stdout, stderr and error once it exits; a serve that starts
// is stopped and reported as a nil error.
func serveErr(t *testing.T, file string, env map[string]string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, errb := &syncBuffer{}, &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"changeflow", "serve", "--config", file}, func(k string) string { return env[k] }, out, errb)
	}()
	for {
		select {
		case err := <-done:
			return out.String(), errb.String(), err
		default:
		}
		if strings.Contains(out.String(), "serving on") {
			cancel()
			err := <-done
			return out.String(), errb.String(), err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServeRefusesTheExampleConfiguration is finding 5 as reported:
// docs/changeflow.example.yaml with only its database and directory moved
// used to start and serve with the simulators' published tokens; now
// serve refuses, naming every token item and how to make a real one, and
// opens nothing (no "serving" line).
func TestServeRefusesTheExampleConfiguration(t *testing.T) {
	dir := t.TempDir()
	example := filepath.Join("..", "..", "docs", "changeflow.example.yaml")
	env := map[string]string{
		"CHANGEFLOW_DATABASE_DRIVER":        "sqlite",
		"CHANGEFLOW_DATABASE_DSN":           "file:" + filepath.Join(dir, "cf.db"),
		"CHANGEFLOW_IDENTITY_DIRECTORYFILE": filepath.Join(dir, "directory.yaml"),
		"CHANGEFLOW_SERVER_LISTEN":          "127.0.0.1:0",
	}
	stdout, _, err := serveErr(t, example, env)
	if !errors.Is(err, errWeakSecrets) {
		t.Fatalf("serve on the example = %v (stdout %q), want the refusal", err, stdout)
	}
	for _, key := range []string{"gitlab.tokens.committer", "gitlab.tokens.approver1", "gitlab.tokens.approver2",
		"callbacks.tokens.approval", "callbacks.tokens.deploy", "callbacks.tokens.gitlab"} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("the refusal does not name %s:\n%v", key, err)
		}
	}
	if !strings.Contains(err.Error(), config.GenerateHint) {
		t.Errorf("the refusal does not say how to generate a secret:\n%v", err)
	}
	if strings.Contains(stdout, "serving on") {
		t.Fatal("serve served on the example configuration")
	}
	if _, statErr := os.Stat(filepath.Join(dir, "cf.db")); statErr == nil {
		t.Error("serve opened the database before refusing")
	}
}

// TestServeRefusesEachWeakToken: every rule at start-up, one token at a
// time against an otherwise strong configuration, each naming its item;
// the strong configuration itself starts.
func TestServeRefusesEachWeakToken(t *testing.T) {
	strong := map[string]string{
		"CHANGEFLOW_GITLAB_TOKENS_COMMITTER":   procCommitterToken,
		"CHANGEFLOW_GITLAB_TOKENS_APPROVER1":   procApprover1Token,
		"CHANGEFLOW_GITLAB_TOKENS_APPROVER2":   procApprover2Token,
		"CHANGEFLOW_CALLBACKS_TOKENS_APPROVAL": procApprovalToken,
		"CHANGEFLOW_CALLBACKS_TOKENS_DEPLOY":   procDeployToken,
		"CHANGEFLOW_CALLBACKS_TOKENS_GITLAB":   procWebhookToken,
	}
	cases := []struct {
		name, env, value, want string
		also                   string // a second item named (a shared value)
	}{
		{"a well-known committer token", "CHANGEFLOW_GITLAB_TOKENS_COMMITTER", simtoken.Committer, "gitlab.tokens.committer", ""},
		{"the well-known webhook token", "CHANGEFLOW_CALLBACKS_TOKENS_GITLAB", simtoken.Webhook, "callbacks.tokens.gitlab", ""},
		{"the well-known callback token", "CHANGEFLOW_CALLBACKS_TOKENS_APPROVAL", simtoken.Callback, "callbacks.tokens.approval", ""},
		{"a short deploy token", "CHANGEFLOW_CALLBACKS_TOKENS_DEPLOY", "0123456789abcdef0123456789abcde", "callbacks.tokens.deploy", ""},
		{"a short approver token", "CHANGEFLOW_GITLAB_TOKENS_APPROVER1", "glpat-short", "gitlab.tokens.approver1", ""},
		{"deploy sharing approval's token", "CHANGEFLOW_CALLBACKS_TOKENS_DEPLOY", procApprovalToken, "callbacks.tokens.deploy", "callbacks.tokens.approval"},
		{"a bot sharing the webhook's token", "CHANGEFLOW_GITLAB_TOKENS_APPROVER2", procWebhookToken, "gitlab.tokens.approver2", "callbacks.tokens.gitlab"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "changeflow.yaml")
			// The tokens are in the file (CHANGEFLOW_ names a family entry
			// only when a file names it too); the weak one comes by env.
			writeConfig(t, file, sqliteConfig(t, dir, tokensYAML(strong)))
			_, _, err := serveErr(t, file, map[string]string{c.env: c.value})
			if !errors.Is(err, errWeakSecrets) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("serve = %v, want a refusal naming %s", err, c.want)
			}
			if c.also != "" && !strings.Contains(err.Error(), c.also) {
				t.Fatalf("the refusal does not name %s too:\n%v", c.also, err)
			}
			if strings.Contains(err.Error(), c.value) {
				t.Fatalf("the refusal echoes the secret:\n%v", err)
			}
		})
	}
	t.Run("strong distinct tokens start", func(t *testing.T) {
		dir := t.TempDir()
		file := filepath.Join(dir, "changeflow.yaml")
		writeConfig(t, file, sqliteConfig(t, dir, tokensYAML(strong)))
		startServe(t, file, nil)
	})
}

// tokensYAML renders CHANGEFLOW_GITLAB_TOKENS_X / CHANGEFLOW_CALLBACKS_TOKENS_X
// values as the file's gitlab.tokens and callbacks.tokens.
func tokensYAML(env map[string]string) string {
	var gl, cb strings.Builder
	for k, v := range env {
		if n, ok := strings.CutPrefix(k, "CHANGEFLOW_GITLAB_TOKENS_"); ok {
			gl.WriteString("    " + strings.ToLower(n) + ": " + v + "\n")
		}
		if n, ok := strings.CutPrefix(k, "CHANGEFLOW_CALLBACKS_TOKENS_"); ok {
			cb.WriteString("    " + strings.ToLower(n) + ": " + v + "\n")
		}
	}
	return "gitlab:\n  tokens:\n" + gl.String() + "callbacks:\n  tokens:\n" + cb.String()
}

// TestTheLocalProfileUsesOnlyTheSimulatorsTokens: the local profile's
// tokens are the published ones (so --local runs against the embedded
// simulators), and each is in the list serve refuses outside --local.
func TestTheLocalProfileUsesOnlyTheSimulatorsTokens(t *testing.T) {
	b, err := localFiles.ReadFile("local/changeflow.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		GitLab    struct{ Tokens map[string]string } `yaml:"gitlab"`
		Callbacks struct{ Tokens map[string]string } `yaml:"callbacks"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range []map[string]string{doc.GitLab.Tokens, doc.Callbacks.Tokens} {
		for name, tok := range m {
			n++
			if !simtoken.IsWellKnown(tok) {
				t.Errorf("the local profile's %s token is not in simtoken.All(): serve would not refuse it", name)
			}
		}
	}
	if n != 6 {
		t.Fatalf("the local profile has %d tokens, want 6", n)
	}
}
