// Package simtoken is the one list of the simulators' well-known
// credentials: the tokens of the simulated GitLab's accounts and the
// callback and webhook secrets the local world sends. They are published
// (README.md, the local profile, docs/simulators.md), so they authenticate
// nothing: the simulators and the local profile use them, and outside
// --local changeflow refuses every one of them (internal/config). The
// package has no dependencies, so the configuration can import it without
// pulling in the simulators.
package simtoken

import "slices"

// The simulated GitLab's personal access tokens, one per seeded account.
const (
	Maintainer = "local-maintainer-token"
	Committer  = "local-committer-token"
	Approver1  = "local-approver-1-token"
	Approver2  = "local-approver-2-token"
	Observer   = "local-observer-token"
	// Developer is a person with push rights, not a bot: the foreign-head
	// attacks' account (docs/simulators.md).
	Developer = "local-developer-token"
)

// The shared secrets of the local world's callbacks: the approval system's
// and the deployment pipeline's X-Callback-Token, and GitLab's webhook
// X-Gitlab-Token.
const (
	Callback = "local-callback-token"
	Webhook  = "local-webhook-token"
	// NotifyWebhook is the secret of the notification receiver "local"
	// (/hooks/local), which the local profile's webhook signs with.
	NotifyWebhook = "local-notify-webhook-secret"
)

// All lists every well-known token. A simulator account or secret added
// later must be added here: the simulators' tests check that every token
// they accept is in this list.
func All() []string {
	return []string{Maintainer, Committer, Approver1, Approver2, Observer, Developer, Callback, Webhook, NotifyWebhook}
}

// IsWellKnown reports whether tok is one of the simulators' published
// tokens.
func IsWellKnown(tok string) bool { return slices.Contains(All(), tok) }
