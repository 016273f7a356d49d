package httpapi

import (
	"context"
	"net/http"
	"strings"
	"time"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/store"
)

// The deploy-callback inbox in the operations API: GET
// /ops/requests/{operationId} shows the callbacks recorded for the
// request's MR, and GET /ops/callbacks/deploy lists them all — the only
// place a callback for an MR no request has (UNKNOWN_MR) shows up.

// opsDeployListMaxLimit bounds one page of GET /ops/callbacks/deploy.
const opsDeployListMaxLimit = 200

// deployDispositions is the closed set the listing filters on.
var deployDispositions = map[string]bool{
	store.DeployRecorded: true, store.DeployApplied: true, store.DeployDuplicate: true, store.DeployEarly: true,
	store.DeployUnknownMR: true, store.DeployNotMerged: true, store.DeployIgnored: true,
}

// opsDeployCallback is one recorded deploy callback (an inbox row).
type opsDeployCallback struct {
	ID          int64  `json:"id"`
	DeliveryKey string `json:"deliveryKey"`
	ProjectID   int64  `json:"projectId"`
	MRIID       int64  `json:"mrIid"`
	Status      string `json:"status"`
	// Disposition is what became of it (RECORDED until the workflow
	// classified it), Reason why; Duplicates counts later deliveries of
	// the same key.
	Disposition string    `json:"disposition"`
	Reason      string    `json:"reason"`
	Duplicates  int       `json:"duplicates"`
	ReceivedAt  time.Time `json:"receivedAt"`
}

func toOpsDeployCallback(r store.DeployCallbackRecord) opsDeployCallback {
	return opsDeployCallback{
		ID: r.ID, DeliveryKey: r.DeliveryKey, ProjectID: r.ProjectID, MRIID: r.MRIID, Status: r.Status,
		Disposition: r.Disposition, Reason: r.Reason, Duplicates: r.Duplicates, ReceivedAt: r.ReceivedAt.UTC(),
	}
}

// opsDeployCallbacksOf is the request's MR's deploy callbacks, newest
// first (empty for a request without an MR).
func opsDeployCallbacksOf(ctx context.Context, st OpsStore, op store.Operation) ([]opsDeployCallback, error) {
	out := []opsDeployCallback{}
	if op.MRIID == 0 {
		return out, nil
	}
	recs, err := st.DeployCallbackListByMR(ctx, op.ProjectID, op.MRIID, opsInboxLimit)
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		out = append(out, toOpsDeployCallback(r))
	}
	return out, nil
}

// handleOpsDeployCallbacks is GET /ops/callbacks/deploy?disposition=&limit=&cursor=.
func (s *Server) handleOpsDeployCallbacks() http.Handler {
	return s.opsCall(config.RouteOpsRequestGet, nil, func(r *http.Request) (string, any, error) {
		st := s.deps.Business.Ops
		if st == nil {
			return "", nil, domain.Internal("ops: no store wired", nil)
		}
		q := r.URL.Query()
		f := &fieldErrors{}
		p := store.DeployCallbackListParams{Limit: queryLimit(q.Get("limit"), 50, opsDeployListMaxLimit, f)}
		if v := strings.ToUpper(strings.TrimSpace(q.Get("disposition"))); v != "" {
			if !deployDispositions[v] {
				f.add("disposition", "must be one of RECORDED, APPLIED, DUPLICATE, EARLY, UNKNOWN_MR, NOT_MERGED, IGNORED")
			}
			p.Disposition = v
		}
		if c := q.Get("cursor"); c != "" {
			id, err := decodeDeployCursor(c)
			if err != nil {
				badCursor(f)
			}
			p.BeforeID = id
		}
		if err := f.err(); err != nil {
			return "", nil, err
		}
		// One row more than the page says whether there is a next page.
		want := p.Limit
		p.Limit++
		recs, err := st.DeployCallbackList(r.Context(), p)
		if err != nil {
			return "", nil, domain.Internal("ops deploy callbacks", err)
		}
		next := ""
		if len(recs) > want {
			recs = recs[:want]
			next = encodeDeployCursor(recs[want-1].ID)
		}
		items := make([]opsDeployCallback, 0, len(recs))
		for _, rec := range recs {
			items = append(items, toOpsDeployCallback(rec))
		}
		return "", struct {
			Items      []opsDeployCallback `json:"items"`
			NextCursor string              `json:"nextCursor"`
		}{items, next}, nil
	})
}

func encodeDeployCursor(id int64) string { return encodeIDCursor("d.", id) }

func decodeDeployCursor(c string) (int64, error) {
	return decodeIDCursor("d.", "deploy callback cursor", c)
}
