package config

import (
	"strings"
	"testing"

	"changeflow/internal/sim/simtoken"
)

// TestJudgeToken is the table of which configured token is refused, on
// its value and the keys of the other tokens sharing it; no snapshot.
func TestJudgeToken(t *testing.T) {
	strong := strings.Repeat("s", MinCallbackTokenBytes)
	bot := strings.Repeat("b", MinGitLabTokenBytes)
	deploy := famCallbacks + "." + CallbackDeploy
	deployPrev := deploy + previousSuffix
	approval := famCallbacks + "." + CallbackApproval
	tests := []struct {
		name        string
		key, val    string
		others      []string
		wantProblem string // "" for not refused
		wantFix     string
	}{
		{"a strong callback token of its own", deploy, strong, nil, "", ""},
		{"a bot token of GitLab's shortest length", famGitLabTok + ".approver1", bot, nil, "", ""},
		{"a well-known token", deploy, simtoken.Callback, nil, "well-known token", "openssl rand -hex 32"},
		{"a well-known token wins over sharing", deploy, simtoken.Callback, []string{approval}, "well-known token", ""},
		{"a short callback token", deploy, bot, nil, "is 20 bytes long, shorter than the 32 bytes", ""},
		{"a short bot token", famGitLabTok + ".approver1", "short", nil, "is 5 bytes long, shorter than the 20 bytes", "access token of its own"},
		{"shared with another kind", deploy, strong, []string{approval}, "is the same value as " + approval + ":", ""},
		{"shared with two", deploy, strong, []string{approval, famGitLabTok + ".x"}, approval + ", " + famGitLabTok + ".x", ""},
		{"a current token equal to its own previous is kept", deploy, strong, []string{deployPrev}, "", ""},
		{"a previous token equal to its own current is refused", deployPrev, strong, []string{deploy}, "the token it is meant to be replaced by", "set " + deploy + " to the new secret"},
		{"a previous token equal to its current and another", deployPrev, strong, []string{deploy, approval}, "is the same value as " + deploy + ", " + approval, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, refused := judgeToken(configuredToken{tt.key, tt.val}, tt.others)
			if refused != (tt.wantProblem != "") {
				t.Fatalf("refused = %v (%+v), want %v", refused, r, tt.wantProblem != "")
			}
			if !refused {
				return
			}
			if r.Key != tt.key || !strings.Contains(r.Problem, tt.wantProblem) || !strings.Contains(r.Fix, tt.wantFix) {
				t.Fatalf("judgeToken = %+v; want key %s, problem containing %q, fix containing %q", r, tt.key, tt.wantProblem, tt.wantFix)
			}
		})
	}
}
