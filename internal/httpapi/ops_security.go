package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"changeflow/internal/config"
	"changeflow/internal/domain"
)

// securityActionPrefix starts the audit action of every security event the
// workflow records (workflow.securityEvent: "security.<kind>").
const securityActionPrefix = "security."

// securityEventsMax bounds one answer of GET /ops/security-events.
const securityEventsMax = 500

// opsSecurityEvent is one security event as the console shows it.
type opsSecurityEvent struct {
	ID int64 `json:"id"`
	// Kind is foreign_head, foreign_branch or foreign_mr.
	Kind string `json:"kind"`
	// Resource is the operationId, "batch-<id>" or "mr-<iid>".
	Resource string    `json:"resource"`
	MRIID    int64     `json:"mrIid,omitempty"`
	Branch   string    `json:"branch,omitempty"`
	SHA      string    `json:"sha,omitempty"`
	Why      string    `json:"why"`
	At       time.Time `json:"at"`
}

// handleOpsSecurityEvents is GET /ops/security-events?limit=: the
// security events recorded (content on changeflow's branches it did not
// write, docs/security.md), newest first, limit 1..500 (default 50).
func (s *Server) handleOpsSecurityEvents() http.Handler {
	return s.opsCall(config.RouteOpsRequestGet, nil, func(r *http.Request) (string, any, error) {
		st := s.deps.Business.Ops
		if st == nil {
			return "", nil, domain.Internal("ops: no store wired", nil)
		}
		f := &fieldErrors{}
		limit := queryLimit(r.URL.Query().Get("limit"), 50, securityEventsMax, f)
		if err := f.err(); err != nil {
			return "", nil, err
		}
		recs, err := st.AuditListByActionPrefix(r.Context(), securityActionPrefix, limit)
		if err != nil {
			return "", nil, domain.Internal("ops security events", err)
		}
		items := make([]opsSecurityEvent, 0, len(recs))
		for _, a := range recs {
			ev := opsSecurityEvent{ID: a.ID, Kind: strings.TrimPrefix(a.Action, securityActionPrefix), Resource: a.Resource, At: a.CreatedAt.UTC()}
			var p struct {
				MRIID  int64  `json:"mrIid"`
				Branch string `json:"branch"`
				SHA    string `json:"sha"`
				Why    string `json:"why"`
			}
			// The params are the workflow's own JSON; a record that does
			// not parse still lists, with its raw params as the reason.
			if json.Unmarshal([]byte(a.Params), &p) == nil {
				ev.MRIID, ev.Branch, ev.SHA, ev.Why = p.MRIID, p.Branch, p.SHA, p.Why
			} else {
				ev.Why = a.Params
			}
			items = append(items, ev)
		}
		return "", struct {
			Items []opsSecurityEvent `json:"items"`
		}{items}, nil
	})
}
