package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/store"
)

// Callback answer codes (docs/api.md, "Callbacks"). They are not error codes and are not
// in the status table: each is written with its 2xx status explicitly.
const (
	// codeDuplicate: this delivery id was recorded before; nothing done.
	codeDuplicate domain.Code = "DUPLICATE"
	// codeIgnoredStale: recorded, but the request has moved on (the sink
	// said the callback no longer applies).
	codeIgnoredStale domain.Code = "IGNORED_STALE"
)

// Callback headers.
const (
	headerCallbackToken = "X-Callback-Token"
	headerGitLabToken   = "X-Gitlab-Token"
	headerGitLabEvent   = "X-Gitlab-Event-UUID"
)

// Approval results (docs/api.md, "Callbacks"; ck_approval_callback_result).
var approvalResults = map[string]bool{"APPROVED": true, "REJECTED": true, "WITHDRAWN": true}

// SinkOutcome is what acting on a callback did.
type SinkOutcome int

// Sink outcomes.
const (
	// SinkApplied: the callback moved its request on.
	SinkApplied SinkOutcome = iota + 1
	// SinkStale: the request has moved on, or a guard refused the
	// callback; it changes nothing.
	SinkStale
	// SinkRecorded: kept in the inbox to be acted on later (its decision
	// is not confirmed yet): answered 202 ACCEPTED.
	SinkRecorded
)

// ApprovalCallback is a parsed, recorded approval callback.
type ApprovalCallback struct {
	DeliveryKey, ApprovalID, OperationID, Result string
	// MRID is ext.mrId: present only on legacy-flow approvals, and how the
	// workflow tells the flows apart (docs/flows/callbacks.md).
	MRID string
	// DecidedBy and Comment are the optional decidedBy and comment: who
	// decided and their comment, as the approval system reports them.
	DecidedBy, Comment string
}

// DeployCallback is a parsed, recorded deploy callback.
type DeployCallback struct {
	// RowID is its inbox row, where the sink notes what became of it.
	RowID       int64
	DeliveryKey string
	ProjectID   int64
	MRIID       int64
	Status      string
}

// GitLabEvent is a recorded GitLab webhook delivery.
type GitLabEvent struct {
	EventUUID string
	// Kind is the body's object_kind (pipeline, merge_request, …).
	Kind string
	Body []byte
}

// CallbackSink acts on a callback after it was authenticated, parsed and
// recorded once. The workflow implements it. It is a fast path: the
// recorded row is the durable inbox — approval callbacks are indexed by
// operation, deploy callbacks by (project, MR) — which the workflow reads
// when it looks at a waiting request, so a callback recorded while no sink
// is wired, or whose sink call failed, is still acted on. A sink error is
// therefore logged and answered 202 ACCEPTED, never 5xx: a 5xx would make
// the sender redeliver into DUPLICATE, gaining nothing.
type CallbackSink interface {
	Approval(ctx context.Context, cb ApprovalCallback) (SinkOutcome, error)
	Deploy(ctx context.Context, cb DeployCallback) (SinkOutcome, error)
	GitLab(ctx context.Context, ev GitLabEvent) (SinkOutcome, error)
}

// recordedMessage is the note on a 202: recorded, not yet acted on.
const recordedMessage = "Recorded; the workflow acts on it from the callback inbox."

// checkCallbackToken authenticates a callback by its shared token,
// compared in constant time against callbacks.tokens.<name> and, while it
// is set, callbacks.tokens.<name>Previous (a rotation under way,
// docs/configuration.md). No current token configured rejects every
// callback of that kind, whatever the previous one holds
// (docs/configuration.md): an unauthenticated callback could approve
// anything, and a retired value must not outlive the one replacing it. It
// runs before the body is read.
func (s *Server) checkCallbackToken(r *http.Request, name, header string) error {
	deny := func(why string) error {
		return domain.Errorf(domain.CodeUnauthenticated, "Invalid or missing callback token.", "callback %s: %s", name, why)
	}
	if s.deps.Business.Config == nil {
		return deny("no configuration source")
	}
	snap := s.deps.Business.Config.Current()
	want, ok, _ := snap.CallbackToken(name)
	if !ok {
		return deny("callbacks.tokens." + name + " not configured → reject every callback")
	}
	prev, prevSet := snap.CallbackPreviousToken(name)
	got := r.Header.Get(header)
	if got == "" {
		return deny("no " + header + " header")
	}
	// Hash every side first so the comparisons' time depends on no
	// token's length, and compare against both values every time, the
	// previous one masked when unset, so the time does not tell whether a
	// previous token is configured or which one matched. Only after a
	// match does the path differ (counting the previous token's use),
	// when the caller holds a valid token anyway.
	g, w, p := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want)), sha256.Sum256([]byte(prev))
	cur := subtle.ConstantTimeCompare(g[:], w[:])
	old := subtle.ConstantTimeCompare(g[:], p[:]) & subtle.ConstantTimeEq(int32(boolInt(prevSet)), 1)
	if cur|old != 1 {
		return deny("token mismatch")
	}
	if cur != 1 {
		s.deps.Metrics.CallbackTokenPrevious(name)
		s.prevWarn.used(s.deps.Logger, name, header)
	}
	return nil
}

