package httpapi

import (
	"context"
	"sync"
	"testing"

	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// recordingSink is a CallbackSink that records what it was given and
// answers with out.
type recordingSink struct {
	mu        sync.Mutex
	approvals []ApprovalCallback
	deploys   []DeployCallback
	events    []GitLabEvent
	out       SinkOutcome
	err       error
}

func (s *recordingSink) Approval(_ context.Context, cb ApprovalCallback) (SinkOutcome, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.approvals = append(s.approvals, cb)
	return s.out, s.err
}

func (s *recordingSink) Deploy(_ context.Context, cb DeployCallback) (SinkOutcome, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deploys = append(s.deploys, cb)
	return s.out, s.err
}

func (s *recordingSink) GitLab(_ context.Context, ev GitLabEvent) (SinkOutcome, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, ev)
	return s.out, s.err
}

const (
	approvalBody = `{"requestId":"d-1","approvalId":"ap-1","operationId":"op-1","result":"APPROVED","ext":{"mrId":42}}`
	deployBody   = `{"requestId":"dd-1","project":1,"mrIid":7,"status":"SUCCESS"}`
	hookBody     = `{"object_kind":"pipeline","object_attributes":{"id":5,"status":"success"}}`
)

func TestCallbacks(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st)
		cb := func(path, body string, h map[string]string) resp {
			return w.do(req{method: "POST", path: path, body: body, header: h})
		}
		tok := map[string]string{headerCallbackToken: cbToken}
		hook := func(id string) map[string]string {
			return map[string]string{headerGitLabToken: hookToken, headerIdempotencyKey: id}
		}

		t.Run("callback401", func(t *testing.T) {
			for name, c := range map[string]struct {
				path string
				h    map[string]string
			}{
				"approval: no token":                                  {"/callbacks/approval", nil},
				"approval: wrong token":                               {"/callbacks/approval", map[string]string{headerCallbackToken: "nope"}},
				"approval: token prefix":                              {"/callbacks/approval", map[string]string{headerCallbackToken: cbToken[:5]}},
				"deploy: wrong token":                                 {"/callbacks/deploy", map[string]string{headerCallbackToken: cbToken + "x"}},
				"gitlab: the callback token is not the webhook token": {"/callbacks/gitlab", map[string]string{headerGitLabToken: cbToken, headerIdempotencyKey: "e"}},
				"gitlab: no token":                                    {"/callbacks/gitlab", map[string]string{headerIdempotencyKey: "e"}},
			} {
				t.Run(name, func(t *testing.T) {
					// A malformed body does not get a 400 before the token check.
					cb(c.path, `{broken`, c.h).want(t, 401, "UNAUTHENTICATED")
				})
			}
		})

		t.Run("callback202: recorded into the inbox, no sink wired", func(t *testing.T) {
			r := cb("/callbacks/approval", approvalBody, tok)
			r.want(t, 202, "ACCEPTED")
			if r.env.Message != recordedMessage {
				t.Fatalf("message %q", r.env.Message)
			}
			cb("/callbacks/deploy", deployBody, tok).want(t, 202, "ACCEPTED")
			cb("/callbacks/gitlab", hookBody, hook("evt-1")).want(t, 202, "ACCEPTED")
		})

		t.Run("callback200 DUPLICATE: the same delivery again", func(t *testing.T) {
			cb("/callbacks/approval", approvalBody, tok).want(t, 200, "DUPLICATE")
			cb("/callbacks/deploy", deployBody, tok).want(t, 200, "DUPLICATE")
			cb("/callbacks/gitlab", hookBody, hook("evt-1")).want(t, 200, "DUPLICATE")
			// X-Gitlab-Event-UUID dedupes when there is no Idempotency-Key.
			h := map[string]string{headerGitLabToken: hookToken, headerGitLabEvent: "evt-2"}
			cb("/callbacks/gitlab", hookBody, h).want(t, 202, "ACCEPTED")
			cb("/callbacks/gitlab", hookBody, h).want(t, 200, "DUPLICATE")
		})

		t.Run("callback400: authenticated but unparsable", func(t *testing.T) {
			for name, c := range map[string]struct {
				path, body string
				h          map[string]string
			}{
				"approval: malformed":      {"/callbacks/approval", `{`, tok},
				"approval: no requestId":   {"/callbacks/approval", `{"operationId":"o","result":"APPROVED"}`, tok},
				"approval: unknown result": {"/callbacks/approval", `{"requestId":"x","operationId":"o","result":"MAYBE"}`, tok},
				"deploy: no mrIid":         {"/callbacks/deploy", `{"requestId":"x","project":1,"status":"SUCCESS"}`, tok},
				"gitlab: no delivery id":   {"/callbacks/gitlab", hookBody, map[string]string{headerGitLabToken: hookToken}},
				"gitlab: no object_kind":   {"/callbacks/gitlab", `{}`, hook("evt-x")},
			} {
				t.Run(name, func(t *testing.T) { cb(c.path, c.body, c.h).want(t, 400, "INVALID_ARGUMENT") })
			}
		})
	})
}

