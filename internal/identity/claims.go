package identity

import (
	"errors"
	"fmt"
	"time"

	"changeflow/internal/config"
)

// Field names the directory column a token's account claim is matched on
// (oidc.accountField).
type Field string

// Directory fields.
const (
	// FieldAccount matches the claim on the canonical account.
	FieldAccount Field = "account"
	// FieldEmail matches it on the email.
	FieldEmail Field = "email"
	// FieldEmployeeID matches it on the employee ID.
	FieldEmployeeID Field = "employeeId"
)

// ParseField returns the Field s names; anything else is FieldAccount, the
// strictest match (the configuration layer resolves oidc.accountField to
// one of the three spellings already, so this only guards direct callers).
func ParseField(s string) Field {
	switch f := Field(s); f {
	case FieldEmail, FieldEmployeeID:
		return f
	}
	return FieldAccount
}

// OIDCPolicy is how a verified token is checked further and mapped to an
// account; the oidc.* configuration items, read per request.
type OIDCPolicy struct {
	// Audience is the client ID tokens must be issued to (oidc.audience).
	Audience string
	// AccountClaim is the one claim the account comes from
	// (oidc.accountClaim, default "sub").
	AccountClaim string
	// AccountField is the directory field that claim is matched on
	// (oidc.accountField, default FieldAccount).
	AccountField Field
	// JWKSMinRefresh is the least time between two downloads of the
	// issuer's keys (oidc.jwksMinRefresh, default 1 min).
	JWKSMinRefresh time.Duration
	// ClockSkew is how far in the future a token's iat may lie
	// (oidc.clockSkew, default 1 min).
	ClockSkew time.Duration
}

// Defaults of OIDCPolicy's zero fields.
const (
	DefaultAccountClaim   = "sub"
	DefaultJWKSMinRefresh = time.Minute
	DefaultClockSkew      = time.Minute
)

func (p OIDCPolicy) withDefaults() OIDCPolicy {
	if p.Audience == "" {
		p.Audience = "changeflow"
	}
	if p.AccountClaim == "" {
		p.AccountClaim = DefaultAccountClaim
	}
	p.AccountField = ParseField(string(p.AccountField))
	if p.JWKSMinRefresh <= 0 {
		p.JWKSMinRefresh = DefaultJWKSMinRefresh
	}
	if p.ClockSkew <= 0 {
		p.ClockSkew = DefaultClockSkew
	}
	return p
}

// Errors of the claim mapping; login-layer failures (401).
var (
	// ErrNoAccountClaim: the token lacks the configured account claim, or
	// it is not a string.
	ErrNoAccountClaim = errors.New("oidc: token has no usable account claim")
	// ErrUnverifiedEmail: the account claim is email and email_verified is
	// not exactly true. An address the issuer did not verify names
	// whoever typed it in.
	ErrUnverifiedEmail = errors.New("oidc: email is not verified")
)

// MapClaims maps a verified token's claims to an identity. The
// account comes from exactly one claim, p.AccountClaim, matched on exactly
// one directory field, p.AccountField. Nothing else is consulted:
// preferred_username (which many issuers let the user edit) counts only
// when it is the configured claim, an email only when email_verified is
// the JSON value true, and a value that matches nobody is never retried on
// another field or another claim — that retry is what let a token with an
// opaque sub and preferred_username "adam" act as adam.
//
// A value of the wrong shape for the field (an email-style sub matched on
// account, say) is ErrInvalidLogin: matching it elsewhere would be a
// fallback, and resolving it to an unknown account would hide a
// misconfiguration behind people who cannot do anything. A well-formed
// value the directory does not know is that value as the account,
// untrusted — the HTTP edge refuses it (UNKNOWN_ACCOUNT) and metrics skip
// it;
// with no directory at all, an account-shaped value on FieldAccount is
// trusted, since the issuer is then the only authority on accounts.
func MapClaims(claims map[string]any, p OIDCPolicy, dir *Directory) (Identity, error) {
	p = p.withDefaults()
	v, ok := claims[p.AccountClaim].(string)
	if !ok || v == "" {
		return Identity{}, fmt.Errorf("%w: %q", ErrNoAccountClaim, p.AccountClaim)
	}
	if p.AccountClaim == "email" {
		if verified, _ := claims["email_verified"].(bool); !verified {
			return Identity{}, ErrUnverifiedEmail
		}
	}
	l := Normalize(v)
	if !fieldAccepts(p.AccountField, l.Kind) {
		return Identity{}, fmt.Errorf("%w: claim %q is %s-shaped, oidc.accountField is %s", ErrInvalidLogin, p.AccountClaim, l.Kind, p.AccountField)
	}
	if e, ok := dir.LookupField(p.AccountField, l); ok {
		return Identity{Account: e.Account, Email: e.Email, Trusted: true}, nil
	}
	id := Identity{Account: l.Value, Trusted: dir == nil && p.AccountField == FieldAccount && l.Kind == KindAccount}
	if l.Kind == KindEmail {
		id.Email = l.Value
	}
	return id, nil
}

// fieldAccepts reports whether a value of kind k can be matched on f. An
// employee-ID-shaped value is a possible account name ("e10023"), as
// Directory.Lookup also assumes; it is looked up as an account, never as
// an employee ID, when the field is account.
func fieldAccepts(f Field, k Kind) bool {
	switch f {
	case FieldEmail:
		return k == KindEmail
	case FieldEmployeeID:
		return k == KindEmployeeID
	default:
		return k == KindAccount || k == KindEmployeeID
	}
}

// PolicyFromConfig reads the oidc.* items of s.
func PolicyFromConfig(s *config.Snapshot) OIDCPolicy {
	c := s.OIDC()
	return OIDCPolicy{
		Audience: c.Audience, AccountClaim: c.AccountClaim, AccountField: ParseField(c.AccountField),
		JWKSMinRefresh: c.JWKSMinRefresh, ClockSkew: c.ClockSkew,
	}
}
