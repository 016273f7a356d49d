package doctor

import (
	"fmt"
	"net/netip"
	"strings"

	"changeflow/internal/config"
)

// ConfigFindings are the checks of the configuration alone: the secrets
// (the rules serve applies at start-up, and a reload's refusals) and the
// peers trusted for login headers. serve logs the ones that are not ok at
// start.
func ConfigFindings(s *config.Snapshot, local bool) []Finding {
	return []Finding{secretsFinding(s, local), proxiesFinding(s, local)}
}

func secretsFinding(s *config.Snapshot, local bool) Finding {
	f := Finding{ID: "secrets", Title: "Callback and bot tokens are secrets of their own"}
	if local {
		f.Status = StatusOK
		f.Detail = "the local profile runs on the simulators' published tokens, as it is meant to; outside --local they are refused"
		return f
	}
	var bad, fixes []string
	for _, r := range s.RefusedSecrets() {
		bad = append(bad, r.Key+" "+r.Problem)
		fixes = append(fixes, r.Key+": "+r.Fix)
	}
	var missing []string
	for _, name := range []string{config.CallbackApproval, config.CallbackDeploy, config.CallbackGitLab} {
		if _, ok, r := s.CallbackToken(name); !ok && !refused(s, r.Key) {
			missing = append(missing, r.Key)
		}
	}
	// A previous callback token is a rotation under way: accepted, but a
	// second secret that opens the same door, so it is worth a warning
	// until it is removed — a rotation forgotten half way would otherwise
	// keep the retired value valid for good.
	var rotating []string
	for _, name := range []string{config.CallbackApproval, config.CallbackDeploy, config.CallbackGitLab} {
		if _, ok := s.CallbackPreviousToken(name); ok {
			rotating = append(rotating, name)
		}
	}
	switch {
	case len(bad) > 0:
		f.Status = StatusFail
		f.Detail = "refused, so the item is unset: " + strings.Join(bad, "; ")
		f.Fix = strings.Join(fixes, "; ")
	case len(missing) > 0:
		f.Status = StatusWarn
		f.Detail = "not set, so every callback of that kind is rejected (changeflow then only polls): " + strings.Join(missing, ", ")
		f.Fix = "set each to its own secret (`" + config.GenerateHint + "`) and give the same value to the system that sends it"
	case len(rotating) > 0:
		var keys, series []string
		for _, n := range rotating {
			keys = append(keys, config.CallbackPreviousKey(n))
			series = append(series, `changeflow_callback_token_previous_total{callback="`+n+`"}`)
		}
		f.Status = StatusWarn
		f.Detail = "a rotation is under way: the retired value is still accepted through " + strings.Join(keys, ", ")
		f.Fix = "once the sender has the new value and " + strings.Join(series, ", ") + " stops rising, remove " + strings.Join(keys, ", ") + " (docs/configuration.md, \"Rotating a callback token\")"
	default:
		f.Status = StatusOK
		f.Detail = fmt.Sprintf("every token is set, not a simulator's, long enough (callbacks ≥ %d bytes, GitLab ≥ %d) and unlike every other",
			config.MinCallbackTokenBytes, config.MinGitLabTokenBytes)
	}
	return f
}

func refused(s *config.Snapshot, key string) bool {
	for _, r := range s.RefusedSecrets() {
		if r.Key == key {
			return true
		}
	}
	return false
}

// loopbackPrefixes are the addresses every process on the host shares.
func loopbackPrefixes() []netip.Prefix {
	return []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
}

// LoopbackTrusted lists the identity.trustedProxies entries that contain
// or overlap a loopback address.
func LoopbackTrusted(s *config.Snapshot) []netip.Prefix {
	ps, _ := s.IdentityTrustedProxies()
	var out []netip.Prefix
	for _, p := range ps {
		for _, lb := range loopbackPrefixes() {
			if p.Overlaps(lb) {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

func proxiesFinding(s *config.Snapshot, local bool) Finding {
	f := Finding{ID: "trusted-proxies", Subject: config.KeyIdentityTrustedProxies,
		Title: "Login headers are believed only from the auth proxy"}
	lb := LoopbackTrusted(s)
	switch {
	case len(lb) == 0:
		f.Status = StatusOK
		f.Detail = "identity.trustedProxies lists no loopback address"
	case local:
		f.Status = StatusOK
		f.Detail = "the local profile trusts loopback for its user picker, as it is meant to"
	default:
		var txt []string
		for _, p := range lb {
			txt = append(txt, p.String())
		}
		f.Status = StatusWarn
		f.Detail = "identity.trustedProxies trusts loopback (" + strings.Join(txt, ", ") + "): every process on this host — a reverse proxy that forwards a client's X-Auth-Request-User, a sidecar, a local user's curl — can name any user"
		f.Fix = "list only the auth proxy's own address; with the auth proxy on this host, connect it to changeflow over a unix socket or a dedicated address and trust that, or log in with OIDC only (identity.trustedProxies: [])"
	}
	return f
}