// boolInt is 1 for true, 0 for false.
func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// callbackHandler is the shared shape of the three callback endpoints:
// token → read body → parse → record once → sink. Once authenticated and
// parsed the answer is always 2xx (docs/api.md, "Callbacks"): 200 DUPLICATE for a
// delivery recorded before, 200 OK / IGNORED_STALE from the sink, 202
// ACCEPTED when only recorded.
func (s *Server) callbackHandler(name, header string, handle func(r *http.Request, raw []byte) (callbackAnswer, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.checkCallbackToken(r, name, header); err != nil {
			writeError(w, r, s.deps.Logger, err)
			return
		}
		if s.deps.Business.Callbacks == nil {
			writeError(w, r, s.deps.Logger, domain.Internal("callback "+name+": no callback store wired", nil))
			return
		}
		raw, err := readBody(w, r)
		if err != nil {
			writeError(w, r, s.deps.Logger, err)
			return
		}
		ans, err := handle(r, raw)
		if err != nil {
			writeError(w, r, s.deps.Logger, err)
			return
		}
		writeJSON(w, s.deps.Logger, ans.status, Envelope{Code: ans.code, Message: ans.message, Data: nil})
	})
}

// callbackAnswer is a callback's 2xx answer.
type callbackAnswer struct {
	status  int
	code    domain.Code
	message string
}

var (
	answerDuplicate = callbackAnswer{http.StatusOK, codeDuplicate, "Already received."}
	answerRecorded  = callbackAnswer{http.StatusAccepted, domain.CodeAccepted, recordedMessage}
)

// afterRecord turns the sink's result into the answer.
func (s *Server) afterRecord(kind string, act func(CallbackSink) (SinkOutcome, error)) callbackAnswer {
	sink := s.deps.Business.Sink
	if sink == nil {
		return answerRecorded
	}
	out, err := act(sink)
	switch {
	case err != nil:
		s.deps.Logger.Error("callback recorded; acting on it failed, the inbox keeps it", "kind", kind, "err", err)
		return answerRecorded
	case out == SinkStale:
		return callbackAnswer{http.StatusOK, codeIgnoredStale, "The request has moved on; nothing to do."}
	case out == SinkRecorded:
		return answerRecorded
	}
	return callbackAnswer{http.StatusOK, domain.CodeOK, ""}
}

// handleApprovalCallback is POST /callbacks/approval.
func (s *Server) handleApprovalCallback() http.Handler {
	type body struct {
		RequestID   string `json:"requestId"`
		ApprovalID  string `json:"approvalId"`
		OperationID string `json:"operationId"`
		Result      string `json:"result"`
		Ext         struct {
			MRID any `json:"mrId"`
		} `json:"ext"`
		DecidedBy string `json:"decidedBy"`
		Comment   string `json:"comment"`
	}
	return s.callbackHandler(config.CallbackApproval, headerCallbackToken, func(r *http.Request, raw []byte) (callbackAnswer, error) {
		var b body
		f := &fieldErrors{}
		if err := decodeObject(raw, &b, f); err != nil {
			return callbackAnswer{}, err
		}
		cb := ApprovalCallback{
			DeliveryKey: strings.TrimSpace(b.RequestID), ApprovalID: strings.TrimSpace(b.ApprovalID),
			OperationID: strings.TrimSpace(b.OperationID), Result: strings.ToUpper(strings.TrimSpace(b.Result)),
			DecidedBy: strings.TrimSpace(b.DecidedBy), Comment: b.Comment,
		}
		if b.Ext.MRID != nil {
			cb.MRID = strings.Trim(mustJSON(b.Ext.MRID), `"`)
		}
		if !f.has("requestId") && (cb.DeliveryKey == "" || len(cb.DeliveryKey) > 128) {
			f.add("requestId", "is required (at most 128 characters)")
		}
		if !f.has("operationId") && (cb.OperationID == "" || len(cb.OperationID) > maxOperationIDRunes) {
			f.add("operationId", fmt.Sprintf("is required (at most %d characters)", maxOperationIDRunes))
		}
		if !f.has("result") && !approvalResults[cb.Result] {
			f.add("result", "must be APPROVED, REJECTED or WITHDRAWN")
		}
		if err := f.err(); err != nil {
			return callbackAnswer{}, err
		}
		inserted, err := s.deps.Business.Callbacks.ApprovalCallbackInsert(r.Context(), store.ApprovalCallbackParams{
			DeliveryKey: cb.DeliveryKey, OperationID: cb.OperationID, ApprovalID: cb.ApprovalID, Result: cb.Result,
			MRID: cb.MRID, DecidedBy: cb.DecidedBy, Comment: cb.Comment,
		})
		if err != nil {
			return callbackAnswer{}, domain.Internal("record approval callback", err)
		}
		if !inserted {
			return answerDuplicate, nil
		}
		return s.afterRecord("approval", func(k CallbackSink) (SinkOutcome, error) { return k.Approval(r.Context(), cb) }), nil
	})
}

