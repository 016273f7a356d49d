package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// strongTokenEnv is an otherwise complete set of strong, distinct tokens.
func strongTokenEnv() map[string]string {
	return map[string]string{
		"CHANGEFLOW_GITLAB_TOKENS_COMMITTER":   procCommitterToken,
		"CHANGEFLOW_GITLAB_TOKENS_APPROVER1":   procApprover1Token,
		"CHANGEFLOW_GITLAB_TOKENS_APPROVER2":   procApprover2Token,
		"CHANGEFLOW_CALLBACKS_TOKENS_APPROVAL": procApprovalToken,
		"CHANGEFLOW_CALLBACKS_TOKENS_DEPLOY":   procDeployToken,
		"CHANGEFLOW_CALLBACKS_TOKENS_GITLAB":   procWebhookToken,
	}
}

// warnLine reports whether stderr has a WARN line naming the trusted
// loopback item.
func warnLine(stderr string) bool {
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, `"level":"WARN"`) && strings.Contains(l, `"key":"identity.trustedProxies"`) &&
			strings.Contains(l, "trusts loopback") {
			return true
		}
	}
	return false
}

// TestServeWarnsAboutATrustedLoopback is finding 7's guard: outside
// --local, a loopback address in identity.trustedProxies (what an
// operator following a same-host proxy recipe would add) is logged at
// WARN naming the item at start, and again when a reload brings one in.
func TestServeWarnsAboutATrustedLoopback(t *testing.T) {
	t.Run("at start", func(t *testing.T) {
		dir := t.TempDir()
		file := filepath.Join(dir, "changeflow.yaml")
		writeConfig(t, file, sqliteConfig(t, dir, tokensYAML(strongTokenEnv())+"identity:\n  trustedProxies: [10.0.0.5/32, 127.0.0.1/32]\n"))
		in := startServe(t, file, nil)
		if !warnLine(in.stderr.String()) {
			t.Fatalf("no WARN naming identity.trustedProxies:\n%s", in.stderr.String())
		}
	})
	t.Run("not without loopback", func(t *testing.T) {
		dir := t.TempDir()
		file := filepath.Join(dir, "changeflow.yaml")
		writeConfig(t, file, sqliteConfig(t, dir, tokensYAML(strongTokenEnv())+"identity:\n  trustedProxies: [10.0.0.5/32]\n"))
		in := startServe(t, file, nil)
		if warnLine(in.stderr.String()) {
			t.Fatalf("a WARN about loopback without one:\n%s", in.stderr.String())
		}
		// A reload that adds ::1 is warned about too.
		writeConfig(t, file, sqliteConfig(t, dir, tokensYAML(strongTokenEnv())+"identity:\n  trustedProxies: [10.0.0.5/32, \"::1\"]\n"))
		deadline := time.Now().Add(10 * time.Second)
		for !warnLine(in.stderr.String()) {
			if time.Now().After(deadline) {
				t.Fatalf("no WARN after the reload brought in ::1:\n%s", in.stderr.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}
