package httpapi

import (
	"context"
	"net/http"

	"changeflow/internal/domain"
	"changeflow/internal/identity"
	"changeflow/internal/store"
)

// statsMineCap bounds how many of the caller's requests /api/stats
// counts (page by page over the subject index); beyond it "mine" reports
// the cap. A store count query would remove the cap (noted for the
// store's owner); nobody has thousands of access requests.
const statsMineCap = 1000

// statsBody is the legacy /api/stats body: a bare object, no envelope.
type statsBody struct {
	// Pending is how many approved requests wait in the batch queues of
	// the configured projects (admitted, not yet claimed by a round).
	Pending int `json:"pending"`
	// Mine is how many requests the caller has submitted (capped at
	// statsMineCap).
	Mine int `json:"mine"`
}

// handleStats is the legacy GET /api/stats. It returns a bare JSON object
// — its old clients read the fields at the top level — while the
// cross-cutting links in front of it (rate limiting, login) answer in the
// envelope as on every other route: they decide before the handler runs
// and write their own response, so this handler's shape never changes for
// them (docs/api.md "Rate limiting"). Its own failure is the envelope 500 too: a legacy client
// cannot read a failure either way, and the envelope carries no detail.
func (s *Server) handleStats() http.Handler {
	b := s.deps.Business
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, _ := identity.FromContext(r.Context())
		if b.Requests == nil || b.Config == nil {
			writeError(w, r, s.deps.Logger, domain.Internal("stats: no request store wired", nil))
			return
		}
		body, err := s.stats(r.Context(), res.Identity.Account)
		if err != nil {
			writeError(w, r, s.deps.Logger, domain.Internal("stats", err))
			return
		}
		writeJSON(w, s.deps.Logger, http.StatusOK, body)
	})
}

func (s *Server) stats(ctx context.Context, subject string) (statsBody, error) {
	st := s.deps.Business.Requests
	var out statsBody
	if p := projectID(s.deps.Business.Config.Current()); p != 0 {
		n, err := st.BatchWaitingCount(ctx, p)
		if err != nil {
			return statsBody{}, err
		}
		out.Pending = n
	}
	var after store.OperationCursor
	for out.Mine < statsMineCap {
		page, err := st.OperationListBySubject(ctx, store.OperationListBySubjectParams{
			Subject: subject, Limit: store.MaxOperationPage, After: after,
		})
		if err != nil {
			return statsBody{}, err
		}
		out.Mine += len(page.Items)
		if page.Next.IsZero() {
			break
		}
		after = page.Next
	}
	return out, nil
}