func TestCallbacksWithoutTokensRejectEverything(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st, withOverlay(map[string]any{
			"callbacks.tokens.approval": "", "callbacks.tokens.deploy": "", "callbacks.tokens.gitlab": "",
		}))
		for _, c := range []struct{ path, header, body string }{
			{"/callbacks/approval", headerCallbackToken, approvalBody},
			{"/callbacks/deploy", headerCallbackToken, deployBody},
			{"/callbacks/gitlab", headerGitLabToken, hookBody},
		} {
			t.Run(c.path, func(t *testing.T) {
				for _, tok := range []string{"", cbToken, hookToken} {
					w.do(req{method: "POST", path: c.path, body: c.body, header: map[string]string{c.header: tok, headerIdempotencyKey: "e"}}).
						want(t, 401, "UNAUTHENTICATED")
				}
			})
		}
	})
}

func TestCallbacksWithSink(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		sink := &recordingSink{out: SinkApplied}
		w := newBizWorld(t, st, withSink(sink))
		tok := map[string]string{headerCallbackToken: cbToken}
		w.do(req{method: "POST", path: "/callbacks/approval", body: approvalBody, header: tok}).want(t, 200, "OK")
		w.do(req{method: "POST", path: "/callbacks/approval", body: approvalBody, header: tok}).want(t, 200, "DUPLICATE")
		if len(sink.approvals) != 1 || sink.approvals[0].MRID != "42" || sink.approvals[0].OperationID != "op-1" {
			t.Fatalf("sink got %+v", sink.approvals)
		}
		// The optional approver and comment reach the sink and the inbox.
		named := `{"requestId":"d-named","approvalId":"ap-2","operationId":"op-2","result":"REJECTED","ext":{},"decidedBy":" jane.doe ","comment":"not now"}`
		w.do(req{method: "POST", path: "/callbacks/approval", body: named, header: tok}).want(t, 200, "OK")
		if got := sink.approvals[len(sink.approvals)-1]; got.DecidedBy != "jane.doe" || got.Comment != "not now" {
			t.Fatalf("sink got %+v", got)
		}
		if rec, _, err := st.ApprovalCallbackLatest(t.Context(), "op-2"); err != nil || rec.DecidedBy != "jane.doe" || rec.Comment != "not now" {
			t.Fatalf("inbox has %+v, %v", rec, err)
		}
		sink.out = SinkStale
		w.do(req{method: "POST", path: "/callbacks/deploy", body: deployBody, header: tok}).want(t, 200, "IGNORED_STALE")
		sink.err = context.DeadlineExceeded
		w.do(req{method: "POST", path: "/callbacks/gitlab", body: hookBody,
			header: map[string]string{headerGitLabToken: hookToken, headerIdempotencyKey: "evt-s"}}).want(t, 202, "ACCEPTED")
	})
}
