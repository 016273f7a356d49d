package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/sim/simtoken"
)

// A previous token for each callback kind: strong, and unlike every token
// in strongTokens.
const (
	oldApproval = "b7e1c0d9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1"
	oldDeploy   = "c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2"
	oldWebhook  = "d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5"
)

func TestPreviousCallbackTokens(t *testing.T) {
	t.Run("each kind reads its previous token, in any spelling, masked", func(t *testing.T) {
		p := writeFile(t, t.TempDir(), "changeflow.yaml",
			"callbacks:\n  tokens:\n    approvalprevious: "+oldApproval+"\n    GITLABPREVIOUS: "+oldWebhook+"\n")
		o := testOptions(p)
		o.Environ = []string{"CHANGEFLOW_CALLBACKS_TOKENS_DEPLOYPREVIOUS=" + oldDeploy}
		s := mustLoad(t, o).Current()
		for name, want := range map[string]string{CallbackApproval: oldApproval, CallbackDeploy: oldDeploy, CallbackGitLab: oldWebhook} {
			tok, ok := s.CallbackPreviousToken(name)
			require.True(t, ok, name)
			require.Equal(t, want, tok, name)
			r, found := s.Resolution(CallbackPreviousKey(name))
			require.True(t, found, "listed under its canonical key %s", CallbackPreviousKey(name))
			require.Equal(t, masked, r.Value)
			require.False(t, r.FellBack)
		}
		require.Equal(t, "callbacks.tokens.approvalPrevious", CallbackPreviousKey(CallbackApproval))
		r, _ := s.Resolution(CallbackPreviousKey(CallbackDeploy))
		require.Equal(t, SourceEnv, r.Source)
		require.Empty(t, s.Unknown())
		for _, e := range s.Effective() {
			for _, v := range []string{oldApproval, oldDeploy, oldWebhook} {
				require.NotContains(t, e.Value, v, e.Key)
			}
		}
	})
	t.Run("unset or empty means only the current token, and is no fallback", func(t *testing.T) {
		s := loadYAML(t, "callbacks:\n  tokens:\n    approval: "+strongApproval+"\n    approvalPrevious: \"  \"\n")
		for _, name := range []string{CallbackApproval, CallbackDeploy, CallbackGitLab} {
			tok, ok := s.CallbackPreviousToken(name)
			require.False(t, ok, name)
			require.Empty(t, tok, name)
		}
		for _, r := range s.FellBack() {
			require.NotContains(t, r.Key, "Previous", "a rotation not under way must not warn at start-up")
		}
		r, found := s.Resolution(CallbackPreviousKey(CallbackApproval))
		require.True(t, found)
		require.Contains(t, r.Reason, "only callbacks.tokens.approval is accepted")
	})
	t.Run("a previous name is not a callback kind of its own", func(t *testing.T) {
		s := loadTokens(t, false, map[string]string{"callbacks.tokens.approvalPrevious": oldApproval})
		_, ok, _ := s.CallbackToken("approvalPrevious")
		require.False(t, ok)
		_, ok = s.CallbackPreviousToken("approvalPrevious")
		require.False(t, ok)
		_, ok = s.CallbackPreviousToken("unheard-of")
		require.False(t, ok)
	})
	t.Run("strong distinct previous tokens are kept outside the local profile", func(t *testing.T) {
		toks := strongTokens()
		toks["callbacks.tokens.approvalPrevious"] = oldApproval
		toks["callbacks.tokens.deployPrevious"] = oldDeploy
		toks["callbacks.tokens.gitlabPrevious"] = oldWebhook
		s := loadTokens(t, true, toks)
		require.Empty(t, s.RefusedSecrets())
	})
	for name, c := range map[string]struct {
		value, problem string
	}{
		"the simulators' well-known token": {simtoken.Callback, "well-known"},
		"31 bytes":                         {strings.Repeat("p", 31), "31 bytes"},
		"the same as its current token":    {strongDeploy, "the token it is meant to be replaced by"},
	} {
		t.Run("a previous token that is "+name+" is refused alone", func(t *testing.T) {
			toks := strongTokens()
			toks["callbacks.tokens.deployPrevious"] = c.value
			s := loadTokens(t, true, toks)
			require.Equal(t, []string{"callbacks.tokens.deployPrevious"}, refusedKeys(s))
			ref := s.RefusedSecrets()[0]
			require.Contains(t, ref.Problem, c.problem)
			require.NotContains(t, ref.Problem+ref.Fix, c.value, "the message must not echo the secret")
			_, ok := s.CallbackPreviousToken(CallbackDeploy)
			require.False(t, ok, "a refused previous token is not accepted")
			tok, ok, _ := s.CallbackToken(CallbackDeploy)
			require.True(t, ok, "the current token keeps working")
			require.Equal(t, strongDeploy, tok)
			r, _ := s.Resolution("callbacks.tokens.deployPrevious")
			require.True(t, r.FellBack)
			require.Contains(t, r.Reason, "accept only callbacks.tokens.deploy")
		})
	}
	t.Run("a previous token shared with another kind is refused with it", func(t *testing.T) {
		toks := strongTokens()
		toks["callbacks.tokens.deployPrevious"] = strongApproval
		s := loadTokens(t, true, toks)
		require.Equal(t, []string{"callbacks.tokens.approval", "callbacks.tokens.deployPrevious"}, refusedKeys(s))
		_, ok, _ := s.CallbackToken(CallbackApproval)
		require.False(t, ok, "the approval system's secret is known to whoever deploys")
		_, ok, _ = s.CallbackToken(CallbackDeploy)
		require.True(t, ok)
	})
	t.Run("a previous token equal to its current one is kept in the local profile", func(t *testing.T) {
		s := loadTokens(t, false, map[string]string{
			"callbacks.tokens.approval": simtoken.Callback, "callbacks.tokens.approvalPrevious": simtoken.Callback,
		})
		require.Empty(t, s.RefusedSecrets())
		_, ok := s.CallbackPreviousToken(CallbackApproval)
		require.True(t, ok)
	})
}
