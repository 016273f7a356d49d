package httpapi

import (
	"context"
	"errors"
	"net/http"
	"slices"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/identity"
)

// PermissionChecker asks the permission service which of ruleCodes subject
// holds, in one round trip; *permission.Client implements it. Any error
// means "unknown", which denies.
type PermissionChecker interface {
	Check(ctx context.Context, subject string, ruleCodes []string) (granted []string, err error)
}

// AuthzConfig reads the configuration in force; *config.Manager implements
// it. Rule codes are read from it on every request.
type AuthzConfig interface {
	Current() *config.Snapshot
}

// Authorization is the authorization link's dependencies (Deps.Authz).
// Every missing piece denies: no Config means no rule codes, and no
// Permissions means no grant.
type Authorization struct {
	Config      AuthzConfig
	Permissions PermissionChecker
	// Auditor stores ops calls' audit records (audit.go); nil skips
	// auditing and logs that it did.
	Auditor Auditor
}

// authzRateMessage is the 429 of the authz bucket (routes that ask the
// permission service).
const authzRateMessage = "Too many requests, please try again in a minute."

// unauthenticatedMessage is the 401's user message.
const unauthenticatedMessage = "Please log in."

// unknownAccountMessage is UNKNOWN_ACCOUNT's user message: the login
// worked, so "please log in" would send them round in circles; what helps
// is knowing who can add them.
const unknownAccountMessage = "You are signed in, but changeflow does not know your account, so it cannot act for you. " +
	"Ask the team that runs changeflow to add you to its directory of people."

// unknownAccountData is UNKNOWN_ACCOUNT's data: the name the login gave,
// so the page can say which sign-in is not known (the caller's own value,
// nothing of anyone else's).
type unknownAccountData struct {
	Account string `json:"account"`
}

// unknownAccount is the refusal of an identity the directory does not
// know; the log gets what an operator needs to add the person or find a
// misconfigured claim (the source, the raw value, the account it read).
func unknownAccount(pattern string, id identity.Identity) *domain.Error {
	e := domain.Errorf(domain.CodeUnknownAccount, unknownAccountMessage,
		"route %s: login %q (source %s) resolves to %q, which is not an account of the identity directory (identity.directoryFile)",
		pattern, id.Raw, id.Source, id.Account)
	e.Data = unknownAccountData{Account: id.Account}
	return e
}

// errNoLogin is the log detail of a request that carried no credentials.
var errNoLogin = errors.New("no login identity")

// authorize is the authorization link, between rate limiting and
// API metrics (docs/api.md "Rate limiting"). It decides from the identity resolved at the edge
// and the route's metadata alone — never from the body, which is not read
// yet — so a malformed body from a caller who may not call the route gets
// 401/403, not 400.
//
//   - No identity, or the login layer failed → 401 UNAUTHENTICATED.
//   - A login that names no account of the identity directory (an
//     untrusted identity: a token's claim or a header value the directory
//     does not know; with no directory configured, a value that is not an
//     account name) → 403 UNKNOWN_ACCOUNT, on every route that needs a
//     login or rules, before the permission service is asked. Such a
//     caller used to act as the unknown name ("it can act only as
//     itself"), which let a sign-in nobody set up submit requests that
//     went all the way to a merged binding.
//   - A route that needs only a login passes.
//   - A route with rules: its rule codes are authz.routes.<rules>.rules,
//     read per request; missing or empty, the permission service failing,
//     timing out or behind an open breaker, or none of the codes granted →
//     403 ACCESS_DENIED, message always exactly "Access denied" so the
//     caller cannot tell which permission it lacks or that the service is
//     down. The cause goes to the log only.
func (s *Server) authorize(rt route, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, _ := identity.FromContext(r.Context())
		if !res.Authenticated() {
			cause := res.Err
			if cause == nil {
				cause = errNoLogin
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="changeflow"`)
			writeError(w, r, s.deps.Logger, domain.Errorf(domain.CodeUnauthenticated, unauthenticatedMessage,
				"route %s: %v (source %q)", rt.pattern, cause, res.Identity.Source))
			return
		}
		if !res.Identity.Trusted {
			writeError(w, r, s.deps.Logger, unknownAccount(rt.pattern, res.Identity))
			return
		}
		if rt.rules == "" {
			next.ServeHTTP(w, r)
			return
		}
		granted, err := s.checkRules(r.Context(), rt.rules, res.Identity.Account)
		if err != nil {
			writeError(w, r, s.deps.Logger, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), grantsKey{}, granted)))
	})
}

// checkRules returns the route's rule codes account holds, or an
// ACCESS_DENIED error saying why (for the log).
func (s *Server) checkRules(ctx context.Context, routeName, account string) ([]string, error) {
	deny := func(format string, args ...any) error {
		return domain.Errorf(domain.CodeAccessDenied, domain.AccessDeniedMessage,
			"route %s, subject %s: "+format, append([]any{routeName, account}, args...)...)
	}
	cfg := s.deps.Authz.Config
	if cfg == nil {
		return nil, deny("no configuration source")
	}
	rules, _ := cfg.Current().RouteRules(routeName)
	if len(rules) == 0 {
		return nil, deny("no rule codes configured (authz.routes.%s.rules): missing means deny", routeName)
	}
	perms := s.deps.Authz.Permissions
	if perms == nil {
		return nil, deny("no permission checker")
	}
	got, err := perms.Check(ctx, account, rules)
	if err != nil {
		return nil, deny("permission check failed, denying: %v", err)
	}
	var granted []string
	for _, g := range got {
		if slices.Contains(rules, g) {
			granted = append(granted, g)
		}
	}
	if len(granted) == 0 {
		return nil, deny("holds none of %v", rules)
	}
	return granted, nil
}

type grantsKey struct{}

// grantsFromContext returns the rule codes the authorization link found
// granted for this request's route (e.g. "admin" lets a handler show
// other people's records); nil on routes without rules.
func grantsFromContext(ctx context.Context) []string {
	g, _ := ctx.Value(grantsKey{}).([]string)
	return g
}
