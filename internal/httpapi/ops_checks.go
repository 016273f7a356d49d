package httpapi

import (
	"net/http"

	"changeflow/internal/config"
	"changeflow/internal/domain"
)

// handleOpsChecks is GET /ops/checks: the deployment checks `changeflow
// doctor` prints — the tokens, the trusted proxies, and against GitLab the
// protection of changeflow/*, the bots' roles and the webhook — as data,
// each finding with its status (ok, warn, fail) and what to change. The
// answer is 200 whatever the findings: the report is the answer, and its
// status says whether something failed.
func (s *Server) handleOpsChecks() http.Handler {
	return s.opsCall(config.RouteOpsChecksGet, nil, func(r *http.Request) (string, any, error) {
		if s.deps.Business.Checks == nil {
			return "checks", nil, domain.Internal("ops checks: no deployment checks wired", nil)
		}
		return "checks", s.deps.Business.Checks(r.Context()), nil
	})
}
