package gitlab

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

type requestsView struct {
	Capacity int             `json:"capacity"`
	Dropped  int64           `json:"dropped"`
	Requests []RequestRecord `json:"requests"`
}

func (e *env) requests(query string) requestsView {
	e.t.Helper()
	r := e.must(200, "GET", "", "/_control/requests"+query, nil)
	var v requestsView
	if err := json.Unmarshal(r.Raw, &v); err != nil {
		e.t.Fatalf("decode %s: %v", r.Raw, err)
	}
	return v
}

// TestRequestLogNamesTheTokensUser: every API call is listed with its
// method, path, the user its token belongs to (never the token), the
// status the client saw and a time; ?user= and ?after= narrow the list,
// DELETE and reset empty it.
func TestRequestLogNamesTheTokensUser(t *testing.T) {
	e := newEnv(t)
	e.must(200, "GET", tokBot, "/user", nil)
	e.must(200, "GET", tokA1, "/projects/1/merge_requests?private_token="+tokA1, nil)
	e.must(401, "GET", "not-a-token", "/user", nil)
	e.must(404, "GET", tokObserver, "/projects/99", nil)
	e.must(201, "POST", "", "/_control/faults", map[string]any{"method": "GET", "path": "/version", "kind": "status", "status": 503})
	e.must(503, "GET", tokMaint, "/version", nil)

	v := e.requests("")
	want := []struct {
		method, path, user string
		status             int
	}{
		{"GET", "/api/v4/user", "changeflow-bot", 200},
		{"GET", "/api/v4/projects/1/merge_requests", "approver-1", 200},
		{"GET", "/api/v4/user", "", 401},
		{"GET", "/api/v4/projects/99", "observer", 404},
		{"GET", "/api/v4/version", "maintainer", 503}, // an injected fault, as the client saw it
	}
	if len(v.Requests) != len(want) {
		t.Fatalf("got %d requests, want %d: %+v", len(v.Requests), len(want), v.Requests)
	}
	for i, w := range want {
		got := v.Requests[i]
		if got.Method != w.method || got.Path != w.path || got.User != w.user || got.Status != w.status {
			t.Errorf("request %d = %s %s %q %d, want %s %s %q %d", i, got.Method, got.Path, got.User, got.Status, w.method, w.path, w.user, w.status)
		}
		if got.Seq != int64(i+1) || got.Time.IsZero() {
			t.Errorf("request %d: seq %d, time %v", i, got.Seq, got.Time)
		}
	}
	raw := string(e.must(200, "GET", "", "/_control/requests", nil).Raw)
	for _, tok := range []string{tokBot, tokA1, tokObserver, tokMaint, "not-a-token"} {
		if strings.Contains(raw, tok) {
			t.Fatalf("the request log shows the token %q: %s", tok, raw)
		}
	}

	if got := e.requests("?user=approver-1").Requests; len(got) != 1 || got[0].User != "approver-1" {
		t.Fatalf("?user=approver-1: %+v", got)
	}
	if got := e.requests("?after=3").Requests; len(got) != 2 || got[0].Seq != 4 {
		t.Fatalf("?after=3: %+v", got)
	}
	if got := e.requests("?limit=1").Requests; len(got) != 1 || got[0].Seq != 5 {
		t.Fatalf("?limit=1 keeps the newest: %+v", got)
	}
	e.must(400, "GET", "", "/_control/requests?limit=x", nil)

	e.must(http.StatusNoContent, "DELETE", "", "/_control/requests", nil)
	if got := e.requests(""); len(got.Requests) != 0 || got.Dropped != 0 {
		t.Fatalf("after DELETE: %+v", got)
	}
	// seq keeps counting across a clear, so ?after= from before still works.
	e.must(200, "GET", tokBot, "/user", nil)
	if got := e.requests("?after=5").Requests; len(got) != 1 || got[0].Seq != 6 {
		t.Fatalf("after a clear: %+v", got)
	}
	e.must(200, "POST", "", "/_control/reset", nil)
	if got := e.requests("").Requests; len(got) != 0 {
		t.Fatalf("after reset: %+v", got)
	}
}

// TestRequestLogIsBounded: the log keeps the newest RequestLogSize
// requests and counts the ones it overwrote.
func TestRequestLogIsBounded(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.RequestLogSize = 3 })
	for range 5 {
		e.must(200, "GET", tokBot, "/user", nil)
	}
	v := e.requests("")
	if v.Capacity != 3 || v.Dropped != 2 || len(v.Requests) != 3 {
		t.Fatalf("capacity %d, dropped %d, %d requests", v.Capacity, v.Dropped, len(v.Requests))
	}
	for i, r := range v.Requests {
		if r.Seq != int64(i+3) {
			t.Fatalf("kept %+v, want seq 3..5 oldest first", v.Requests)
		}
	}
}

// TestRequestLogRecordsADroppedAnswer: a drop fault closes the connection
// after the change was applied; the log still lists the call, status 0.
func TestRequestLogRecordsADroppedAnswer(t *testing.T) {
	e := newEnv(t)
	e.must(201, "POST", "", "/_control/faults", map[string]any{"method": "POST", "path": "/projects/1/repository/branches", "kind": "drop"})
	req, _ := http.NewRequest("POST", e.base+"/api/v4/projects/1/repository/branches?branch=lost&ref=main", nil)
	req.Header.Set("PRIVATE-TOKEN", tokBot)
	if res, err := http.DefaultClient.Do(req); err == nil {
		res.Body.Close()
		t.Fatalf("want a transport error, got %d", res.StatusCode)
	}
	var got []RequestRecord
	eventually(t, "the dropped call in the log", func() bool {
		got = e.requests("?user=changeflow-bot").Requests
		return len(got) == 1
	})
	if got[0].Method != "POST" || got[0].Path != "/api/v4/projects/1/repository/branches" || got[0].Status != 0 {
		t.Fatalf("dropped call logged as %+v", got[0])
	}
}
