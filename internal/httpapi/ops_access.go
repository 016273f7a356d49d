package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/store"
)

// Who had access to what and when (docs/api.md, "Access history"): an
// entry in a target's binding file on the default branch, from the moment
// its change was in effect until its removal was in effect, as the store
// recorded it in the transaction of each move (store.AccessAtTarget,
// store.AccessAtSubject, store.AccessHistory).

// accessItem is one period of GET /ops/access and /ops/access/history.
type accessItem struct {
	Subject   string    `json:"subject"`
	TargetKey string    `json:"targetKey"`
	From      time.Time `json:"from"`
	// Until is null while the access lasts.
	Until       *time.Time `json:"until"`
	Source      string     `json:"source"`
	OperationID *string    `json:"operationId"`
	ApprovalID  *string    `json:"approvalId"`
	MRIID       *int64     `json:"mrIid"`
	MergeSHA    *string    `json:"mergeSha"`
	// EndSHA is the commit that ended the period: the one that removed a
	// repo period's entry, or the merge commit of changeflow's removal or
	// renewal that ended it; null while open and when unknown.
	EndSHA *string `json:"endSha"`
}

// accessAtData is GET /ops/access's data.
type accessAtData struct {
	At    time.Time    `json:"at"`
	Items []accessItem `json:"items"`
	accessCheck
}

// accessHistoryData is GET /ops/access/history's data.
type accessHistoryData struct {
	From  time.Time    `json:"from"`
	To    time.Time    `json:"to"`
	Items []accessItem `json:"items"`
	// More says the window holds more periods than limit: ask for a
	// narrower one.
	More bool `json:"more"`
	accessCheck
}

// accessItemOf is a in the API's form: times in UTC, what is unknown null.
func accessItemOf(a store.AccessInterval) accessItem {
	it := accessItem{Subject: a.Subject, TargetKey: a.TargetKey, From: a.From.UTC(), Source: a.Source,
		OperationID: nonEmpty(a.OperationID), ApprovalID: nonEmpty(a.ApprovalID), MergeSHA: nonEmpty(a.MergeSHA), EndSHA: nonEmpty(a.EndSHA)}
	if !a.Open() {
		u := a.Until.UTC()
		it.Until = &u
	}
	if a.MRIID != 0 {
		it.MRIID = &a.MRIID
	}
	return it
}

// nonEmpty is s, or nil for "".
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// accessItems is items in the API's form, never null.
func accessItems(items []store.AccessInterval) []accessItem {
	out := make([]accessItem, 0, len(items))
	for _, a := range items {
		out = append(out, accessItemOf(a))
	}
	return out
}

// queryTime reads the RFC 3339 time of query parameter name, adding the
// problem to f when it is missing or not a time.
func queryTime(q url.Values, name string, f *fieldErrors) time.Time {
	v := q.Get(name)
	if v == "" {
		f.addMessage(name, "is required", fmt.Sprintf("%s is required: an RFC 3339 time such as 2026-03-01T09:30:00Z.", name))
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		f.addMessage(name, "is not an RFC 3339 time", fmt.Sprintf("%s must be an RFC 3339 time such as 2026-03-01T09:30:00Z; %q is not.", name, v))
		return time.Time{}
	}
	return t.UTC()
}

// handleOpsAccess is GET /ops/access?target=KEY&at=T or
// ?subject=S&at=T: who had access to KEY at T, or what S had at T.
func (s *Server) handleOpsAccess() http.Handler {
	return s.opsCall(config.RouteOpsRequestGet, nil, func(r *http.Request) (string, any, error) {
		st := s.deps.Business.Ops
		if st == nil {
			return "", nil, domain.Internal("ops access: no store wired", nil)
		}
		q := r.URL.Query()
		f := &fieldErrors{}
		target, subject := q.Get("target"), q.Get("subject")
		if (target == "") == (subject == "") {
			f.addMessage("target", "exactly one of target and subject", "Name exactly one of target (who had access to it) and subject (what they had access to).")
		}
		at := queryTime(q, "at", f)
		if err := f.err(); err != nil {
			return "", nil, err
		}
		var (
			items []store.AccessInterval
			err   error
		)
		if target != "" {
			items, err = st.AccessAtTarget(r.Context(), target, at)
		} else {
			items, err = st.AccessAtSubject(r.Context(), subject, at)
		}
		if err != nil {
			return "", nil, domain.Internal("ops access", err)
		}
		out := accessAtData{At: at, Items: accessItems(items)}
		if target != "" {
			out.accessCheck = s.accessCheckOf(r.Context(), target)
		} else {
			out.accessCheck = s.accessCheckOfSubject(r.Context(), subject)
		}
		return "", out, nil
	})
}

// handleOpsAccessHistory is GET /ops/access/history?target=KEY&from=T1&
// to=T2&limit=: every period of KEY overlapping [T1, T2), oldest first.
func (s *Server) handleOpsAccessHistory() http.Handler {
	return s.opsCall(config.RouteOpsRequestGet, nil, func(r *http.Request) (string, any, error) {
		st := s.deps.Business.Ops
		if st == nil {
			return "", nil, domain.Internal("ops access history: no store wired", nil)
		}
		q := r.URL.Query()
		f := &fieldErrors{}
		target := q.Get("target")
		if target == "" {
			f.addMessage("target", "is required", "target is required: the target whose history to read.")
		}
		from, to := queryTime(q, "from", f), queryTime(q, "to", f)
		if !f.has("from") && !f.has("to") && !from.Before(to) {
			f.addMessage("to", "must be after from", "to must be after from: the window is [from, to).")
		}
		limit := queryLimit(q.Get("limit"), store.MaxAccessHistory, store.MaxAccessHistory, f)
		if err := f.err(); err != nil {
			return "", nil, err
		}
		items, more, err := st.AccessHistory(r.Context(), target, from, to, limit)
		if err != nil {
			return "", nil, domain.Internal("ops access history", err)
		}
		return "", accessHistoryData{From: from, To: to, Items: accessItems(items), More: more,
			accessCheck: s.accessCheckOf(r.Context(), target)}, nil
	})
}

// opsAccessOf sets the period operationID opened on its detail v, so the
// console can link it: one read of idx_access_interval_operation.
func opsAccessOf(ctx context.Context, st OpsStore, operationID string, v *opsRequestView) error {
	a, err := st.AccessOfOperation(ctx, operationID)
	if errors.Is(err, domain.ErrNotFound) {
		return nil
	}
	if err != nil {
		return domain.Internal("ops request access", err)
	}
	item := accessItemOf(a)
	v.Access = &item
	return nil
}
