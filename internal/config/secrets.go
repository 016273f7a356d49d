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
	refuseWellKnownWebhookSecrets(s)
	toks := configuredTokens(s)
	byVal := map[string][]string{}
	for _, t := range toks {
		byVal[t.val] = append(byVal[t.val], t.key)
	}
	// Every verdict is made on the tokens as configured, before any
	// refusal below clears one.
	for _, t := range toks {
		var others []string
		for _, k := range byVal[t.val] {
			if k != t.key {
				others = append(others, k)
			}
		}
		if r, refused := judgeToken(t, others); refused {
			refuseToken(s, r)
		}
	}
}

// configuredToken is one set token: its item key and its value.
type configuredToken struct{ key, val string }

// configuredTokens lists the snapshot's set tokens (gitlab.tokens.* and
// callbacks.tokens.*), sorted by key.
func configuredTokens(s *Snapshot) []configuredToken {
	var toks []configuredToken
	for name, v := range s.gitlabTok {
		if v != "" {
			toks = append(toks, configuredToken{famGitLabTok + "." + name, v})
		}
	}
	for name, v := range s.callbacks {
		if v != "" {
			toks = append(toks, configuredToken{famCallbacks + "." + name, v})
		}
	}
	sort.Slice(toks, func(i, j int) bool { return toks[i].key < toks[j].key })
	return toks
}

// tokenRole is what a token item is for, read from its key.
type tokenRole struct {
	callback bool   // a callbacks.tokens.* item, else a GitLab bot's token
	previous bool   // a callback's previous (retired) token
	current  string // for a previous token, the key of its current one
}

func roleOfToken(key string) tokenRole {
	callback := strings.HasPrefix(key, famCallbacks+".")
	current, previous := strings.CutSuffix(key, previousSuffix)
	return tokenRole{callback: callback, previous: previous && callback, current: current}
}

// judgeToken decides whether token t is refused, given the keys of the
// other tokens with the same value, and says why and what to do.
func judgeToken(t configuredToken, others []string) (RefusedSecret, bool) {
	role := roleOfToken(t.key)
	fix := "set a secret of its own, e.g. `" + GenerateHint + "`, in " + EnvName(t.key) + " or the file"
	if !role.callback {
		fix = "give the bot a personal or project access token of its own, made in GitLab (scope api), in " + EnvName(t.key)
	}
	// A previous token equal to its own current one is a rotation
	// half done (the new value never set, or the old one copied
	// twice): it speaks for no one else, so only the previous item is
	// refused and the kind keeps working on its current token.
	ownPair := len(others) == 1 && (others[0] == t.key+previousSuffix || role.previous && others[0] == role.current)
	var problem string
	switch min := minTokenBytes(role.callback); {
	case simtoken.IsWellKnown(t.val):
		problem = "is the simulators' well-known token, published with changeflow: anyone can send it"
	case len(t.val) < min:
		problem = fmt.Sprintf("is %d bytes long, shorter than the %d bytes a secret needs here", len(t.val), min)
	case ownPair && role.previous:
		problem = "is the same value as " + role.current + ", the token it is meant to be replaced by: a previous value is the one being retired"
		fix = "set " + role.current + " to the new secret and this item to the old one, or remove this item once no sender uses the old one"
	case ownPair:
		return RefusedSecret{}, false
	case len(others) > 0:
		problem = "is the same value as " + strings.Join(others, ", ") + ": whoever holds one can act as the other"
	default:
		return RefusedSecret{}, false
	}
	return RefusedSecret{Key: t.key, Problem: problem, Fix: fix}, true
}

// refuseToken records r on the snapshot and makes its item fall back to
// unset, saying what that leaves.
func refuseToken(s *Snapshot, r RefusedSecret) {
	role := roleOfToken(r.Key)
	s.refused = append(s.refused, r)
	consequence := "no token"
	switch {
	case role.previous:
		consequence = "accept only " + role.current
		s.callbacks[strings.TrimPrefix(r.Key, famCallbacks+".")] = ""
	case role.callback:
		consequence = "reject every callback"
		s.callbacks[strings.TrimPrefix(r.Key, famCallbacks+".")] = ""
	default:
		s.gitlabTok[strings.TrimPrefix(r.Key, famGitLabTok+".")] = ""
	}
	s.vals[r.Key] = ""
	res := s.res[r.Key]
	res.Value, res.FellBack, res.Reason = "", true, fellBack("value refused: it %s → %s; %s", r.Problem, consequence, r.Fix)
	s.res[r.Key] = res
}

func minTokenBytes(callback bool) int {
	if callback {
		return MinCallbackTokenBytes
	}
	return MinGitLabTokenBytes
}

// refuseWellKnownWebhookSecrets drops every notify.webhooks entry signed
// with a simulators' published secret: anyone can sign with it, so a
// receiver could not tell changeflow's events from forged ones. The entry
// falls back to absent (serve does not start on it; a reload leaves that
// webhook out). The receiver the embedded simulators stand in with is
// derived, not configured, and is the simulators' own: it is kept.
func refuseWellKnownWebhookSecrets(s *Snapshot) {
	res := s.res[KeyNotifyWebhooks]
	if res.Source == SourceDefault {
		return
	}
	hooks, _ := s.vals[KeyNotifyWebhooks].([]NotifyWebhook)
	kept := make([]NotifyWebhook, 0, len(hooks))
	var dropped []string
	for _, h := range hooks {
		if !simtoken.IsWellKnown(h.Secret) {
			kept = append(kept, h)
			continue
		}
		dropped = append(dropped, h.Name)
		s.refused = append(s.refused, RefusedSecret{Key: KeyNotifyWebhooks,
			Problem: fmt.Sprintf("entry %q is signed with the simulators' well-known secret, published with changeflow: anyone can sign with it", h.Name),
			Fix:     "give the webhook a secret of its own, e.g. `echo \"whsec_$(head -c 32 /dev/urandom | base64)\"`, and the same to its receiver"})
	}
	if len(dropped) == 0 {
		return
	}
	s.vals[KeyNotifyWebhooks] = kept
	res.Value, res.FellBack = webhooksText(kept), true
	res.Reason = fellBack("dropped %s: signed with a published secret → not sent", strings.Join(dropped, ", "))
	s.res[KeyNotifyWebhooks] = res
}
