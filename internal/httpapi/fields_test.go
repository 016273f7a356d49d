package httpapi

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// fieldsOf returns a 400's data.fields as "field: problem" lines.
func fieldsOf(t *testing.T, r resp) []string {
	t.Helper()
	r.want(t, 400, "INVALID_ARGUMENT")
	list, ok := r.data["fields"].([]any)
	if !ok {
		t.Fatalf("a 400 without data.fields: %s", r.raw)
	}
	out := []string{}
	for _, e := range list {
		m := e.(map[string]any)
		out = append(out, fmt.Sprintf("%v: %v", m["field"], m["problem"]))
	}
	return out
}

// TestFieldErrorsNameEveryBadField sends requests with several bad inputs
// at once, to every endpoint that validates a body or query parameters,
// and checks that one 400 names each of them — field and problem — and
// keeps the one-line message of the first.
func TestFieldErrorsNameEveryBadField(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		var feed *EventFeed
		w := newBizWorld(t, st, withOpsActions(), withBatchActions(),
			withEventFeed(&feed, func(st *store.Store) VersionReader { return st }))
		stoppedFixture(t, st, "fe-stopped", "alice")
		cb := map[string]string{"X-Callback-Token": cbToken}
		tests := []struct {
			name    string
			r       req
			message string
			fields  []string
		}{
			{"submit: a bad id, a missing key, wrong types",
				req{method: "POST", path: "/api/requests", user: "alice", body: `{"operationId":"a b","targetKey":"","reason":5,"days":"3"}`},
				"operationId may contain only printable characters without spaces or '/'.",
				[]string{ // in the body's order, though the wrong types were found first
					"operationId: may contain only printable characters without spaces or '/'",
					"targetKey: is required",
					"reason: must be a string",
					"days: must be a whole number",
				}},
			{"submit: no reason, days out of the target's range",
				req{method: "POST", path: "/api/requests", user: "alice", body: `{"targetKey":"` + tOpen + `","reason":"  ","days":31}`},
				"reason is required.",
				[]string{"reason: is required", "days: must be between 1 and 30 for this target"}},
			{"submit: an unknown target, days below 1, a reason over the limit",
				req{method: "POST", path: "/api/requests", user: "alice", body: `{"targetKey":"nope","reason":"` + strings.Repeat("x", 501) + `","days":0}`},
				"Unknown target.",
				[]string{"targetKey: is not a configured target", "reason: must be at most 500 characters of text", "days: must be at least 1"}},
			{"submit: a reason on two lines, days a fraction",
				req{method: "POST", path: "/api/requests", user: "alice", body: `{"targetKey":"` + tOpen + `","reason":"a\nb","days":1.5}`},
				"reason must be one line of text without control or bidirectional-formatting characters (U+000A at character 2).",
				[]string{"reason: must be one line of text without control or bidirectional-formatting characters (U+000A at character 2)",
					"days: must be a whole number"}},
			{"submit: a bad Idempotency-Key is named as the header",
				req{method: "POST", path: "/api/requests", user: "alice", header: map[string]string{"Idempotency-Key": "a/b"},
					body: `{"targetKey":"` + tOpen + `"}`},
				"Idempotency-Key may contain only printable characters without spaces or '/'.",
				[]string{"Idempotency-Key: may contain only printable characters without spaces or '/'", "reason: is required"}},
			{"submit: the header and operationId differ",
				req{method: "POST", path: "/api/requests", user: "alice", header: map[string]string{"Idempotency-Key": "k1"},
					body: `{"operationId":"k2","targetKey":"` + tOpen + `","reason":"r","days":99}`},
				"The Idempotency-Key header and operationId differ; send one, or the same value in both.",
				[]string{"operationId: differs from the Idempotency-Key header; send one, or the same value in both",
					"days: must be between 1 and 30 for this target"}},
			{"submit: a body that is not an object names no field",
				req{method: "POST", path: "/api/requests", user: "alice", body: `["targetKey"]`},
				"The request body is not valid JSON of the expected shape.", []string{}},
			{"my requests: limit and cursor",
				req{method: "GET", path: "/api/requests?limit=500&cursor=bad", user: "alice"},
				"limit must be a number from 1 to 100.",
				[]string{"limit: must be a number from 1 to 100", "cursor: is not valid; start from the first page"}},
			{"request events: Last-Event-ID",
				req{method: "GET", path: "/api/requests/fe-stopped/events", user: "alice", header: map[string]string{"Last-Event-ID": "x"}},
				"Last-Event-ID must be an event id this stream sent (a number).",
				[]string{"Last-Event-ID: must be an event id this stream sent (a number)"}},
			{"ops batches: limit and cursor",
				req{method: "GET", path: "/ops/batches?limit=x&cursor=bad", user: "olivia"},
				"limit must be a number from 1 to 500.",
				[]string{"limit: must be a number from 1 to 500", "cursor: is not valid; start from the first page"}},
			{"ops deploy inbox: limit, disposition and cursor",
				req{method: "GET", path: "/ops/callbacks/deploy?limit=0&disposition=NOPE&cursor=bad", user: "olivia"},
				"limit must be a number from 1 to 200.",
				[]string{"limit: must be a number from 1 to 200",
					"disposition: must be one of RECORDED, APPLIED, DUPLICATE, EARLY, UNKNOWN_MR, NOT_MERGED, IGNORED",
					"cursor: is not valid; start from the first page"}},
			{"retrigger: step of the wrong type",
				req{method: "POST", path: "/ops/requests/fe-stopped/retrigger", user: "olivia", body: `{"step":5}`},
				"step must be a string.", []string{"step: must be a string"}},
			{"retrigger: step not where the request stopped",
				req{method: "POST", path: "/ops/requests/fe-stopped/retrigger", user: "olivia", body: `{"step":"merge"}`},
				"The request is not stopped at merge: it is at CREATE_FAILED.",
				[]string{"step: does not name where the request stopped: it is at CREATE_FAILED"}},
			{"rounds: projectId",
				req{method: "POST", path: "/ops/rounds", user: "olivia", body: `{"projectId":-1}`},
				"projectId must be a positive integer.", []string{"projectId: must be a positive integer"}},
			{"settle: the batch id",
				req{method: "POST", path: "/ops/batches/x/settle", user: "olivia"},
				"The batch id must be a positive integer.", []string{"id: must be a positive integer"}},
			{"approval callback: every field",
				req{method: "POST", path: "/callbacks/approval", header: cb, body: `{"requestId":"","operationId":"","result":"MAYBE","ext":5}`},
				"requestId is required (at most 128 characters).",
				[]string{"requestId: is required (at most 128 characters)", "operationId: is required (at most 64 characters)",
					"result: must be APPROVED, REJECTED or WITHDRAWN", "ext: must be an object"}},
			{"deploy callback: wrong types and missing fields",
				req{method: "POST", path: "/callbacks/deploy", header: cb, body: `{"requestId":5,"project":"1","status":""}`},
				"requestId must be a string.",
				[]string{"requestId: must be a string", "project: must be a whole number", "mrIid: is required (a positive whole number)",
					"status: is required"}},
			{"GitLab webhook: no delivery id, object_kind of the wrong type",
				req{method: "POST", path: "/callbacks/gitlab", header: map[string]string{"X-Gitlab-Token": hookToken}, body: `{"object_kind":3}`},
				"Idempotency-Key or X-Gitlab-Event-UUID is required (at most 64 characters).",
				[]string{"X-Gitlab-Event-UUID: is required (Idempotency-Key, else X-Gitlab-Event-UUID; at most 64 characters)",
					"object_kind: must be a string"}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				r := w.do(tt.r)
				got := fieldsOf(t, r)
				if !slices.Equal(got, tt.fields) {
					t.Fatalf("data.fields\n got %q\nwant %q", got, tt.fields)
				}
				if r.env.Message != tt.message {
					t.Fatalf("message %q, want %q", r.env.Message, tt.message)
				}
			})
		}
	})
}

