package httpapi

import (
	"net/http"

	"changeflow/internal/domain"
	"changeflow/internal/identity"
)

// targetView is one item of GET /api/targets.
type targetView struct {
	Key        string            `json:"key"`
	Title      string            `json:"title"`
	AccessMode domain.AccessMode `json:"accessMode"`
	Open       bool              `json:"open"`
	// MaxDays is the longest access a request may ask for, so a form
	// can say it before anyone types.
	MaxDays int `json:"maxDays"`
	// Why explains a closed target (e.g. "outside the test window
	// 09:00–17:00 UTC"); omitted when open.
	Why string `json:"why,omitempty"`
	// Mine is the caller's own access or request on the target
	// (targets_mine.go); omitted when there is none.
	Mine *mineView `json:"mine,omitempty"`
	// DaysFromApproval is true on the approve-first flow
	// (workflow.approveFirst, read per request): a new grant's days count
	// from its approval, not its submission, so the form shows its end
	// as "if approved now" (docs/flows/lifecycle.md, "When the access ends").
	DaysFromApproval bool `json:"daysFromApproval"`
}

// handleTargets is GET /api/targets: every configured target with its
// access state right now, read from the configuration in force
// on each request so a reload shows at once, and what the caller holds or
// has under way on it (mine), so the page offers what applies to them —
// renew or give back what they hold — rather than a request the server
// would refuse.
func (s *Server) handleTargets() http.Handler {
	b := s.deps.Business
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		items := []targetView{}
		if b.Config == nil {
			writeError(w, r, s.deps.Logger, domain.Internal("targets: no configuration source wired", nil))
			return
		}
		if b.Requests == nil {
			writeError(w, r, s.deps.Logger, domain.Internal("targets: no request store wired", nil))
			return
		}
		res, _ := identity.FromContext(r.Context())
		mine, err := s.minePerTarget(r.Context(), b.Requests, res.Identity.Account)
		if err != nil {
			writeError(w, r, s.deps.Logger, domain.Internal("targets", err))
			return
		}
		now := s.now()
		snap := b.Config.Current()
		approveFirst := snap.Workflow().ApproveFirst
		for _, t := range snap.Targets() {
			open, why := t.Open(now)
			v := targetView{Key: t.Key, Title: t.Title, AccessMode: t.AccessMode, Open: open, MaxDays: t.MaxDays,
				DaysFromApproval: approveFirst}
			if !open {
				v.Why = why
			}
			v.Mine = mine[t.Key]
			items = append(items, v)
		}
		respond(w, s.deps.Logger, domain.CodeOK, struct {
			Items []targetView `json:"items"`
		}{items})
	})
}
