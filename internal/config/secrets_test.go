package config

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/sim/simtoken"
)

// Strong, distinct tokens: what a production configuration holds.
const (
	strongCommitter = "glpat-committer0123456789ab"
	strongApprover1 = "glpat-approver1x0123456789a"
	strongApprover2 = "glpat-approver2x0123456789a"
	strongApproval  = "0f4b0c1e8a9d2e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f"
	strongDeploy    = "9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1a0f9e8d"
	strongWebhook   = "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90"
)

func strongTokens() map[string]string {
	return map[string]string{
		"gitlab.tokens.committer": strongCommitter, "gitlab.tokens.approver1": strongApprover1,
		"gitlab.tokens.approver2": strongApprover2, "callbacks.tokens.approval": strongApproval,
		"callbacks.tokens.deploy": strongDeploy, "callbacks.tokens.gitlab": strongWebhook,
	}
}

func loadTokens(t *testing.T, refuse bool, toks map[string]string) *Snapshot {
	t.Helper()
	o := testOptions("")
	o.RefuseWeakSecrets = refuse
	o.Overlay = map[string]any{}
	for k, v := range toks {
		o.Overlay[k] = v
	}
	return mustLoad(t, o).Current()
}

func refusedKeys(s *Snapshot) []string {
	var out []string
	for _, r := range s.RefusedSecrets() {
		out = append(out, r.Key)
	}
	return out
}

func TestWeakTokensAreRefusedOutsideTheLocalProfile(t *testing.T) {
	t.Run("strong distinct tokens are kept", func(t *testing.T) {
		s := loadTokens(t, true, strongTokens())
		require.Empty(t, s.RefusedSecrets())
		tok, ok, r := s.CallbackToken(CallbackDeploy)
		require.True(t, ok)
		require.Equal(t, strongDeploy, tok)
		require.False(t, r.FellBack)
	})
	// Every published simulator token, in every token item: the list is
	// the simulators' own (simtoken.All), not a copy.
	for _, wk := range simtoken.All() {
		for _, key := range []string{"gitlab.tokens.committer", "gitlab.tokens.approver2", "callbacks.tokens.approval", "callbacks.tokens.gitlab"} {
			t.Run("well-known "+wk+" in "+key, func(t *testing.T) {
				toks := strongTokens()
				toks[key] = wk
				s := loadTokens(t, true, toks)
				require.Equal(t, []string{key}, refusedKeys(s))
				require.Contains(t, s.RefusedSecrets()[0].Problem, "well-known")
				r, _ := s.Resolution(key)
				require.True(t, r.FellBack)
				require.Contains(t, r.Reason, "well-known")
				require.NotContains(t, r.Reason, wk, "the reason must not echo the secret")
				require.Empty(t, r.Value)
			})
		}
	}
	t.Run("a callback token of 31 bytes is refused, 32 kept", func(t *testing.T) {
		toks := strongTokens()
		toks["callbacks.tokens.deploy"] = strings.Repeat("x", 31)
		toks["callbacks.tokens.approval"] = strings.Repeat("y", 32)
		s := loadTokens(t, true, toks)
		require.Equal(t, []string{"callbacks.tokens.deploy"}, refusedKeys(s))
		require.Contains(t, s.RefusedSecrets()[0].Problem, "31 bytes")
		require.Contains(t, s.RefusedSecrets()[0].Fix, GenerateHint)
		_, ok, _ := s.CallbackToken(CallbackDeploy)
		require.False(t, ok, "a refused callback token must reject every callback")
		tok, ok, _ := s.CallbackToken(CallbackApproval)
		require.True(t, ok)
		require.Equal(t, strings.Repeat("y", 32), tok)
	})
	t.Run("a GitLab token of 19 bytes is refused, a classic 26-byte glpat kept", func(t *testing.T) {
		toks := strongTokens()
		toks["gitlab.tokens.approver1"] = "glpat-0123456789abc"
		toks["gitlab.tokens.approver2"] = "glpat-z_sxgtrfAxKr8q1TPY8Y"
		s := loadTokens(t, true, toks)
		require.Equal(t, []string{"gitlab.tokens.approver1"}, refusedKeys(s))
		tok, ok, _ := s.GitLabToken("approver1")
		require.False(t, ok)
		require.Empty(t, tok)
	})
	t.Run("identical approval and deploy callback tokens are both refused", func(t *testing.T) {
		toks := strongTokens()
		toks["callbacks.tokens.deploy"] = strongApproval
		s := loadTokens(t, true, toks)
		require.Equal(t, []string{"callbacks.tokens.approval", "callbacks.tokens.deploy"}, refusedKeys(s))
		require.Contains(t, s.RefusedSecrets()[0].Problem, "callbacks.tokens.deploy")
		for _, n := range []string{CallbackApproval, CallbackDeploy} {
			_, ok, _ := s.CallbackToken(n)
			require.False(t, ok, n)
		}
	})
	t.Run("a bot token equal to a callback token is refused with it", func(t *testing.T) {
		toks := strongTokens()
		toks["gitlab.tokens.committer"] = strongWebhook
		s := loadTokens(t, true, toks)
		require.Equal(t, []string{"callbacks.tokens.gitlab", "gitlab.tokens.committer"}, refusedKeys(s))
	})
	t.Run("two approver bots with one token are refused", func(t *testing.T) {
		toks := strongTokens()
		toks["gitlab.tokens.approver2"] = strongApprover1
		s := loadTokens(t, true, toks)
		require.Equal(t, []string{"gitlab.tokens.approver1", "gitlab.tokens.approver2"}, refusedKeys(s))
	})
	t.Run("the local profile keeps the well-known tokens", func(t *testing.T) {
		s := loadTokens(t, false, map[string]string{
			"gitlab.tokens.committer": simtoken.Committer, "callbacks.tokens.approval": simtoken.Callback,
			"callbacks.tokens.deploy": simtoken.Callback,
		})
		require.Empty(t, s.RefusedSecrets())
		tok, ok, _ := s.CallbackToken(CallbackDeploy)
		require.True(t, ok)
		require.Equal(t, simtoken.Callback, tok)
	})
	t.Run("unset tokens are not refused: they already reject", func(t *testing.T) {
		s := loadTokens(t, true, nil)
		require.Empty(t, s.RefusedSecrets())
	})
}