// TestDecodeObjectMatchesFieldsAsEncodingJSONDoes: members match by tag
// name exactly, else case-insensitively; nested structs are named by a
// dotted path; unknown members and null are ignored.
func TestDecodeObjectMatchesFieldsAsEncodingJSONDoes(t *testing.T) {
	type inner struct {
		N int `json:"n"`
	}
	type body struct {
		Name  string `json:"name"`
		Count *int   `json:"count"`
		Inner inner  `json:"inner"`
		Skip  string `json:"-"`
	}
	var b body
	f := &fieldErrors{}
	if err := decodeObject([]byte(`{"NAME":"x","count":null,"inner":{"N":"two"},"other":1,"Skip":"s"}`), &b, f); err != nil {
		t.Fatal(err)
	}
	if b.Name != "x" || b.Count != nil || b.Skip != "" {
		t.Fatalf("decoded %+v", b)
	}
	if len(f.problems) != 1 || f.problems[0].Field != "inner.n" || f.problems[0].Problem != "must be a whole number" {
		t.Fatalf("problems %+v", f.problems)
	}
	var exact body
	if err := decodeObject([]byte(`{"Name":"folded","name":"exact"}`), &exact, &fieldErrors{}); err != nil || exact.Name != "exact" {
		t.Fatalf("exact match: %+v %v", exact, err)
	}
	for _, bad := range []string{``, `[]`, `"x"`, `{"name":"a"} {}`, `{"name":`} {
		if err := decodeObject([]byte(bad), &body{}, &fieldErrors{}); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
}
