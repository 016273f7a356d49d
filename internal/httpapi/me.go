package httpapi

import (
	"net/http"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/identity"
)

// meView is GET /api/me: who the server takes the caller to be, and which
// parts of the web app are theirs.
type meView struct {
	Account string `json:"account"`
	// Operations says the caller holds one of the rule codes of the
	// console's read routes (authz.routes.ops-request-get.rules), so the
	// app shows the Operations tab. It only hides a tab: every /ops/ route
	// still checks its own rules on every call.
	Operations bool `json:"operations"`
}

// handleMe is GET /api/me. The answer costs one permission check, the one
// the console's first page would cost anyway (answered from the cache
// within authz.cacheTTL); any failure of it answers operations: false
// (fail closed: a hidden tab, never a shown one the API would refuse),
// logged. It spends the caller's authz bucket like every /ops/ route: a
// page asks once per load and per change of person, and before the bucket
// a caller looping on it cost the permission service a check per call.
func (s *Server) handleMe() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, _ := identity.FromContext(r.Context())
		v := meView{Account: res.Identity.Account}
		if _, err := s.checkRules(r.Context(), config.RouteOpsRequestGet, res.Identity.Account); err != nil {
			s.deps.Logger.Debug("me: no operations tab", "subject", res.Identity.Account, "err", err)
		} else {
			v.Operations = true
		}
		w.Header().Set("Cache-Control", "no-store")
		respond(w, s.deps.Logger, domain.CodeOK, v)
	})
}
