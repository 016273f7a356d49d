// Package identity resolves who is calling: one resolver shared by
// business logic, rate limiting and metrics. The HTTP edge
// resolves each request once and stores the Resolution in the request's
// context; every consumer reads it from there, so the three can never
// disagree about a caller again.
package identity

import "context"

// Identity is a resolved caller.
type Identity struct {
	// Account is the canonical account (e.g. "alice"); "" when the login
	// layer gave nothing usable.
	Account string
	// Raw is what the login layer supplied (an email-style account, an
	// employee ID or the account itself), for logs only.
	Raw string
	// Email is the caller's email when known.
	Email string
	// Source names the adapter that produced it: SourceProxy ("proxy",
	// also the local run's dev login) or SourceOIDC ("oidc").
	Source string
	// Trusted is true when the directory confirmed the account (or, with
	// no directory configured, when the login layer gave a
	// canonical-account-shaped value). A verified token alone does not
	// make an unknown employee ID or email trusted: it proves who signed
	// in, not which canonical account that is. The HTTP edge's
	// authorization link refuses an untrusted identity (403
	// UNKNOWN_ACCOUNT) on every route that needs a login, and metrics
	// skip it rather than guessing.
	Trusted bool
}

// Resolution is the outcome of resolving one request.
type Resolution struct {
	Identity Identity
	// Err is set when the login layer itself failed (bad token, untrusted
	// proxy headers): such a caller is unauthenticated (401), never
	// "someone with no permissions" (403).
	Err error
}

// Authenticated reports whether the request carries a usable identity.
func (r Resolution) Authenticated() bool { return r.Err == nil && r.Identity.Account != "" }

type ctxKey struct{}

// NewContext returns ctx carrying res.
func NewContext(ctx context.Context, res Resolution) context.Context {
	return context.WithValue(ctx, ctxKey{}, res)
}

// FromContext returns the request's Resolution, if the edge resolved one.
func FromContext(ctx context.Context) (Resolution, bool) {
	res, ok := ctx.Value(ctxKey{}).(Resolution)
	return res, ok
}
