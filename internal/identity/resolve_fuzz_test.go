package identity_test

import (
	"strings"
	"testing"

	"changeflow/internal/identity"
)

// fuzzPolicies are the claim configurations the fuzz target cycles
// through: the default, email, preferred_username and a custom
// employee-ID claim.
func fuzzPolicies() []identity.OIDCPolicy {
	return []identity.OIDCPolicy{
		{},
		{AccountClaim: "email", AccountField: identity.FieldEmail},
		{AccountClaim: "preferred_username"},
		{AccountClaim: "employee_id", AccountField: identity.FieldEmployeeID},
	}
}

// oracle is the directory as plain data, matched by hand rather than by
// Directory's indexes, so the fuzz target checks the resolver against an
// independent reading of "the entry whose field equals the value".
type oracle []identity.Entry

func (o oracle) match(field identity.Field, v string) (identity.Entry, bool) {
	l := identity.Normalize(v)
	for _, e := range o {
		switch field {
		case identity.FieldEmail:
			if l.Kind == identity.KindEmail && l.Value == e.Email {
				return e, true
			}
		case identity.FieldEmployeeID:
			if l.Kind == identity.KindEmployeeID && l.Value == e.EmployeeID {
				return e, true
			}
		default:
			if (l.Kind == identity.KindAccount || l.Kind == identity.KindEmployeeID) && strings.ToLower(l.Value) == e.Account {
				return e, true
			}
		}
	}
	return identity.Entry{}, false
}

func fuzzOracle() oracle {
	return oracle{
		{Account: "alice", Email: "alice@corp.example", EmployeeID: "E10023"},
		{Account: "bob", Email: "bob@corp.example", EmployeeID: "E10024"},
		{Account: "olivia", Email: "olivia@corp.example", EmployeeID: "E10031"},
		{Account: "adam", Email: "adam@corp.example", EmployeeID: "E10001"},
	}
}

// FuzzIdentityResolution: no input maps to an account other than the one
// the configured claim (or, for the auth proxy, the user header) names.
// For every policy, the claims carry the fuzzed values in sub, email,
// preferred_username and employee_id at once, so a fallback from the
// configured claim to any other would show. A resolved identity is either
// the directory entry whose configured field equals the configured claim's
// value (trusted), or that value itself (untrusted); the same for the
// proxy headers, where the email header may name the caller only when no
// user header came.
func FuzzIdentityResolution(f *testing.F) {
	f.Add("opaque-9f8e7d", "adam@corp.example", "adam", "E10001", uint8(0), "alice", "")
	f.Add("alice", "alice@corp.example", "alice", "E10023", uint8(1), "E55555", "bob@corp.example")
	f.Add("E10001", "adam@corp.example", "olivia", "adam", uint8(2), "adam smith", "adam@corp.example")
	f.Add("Adam@Corp.Example", "ADAM@corp.example", "Adam", "e10001", uint8(3), "", "adam@corp.example")
	dir := directory(f)
	truth := fuzzOracle()
	res := identity.NewResolver(identity.Options{Directory: dir, TrustedProxies: loopback})

	f.Fuzz(func(t *testing.T, sub, email, username, employee string, verified uint8, user, emailHeader string) {
		verifiedValues := []any{nil, true, false, "true", 1.0}
		for _, p := range fuzzPolicies() {
			claims := map[string]any{"sub": sub, "email": email, "preferred_username": username, "employee_id": employee}
			if v := verifiedValues[int(verified)%len(verifiedValues)]; v != nil {
				claims["email_verified"] = v
			}
			id, err := identity.MapClaims(claims, p, dir)
			if err != nil {
				if id.Account != "" {
					t.Fatalf("%+v: an error with an account %+v", p, id)
				}
				continue
			}
			claim := p.AccountClaim
			if claim == "" {
				claim = identity.DefaultAccountClaim
			}
			field := identity.ParseField(string(p.AccountField))
			named := claims[claim].(string)
			if claim == "email" && claims["email_verified"] != true {
				t.Fatalf("%+v: email_verified %v accepted", p, claims["email_verified"])
			}
			checkNamed(t, "claims", truth, field, named, id)
		}

		r := proxyRequest("127.0.0.1:5000")
		if user != "" {
			r.Header.Set(identity.HeaderUser, user)
		}
		if emailHeader != "" {
			r.Header.Set(identity.HeaderEmail, emailHeader)
		}
		got := res.Resolve(r)
		if got.Err != nil || got.Identity.Account == "" {
			return
		}
		if user == "" {
			checkNamed(t, "email header", truth, identity.FieldEmail, emailHeader, got.Identity)
			return
		}
		// The user header may be any login form.
		l := identity.Normalize(user)
		for _, f := range []identity.Field{identity.FieldAccount, identity.FieldEmail, identity.FieldEmployeeID} {
			if e, ok := truth.match(f, user); ok {
				if got.Identity.Account != e.Account || !got.Identity.Trusted {
					t.Fatalf("user %q is %s, resolved %+v", user, e.Account, got.Identity)
				}
				return
			}
		}
		if got.Identity.Account != l.Value || got.Identity.Trusted {
			t.Fatalf("unknown user %q (email header %q) resolved to %+v", user, emailHeader, got.Identity)
		}
	})
}

// checkNamed: id is the entry whose field equals named, or named itself.
func checkNamed(t *testing.T, what string, truth oracle, field identity.Field, named string, id identity.Identity) {
	t.Helper()
	if e, ok := truth.match(field, named); ok {
		if id.Account != e.Account || !id.Trusted {
			t.Fatalf("%s: %q on %s is %s, resolved %+v", what, named, field, e.Account, id)
		}
		return
	}
	if want := identity.Normalize(named).Value; id.Account != want || id.Trusted {
		t.Fatalf("%s: %q on %s names nobody, resolved %+v (want %q, untrusted)", what, named, field, id, want)
	}
}
