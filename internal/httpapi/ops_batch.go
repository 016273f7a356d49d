package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/store"
)

type opsBatch struct {
	ID             int64       `json:"id"`
	ProjectID      int64       `json:"projectId"`
	Status         string      `json:"status"`
	Version        int64       `json:"version"`
	MR             *mrView     `json:"mr,omitempty"`
	Branch         string      `json:"branch,omitempty"`
	SplitDepth     int         `json:"splitDepth"`
	ParentBatchID  int64       `json:"parentBatchId,omitempty"`
	FailureCode    string      `json:"failureCode,omitempty"`
	FailureMessage string      `json:"failureMessage,omitempty"`
	CreatedAt      time.Time   `json:"createdAt"`
	UpdatedAt      time.Time   `json:"updatedAt"`
	Members        []opsMember `json:"members,omitempty"`
}

type opsMember struct {
	ID          int64  `json:"id"`
	OperationID string `json:"operationId"`
	// Kind is REVOKE for a revocation (a removal in the batch's MR),
	// GRANT otherwise.
	Kind domain.OperationKind `json:"kind"`
}

// toOpsMember reads a member's kind from its operationId: a revocation's
// is derived from its grant's and no client may submit one like it
// (domain.IsRevocationID), so no read per member is needed.
func toOpsMember(m store.BatchMember) opsMember {
	k := domain.OperationGrant
	if domain.IsRevocationID(m.OperationID) {
		k = domain.OperationRevoke
	}
	return opsMember{ID: m.ID, OperationID: m.OperationID, Kind: k}
}

// opsBatch reads a batch, with its members when asked.
func (s *Server) opsBatch(ctx context.Context, id int64, members bool) (*opsBatch, error) {
	st := s.deps.Business.Ops
	b, err := st.BatchGet(ctx, id)
	if errors.Is(err, domain.ErrNotFound) {
		return nil, domain.Errorf(domain.CodeNotFound, "No such batch.", "batch %d", id)
	} else if err != nil {
		return nil, domain.Internal("ops batch", err)
	}
	v := toOpsBatch(b)
	if members {
		ms, err := st.BatchMembers(ctx, id)
		if err != nil {
			return nil, domain.Internal("ops batch members", err)
		}
		v.Members = make([]opsMember, 0, len(ms))
		for _, m := range ms {
			v.Members = append(v.Members, toOpsMember(m))
		}
	}
	return &v, nil
}

// handleOpsBatches is GET /ops/batches?limit=&cursor=: batches newest
// first, keyset-paged by an opaque cursor.
func (s *Server) handleOpsBatches() http.Handler {
	return s.opsCall(config.RouteOpsBatchesGet, nil, func(r *http.Request) (string, any, error) {
		st := s.deps.Business.Ops
		if st == nil {
			return "", nil, domain.Internal("ops: no store wired", nil)
		}
		q := r.URL.Query()
		f := &fieldErrors{}
		// 0 leaves the store's default page size.
		p := store.BatchListParams{Limit: queryLimit(q.Get("limit"), 0, store.BatchListMaxLimit, f)}
		if c := q.Get("cursor"); c != "" {
			id, err := decodeBatchCursor(c)
			if err != nil {
				badCursor(f)
			}
			p.BeforeID = id
		}
		if err := f.err(); err != nil {
			return "", nil, err
		}
		page, err := st.BatchList(r.Context(), p)
		if err != nil {
			return "", nil, domain.Internal("ops batches", err)
		}
		// Each batch with its members, so the console links them to their
		// requests without a call per row. One indexed read per batch of
		// the page (the console asks for 50): an operator's page, polled
		// every few seconds, not user traffic — accepted over a store
		// operation of its own.
		items := make([]opsBatch, 0, len(page.Items))
		for _, b := range page.Items {
			v := toOpsBatch(b)
			ms, err := st.BatchMembers(r.Context(), b.ID)
			if err != nil {
				return "", nil, domain.Internal("ops batches members", err)
			}
			v.Members = make([]opsMember, 0, len(ms))
			for _, m := range ms {
				v.Members = append(v.Members, toOpsMember(m))
			}
			items = append(items, v)
		}
		next := ""
		if page.NextBeforeID != 0 {
			next = encodeBatchCursor(page.NextBeforeID)
		}
		return "", struct {
			Items      []opsBatch `json:"items"`
			NextCursor string     `json:"nextCursor"`
		}{items, next}, nil
	})
}

// handleOpsBatch is GET /ops/batches/{id}: the batch and its members.
func (s *Server) handleOpsBatch() http.Handler {
	return s.opsCall(config.RouteOpsBatchesGet, []string{"id"}, func(r *http.Request) (string, any, error) {
		raw := r.PathValue("id")
		if s.deps.Business.Ops == nil {
			return raw, nil, domain.Internal("ops: no store wired", nil)
		}
		id, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || id <= 0 {
			return raw, nil, domain.Errorf(domain.CodeNotFound, "No such batch.", "batch id %q", raw)
		}
		b, err := s.opsBatch(r.Context(), id, true)
		if err != nil {
			return raw, nil, err
		}
		return "batch:" + raw, b, nil
	})
}

func toOpsBatch(b store.Batch) opsBatch {
	v := opsBatch{
		ID: b.ID, ProjectID: b.ProjectID, Status: b.Status.String(), Version: b.Version, Branch: b.Branch,
		SplitDepth: b.SplitDepth, ParentBatchID: b.ParentBatchID, FailureCode: b.FailureCode, FailureMessage: b.FailureMessage,
		CreatedAt: b.CreatedAt.UTC(), UpdatedAt: b.UpdatedAt.UTC(),
	}
	if b.MRIID != 0 {
		v.MR = &mrView{IID: b.MRIID, URL: b.MRURL}
	}
	return v
}

// Batch cursors are opaque tokens over the last batch id of a page.
func encodeBatchCursor(id int64) string { return encodeIDCursor("b.", id) }

func decodeBatchCursor(c string) (int64, error) { return decodeIDCursor("b.", "batch cursor", c) }
