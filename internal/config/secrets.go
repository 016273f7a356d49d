package config

import (
	"fmt"
	"sort"
	"strings"

	"changeflow/internal/sim/simtoken"
)

// Minimum token lengths outside the local profile. A callback token is a
// secret the operator generates and shares with one other system, so it
// can be as long as we like: 32 bytes is 256 bits from `openssl rand -hex
// 32` (64 characters) and still 32 characters of any generator. A GitLab
// token is minted by GitLab in its own format — a classic personal access
// token is "glpat-" and 20 random characters, 26 bytes — so demanding 32
// there would refuse every real token; 20 bytes is GitLab's shortest
// random part and still refuses a typed password or a placeholder.
const (
	MinCallbackTokenBytes = 32
	MinGitLabTokenBytes   = 20
)

// GenerateHint is what an operator runs to make a callback secret.
const GenerateHint = "openssl rand -hex 32"

// RefusedSecret is a token the snapshot refused because it would
// authenticate someone it must not: a published simulator token, a value
// shorter than its minimum, or the same value as another token. The item
// falls back as if it were unset (a callback kind is rejected, a bot has no
// token, a previous callback token is not accepted), so a weak value
// arriving by reload is never applied; at start-up outside --local it
// stops the service.
type RefusedSecret struct {
	// Key is the item, e.g. "callbacks.tokens.deploy".
	Key string `json:"key"`
	// Problem says what is wrong, in words, without the value.
	Problem string `json:"problem"`
	// Fix says what to do.
	Fix string `json:"fix"`
}

// RefusedSecrets lists the tokens this snapshot refused, sorted by key.
// It is empty unless the snapshot was built with Options.RefuseWeakSecrets.
func (s *Snapshot) RefusedSecrets() []RefusedSecret {
	return append([]RefusedSecret(nil), s.refused...)
}

// refuseWeakSecrets checks every configured token (gitlab.tokens.* and
// callbacks.tokens.*) and makes each weak one fall back to "unset":
// well-known, too short, or shared with another token. Sharing is refused
// for every pair, not only approval and deploy: whoever holds a shared
// secret can speak as both holders (the approval system could confirm
// deployments, GitLab's webhook secret could approve requests, a callback
// secret could act as a bot on GitLab), and two approver bots with one
// token are one approval twice. Every member of a shared group falls back,
// because there is no telling which of them was meant — except a previous
// callback token equal to its own current one, where only the previous
// falls back. callbacks.tokens.*Previous obey the same rules as the
// current tokens: whoever sends the retired value is trusted as much.
func (b *builder) refuseWeakSecrets(s *Snapshot) {
	type tok struct{ key, val string }
	var toks []tok
	for name, v := range s.gitlabTok {
		if v != "" {
			toks = append(toks, tok{famGitLabTok + "." + name, v})
		}
	}
	for name, v := range s.callbacks {
		if v != "" {
			toks = append(toks, tok{famCallbacks + "." + name, v})
		}
	}
	sort.Slice(toks, func(i, j int) bool { return toks[i].key < toks[j].key })
	byVal := map[string][]string{}
	for _, t := range toks {
		byVal[t.val] = append(byVal[t.val], t.key)
	}
	for _, t := range toks {
		callback := strings.HasPrefix(t.key, famCallbacks+".")
		fix := "set a secret of its own, e.g. `" + GenerateHint + "`, in " + EnvName(t.key) + " or the file"
		if !callback {
			fix = "give the bot a personal or project access token of its own, made in GitLab (scope api), in " + EnvName(t.key)
		}
		var others []string
		for _, k := range byVal[t.val] {
			if k != t.key {
				others = append(others, k)
			}
		}
		current, previous := strings.CutSuffix(t.key, previousSuffix)
		previous = previous && callback
		// A previous token equal to its own current one is a rotation
		// half done (the new value never set, or the old one copied
		// twice): it speaks for no one else, so only the previous item is
		// refused and the kind keeps working on its current token.
		ownPair := len(others) == 1 && (others[0] == t.key+previousSuffix || previous && others[0] == current)
		var problem string
		switch min := minTokenBytes(callback); {
		case simtoken.IsWellKnown(t.val):
			problem = "is the simulators' well-known token, published with changeflow: anyone can send it"
		case len(t.val) < min:
			problem = fmt.Sprintf("is %d bytes long, shorter than the %d bytes a secret needs here", len(t.val), min)
		case ownPair && previous:
			problem = "is the same value as " + current + ", the token it is meant to be replaced by: a previous value is the one being retired"
			fix = "set " + current + " to the new secret and this item to the old one, or remove this item once no sender uses the old one"
		case ownPair:
			continue
		case len(others) > 0:
			problem = "is the same value as " + strings.Join(others, ", ") + ": whoever holds one can act as the other"
		default:
			continue
		}
		s.refused = append(s.refused, RefusedSecret{Key: t.key, Problem: problem, Fix: fix})
		consequence := "no token"
		switch {
		case previous:
			consequence = "accept only " + current
			s.callbacks[strings.TrimPrefix(t.key, famCallbacks+".")] = ""
		case callback:
			consequence = "reject every callback"
			s.callbacks[strings.TrimPrefix(t.key, famCallbacks+".")] = ""
		default:
			s.gitlabTok[strings.TrimPrefix(t.key, famGitLabTok+".")] = ""
		}
		s.vals[t.key] = ""
		r := s.res[t.key]
		r.Value, r.FellBack, r.Reason = "", true, fellBack("value refused: it %s → %s; %s", problem, consequence, fix)
		s.res[t.key] = r
	}
}

func minTokenBytes(callback bool) int {
	if callback {
		return MinCallbackTokenBytes
	}
	return MinGitLabTokenBytes
}
