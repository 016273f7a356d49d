package gitlab

import (
	"testing"
	"time"

	"changeflow/internal/sim/simtoken"
)

// TestEveryAccountTokenIsWellKnown: the tokens the seeded world accepts
// are the published list serve refuses outside --local; an account added
// with a token of its own must be added to simtoken too.
func TestEveryAccountTokenIsWellKnown(t *testing.T) {
	w, err := newWorld(t.Context(), t.TempDir(), time.Now(), worldSeed{})
	if err != nil {
		t.Fatal(err)
	}
	for tok, u := range w.byToken {
		if !simtoken.IsWellKnown(tok) {
			t.Errorf("account %s accepts a token that is not in simtoken.All()", u.Username)
		}
	}
}

// TestBotTokensReplaceTheWellKnownOnes: a world given the bots' tokens
// accepts those and refuses the published ones for the same accounts.
func TestBotTokensReplaceTheWellKnownOnes(t *testing.T) {
	const committer = "glpat-own-committer-token-0123"
	e := newEnv(t, func(o *Options) {
		o.BotTokens = BotTokens{Committer: committer, Approver1: "glpat-own-approver-1-0123"}
	})
	if got := e.must(200, "GET", committer, "/user", nil).str("username"); got != "changeflow-bot" {
		t.Fatalf("the committer's own token is %q", got)
	}
	e.must(401, "GET", simtoken.Committer, "/user", nil)
	e.must(401, "GET", simtoken.Approver1, "/user", nil)
	e.must(200, "GET", simtoken.Approver2, "/user", nil) // not replaced
	e.must(200, "POST", "", "/_control/reset", nil)
	e.must(200, "GET", committer, "/user", nil) // a reset keeps them
}
