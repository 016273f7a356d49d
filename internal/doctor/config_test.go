package doctor

import (
	"context"
	"strings"
	"testing"

	"changeflow/internal/config"
	"changeflow/internal/sim/simtoken"
)

func snapshot(t *testing.T, local bool, ov map[string]any) *config.Snapshot {
	t.Helper()
	m, err := config.Load(context.Background(), config.Options{Overlay: ov, RefuseWeakSecrets: !local})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m.Current()
}

func strongTokens() map[string]any {
	return map[string]any{
		"gitlab.tokens.committer":   "glpat-committer-0123456789abcd",
		"gitlab.tokens.approver1":   "glpat-approver1-0123456789abcd",
		"gitlab.tokens.approver2":   "glpat-approver2-0123456789abcd",
		"callbacks.tokens.approval": strings.Repeat("a1", 32),
		"callbacks.tokens.deploy":   strings.Repeat("d2", 32),
		"callbacks.tokens.gitlab":   strings.Repeat("g3", 32),
	}
}

func find(fs []Finding, id string) Finding {
	for _, f := range fs {
		if f.ID == id {
			return f
		}
	}
	return Finding{}
}

func TestConfigFindings(t *testing.T) {
	with := func(kv map[string]any) map[string]any {
		ov := strongTokens()
		for k, v := range kv {
			ov[k] = v
		}
		return ov
	}
	cases := []struct {
		name    string
		local   bool
		ov      map[string]any
		id      string
		want    Status
		mention string
	}{
		{"strong distinct tokens", false, with(nil), "secrets", StatusOK, ""},
		{"a well-known token", false, with(map[string]any{"callbacks.tokens.deploy": simtoken.Callback}), "secrets", StatusFail, "callbacks.tokens.deploy"},
		{"approval and deploy alike", false, with(map[string]any{"callbacks.tokens.deploy": strings.Repeat("a1", 32)}), "secrets", StatusFail, "the same value"},
		{"a short token", false, with(map[string]any{"callbacks.tokens.gitlab": "short"}), "secrets", StatusFail, "shorter than"},
		{"a callback kind without a token", false, with(map[string]any{"callbacks.tokens.gitlab": ""}), "secrets", StatusWarn, "callbacks.tokens.gitlab"},
		{"a rotation under way", false, with(map[string]any{"callbacks.tokens.deployPrevious": strings.Repeat("p4", 32)}), "secrets", StatusWarn, "callbacks.tokens.deployPrevious"},
		{"a previous token equal to its current one", false, with(map[string]any{"callbacks.tokens.deployPrevious": strings.Repeat("d2", 32)}), "secrets", StatusFail, "meant to be replaced by"},
		{"the local profile's tokens", true, map[string]any{"callbacks.tokens.deploy": simtoken.Callback, "callbacks.tokens.approval": simtoken.Callback}, "secrets", StatusOK, "local profile"},
		{"no trusted proxy", false, with(nil), "trusted-proxies", StatusOK, ""},
		{"the auth proxy's own address", false, with(map[string]any{"identity.trustedProxies": []any{"10.0.0.5/32"}}), "trusted-proxies", StatusOK, ""},
		{"127.0.0.1 outside --local", false, with(map[string]any{"identity.trustedProxies": []any{"10.0.0.5/32", "127.0.0.1"}}), "trusted-proxies", StatusWarn, "127.0.0.1/32"},
		{"::1 outside --local", false, with(map[string]any{"identity.trustedProxies": []any{"::1"}}), "trusted-proxies", StatusWarn, "::1/128"},
		{"a network holding loopback", false, with(map[string]any{"identity.trustedProxies": []any{"0.0.0.0/0"}}), "trusted-proxies", StatusWarn, "0.0.0.0/0"},
		{"loopback in the local profile", true, map[string]any{"identity.trustedProxies": []any{"127.0.0.1/32", "::1/128"}}, "trusted-proxies", StatusOK, "local profile"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := find(ConfigFindings(snapshot(t, c.local, c.ov), c.local), c.id)
			if f.Status != c.want {
				t.Fatalf("%s = %s (%s), want %s", c.id, f.Status, f.Detail, c.want)
			}
			if c.mention != "" && !strings.Contains(f.Detail, c.mention) {
				t.Fatalf("detail %q does not mention %q", f.Detail, c.mention)
			}
			if f.Status != StatusOK && f.Fix == "" {
				t.Fatal("a finding that is not ok says what to change")
			}
			for _, tok := range simtoken.All() {
				if strings.Contains(f.Detail+f.Fix, tok) {
					t.Fatalf("the finding echoes a token: %+v", f)
				}
			}
		})
	}
}