// TestAWeakTokenArrivingByReloadIsNotApplied: a token written to etcd at
// runtime goes through the same rules; the weak value falls back (every
// callback of that kind rejected) and is logged as an item fallback,
// while the strong value beside it is applied.
func TestAWeakTokenArrivingByReloadIsNotApplied(t *testing.T) {
	ep, prefix, cli := testEtcd(t)
	var logs logBuffer
	o := etcdOptions(t, ep, prefix, "")
	o.Logger = logs.logger()
	o.RefuseWeakSecrets = true
	o.Overlay = map[string]any{}
	for k, v := range strongTokens() {
		if !strings.HasPrefix(k, "callbacks.") {
			o.Overlay[k] = v
		}
	}
	put(t, cli, prefix+"/callbacks/tokens/approval", strongApproval)
	put(t, cli, prefix+"/callbacks/tokens/deploy", strongDeploy)
	m := mustLoad(t, o)
	require.Empty(t, m.Current().RefusedSecrets())

	put(t, cli, prefix+"/callbacks/tokens/deploy", simtoken.Callback)
	put(t, cli, prefix+"/callbacks/tokens/approval", strongApproval+"-rotated")
	require.NoError(t, m.Reload(context.Background()))
	s := m.Current()
	require.Equal(t, []string{"callbacks.tokens.deploy"}, refusedKeys(s))
	_, ok, r := s.CallbackToken(CallbackDeploy)
	require.False(t, ok, "the well-known deploy token from etcd must not be applied")
	require.True(t, r.FellBack)
	require.Equal(t, SourceEtcd, r.Source)
	tok, ok, _ := s.CallbackToken(CallbackApproval)
	require.True(t, ok)
	require.Equal(t, strongApproval+"-rotated", tok, "the strong token beside it is applied")
	out := logs.String()
	require.Contains(t, out, "config: item fell back")
	require.Contains(t, out, "key=callbacks.tokens.deploy")
	require.NotContains(t, out, simtoken.Callback, "the log must not echo the secret")

	// A short one by reload: the same.
	put(t, cli, prefix+"/callbacks/tokens/deploy", "short")
	require.NoError(t, m.Reload(context.Background()))
	_, ok, _ = m.Current().CallbackToken(CallbackDeploy)
	require.False(t, ok)
}