// handleDeployCallback is POST /callbacks/deploy.
func (s *Server) handleDeployCallback() http.Handler {
	type body struct {
		RequestID string `json:"requestId"`
		Project   int64  `json:"project"`
		MRIID     int64  `json:"mrIid"`
		Status    string `json:"status"`
	}
	return s.callbackHandler(config.CallbackDeploy, headerCallbackToken, func(r *http.Request, raw []byte) (callbackAnswer, error) {
		var b body
		f := &fieldErrors{}
		if err := decodeObject(raw, &b, f); err != nil {
			return callbackAnswer{}, err
		}
		cb := DeployCallback{DeliveryKey: strings.TrimSpace(b.RequestID), ProjectID: b.Project, MRIID: b.MRIID, Status: strings.TrimSpace(b.Status)}
		if !f.has("requestId") && len(cb.DeliveryKey) > 128 {
			f.add("requestId", "is at most 128 characters")
		}
		for _, p := range []struct {
			field string
			v     int64
		}{{"project", cb.ProjectID}, {"mrIid", cb.MRIID}} {
			if !f.has(p.field) && p.v <= 0 {
				f.add(p.field, "is required (a positive whole number)")
			}
		}
		if !f.has("status") && cb.Status == "" {
			f.add("status", "is required")
		}
		if err := f.err(); err != nil {
			return callbackAnswer{}, err
		}
		rec, err := s.deps.Business.Callbacks.DeployCallbackInsert(r.Context(), store.DeployCallbackParams{
			DeliveryKey: cb.DeliveryKey, ProjectID: cb.ProjectID, MRIID: cb.MRIID, Status: cb.Status,
		})
		if err != nil {
			return callbackAnswer{}, domain.Internal("record deploy callback", err)
		}
		if !rec.Inserted {
			return answerDuplicate, nil
		}
		cb.RowID = rec.ID
		return s.afterRecord("deploy", func(k CallbackSink) (SinkOutcome, error) { return k.Deploy(r.Context(), cb) }), nil
	})
}

// handleGitLabWebhook is POST /callbacks/gitlab. Deliveries are deduped
// by Idempotency-Key (stable across GitLab's retries), else
// X-Gitlab-Event-UUID; one with neither cannot be deduped and is 400.
// Webhooks only speed up waiting — polling stays the fallback — so an
// event kind the workflow does not use is recorded and answered like any
// other.
func (s *Server) handleGitLabWebhook() http.Handler {
	type body struct {
		ObjectKind string `json:"object_kind"`
	}
	return s.callbackHandler(config.CallbackGitLab, headerGitLabToken, func(r *http.Request, raw []byte) (callbackAnswer, error) {
		f := &fieldErrors{}
		idField, id := headerIdempotencyKey, strings.TrimSpace(r.Header.Get(headerIdempotencyKey))
		if id == "" {
			idField, id = headerGitLabEvent, strings.TrimSpace(r.Header.Get(headerGitLabEvent))
		}
		if id == "" || len(id) > 64 {
			f.addMessage(idField, "is required (Idempotency-Key, else X-Gitlab-Event-UUID; at most 64 characters)",
				"Idempotency-Key or X-Gitlab-Event-UUID is required (at most 64 characters).")
		}
		var b body
		if err := decodeObject(raw, &b, f); err != nil {
			// The body is unusable as a whole. A header problem found
			// first stays the answer (as it was before the body was
			// parsed at all); either way the caller has one thing to fix
			// before the rest can be checked.
			if ferr := f.err(); ferr != nil {
				return callbackAnswer{}, ferr
			}
			return callbackAnswer{}, err
		}
		kind := strings.TrimSpace(b.ObjectKind)
		if !f.has("object_kind") && kind == "" {
			f.add("object_kind", "is required")
		}
		if err := f.err(); err != nil {
			return callbackAnswer{}, err
		}
		inserted, err := s.deps.Business.Callbacks.GitLabEventInsert(r.Context(), id, kind)
		if err != nil {
			return callbackAnswer{}, domain.Internal("record GitLab event", err)
		}
		if !inserted {
			return answerDuplicate, nil
		}
		ev := GitLabEvent{EventUUID: id, Kind: kind, Body: raw}
		ans := s.afterRecord("gitlab", func(k CallbackSink) (SinkOutcome, error) { return k.GitLab(r.Context(), ev) })
		if ans == answerRecorded {
			// Only the delivery id and kind are kept: what a webhook says,
			// the workflow's polling finds out anyway.
			ans.message = "Recorded; polling covers what it reports."
		}
		return ans, nil
	})
}
