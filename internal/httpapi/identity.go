package httpapi

import (
	"net/http"

	"changeflow/internal/identity"
)

// IdentityResolver works out who is calling; *identity.Resolver implements
// it. Resolve must not reject: a failed login is carried in the
// Resolution's Err for the authorization link to answer.
type IdentityResolver interface {
	Resolve(r *http.Request) identity.Resolution
}

// resolveIdentity is the outer link that resolves the caller once per
// request, before the mux and every per-route link, and stores the
// Resolution in the context: rate limiting keys on it, authorization
// decides on it, metrics and handlers read it — one answer for all of them.
// It never writes a response. A request whose context already
// carries a Resolution keeps it, so nothing is resolved twice. With no
// resolver every caller is anonymous, which denies every protected route.
func (s *Server) resolveIdentity(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := identity.FromContext(r.Context()); !ok {
			var res identity.Resolution
			if s.deps.Identity != nil {
				res = s.deps.Identity.Resolve(r)
			}
			r = r.WithContext(identity.NewContext(r.Context(), res))
		}
		next.ServeHTTP(w, r)
	})
}
