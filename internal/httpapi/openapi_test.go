package httpapi

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"changeflow/docs"
	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/metrics"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// webAppPatterns are the routes of the web app (docs/webapp.md): HTML
// pages and hashed assets, not API operations. They are the only
// registered routes the API description leaves out.
var webAppPatterns = []string{"GET /{$}", "GET /assets/"}

// docOperations lists the document's operations as "METHOD /path".
func docOperations(t *testing.T, s *apiSpec) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	paths, _ := s.doc["paths"].(map[string]any)
	for p, item := range paths {
		for m, op := range item.(map[string]any) {
			switch m {
			case "get", "put", "post", "delete", "patch", "head", "options", "trace":
				out[strings.ToUpper(m)+" "+p] = op.(map[string]any)
			}
		}
	}
	return out
}

// registeredRoutes builds a server as production does and returns what it
// handed to its mux.
func registeredRoutes(t *testing.T) []route {
	t.Helper()
	logger := slog.New(slog.DiscardHandler)
	return buildServer(Deps{Logger: logger, Metrics: metrics.New(logger, "test"), Ready: fakeReady{}}).registered
}

// TestOpenAPIDescribesEveryRoute walks the routes the server registers and
// the document's operations: each side's extras fail. The route metadata
// must agree with what the document says about each operation: a route
// that needs a login or rule codes takes the two logins and documents 401
// (and 403 Access denied for rule codes, under x-changeflow-route naming
// the rules' route); a rate-limited route documents 429; a route without
// a login takes none, or its callback token.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	s := loadSpec(t)
	ops := docOperations(t, s)
	served := map[string]route{}
	for _, rt := range registeredRoutes(t) {
		if slices.Contains(webAppPatterns, rt.pattern) {
			continue
		}
		served[rt.pattern] = rt
	}
	for p := range served {
		if _, ok := ops[p]; !ok {
			t.Errorf("route %q is served but not described in docs/openapi.yaml", p)
		}
	}
	for p := range ops {
		if _, ok := served[p]; !ok {
			t.Errorf("docs/openapi.yaml describes %q, which the server does not register", p)
		}
	}
	global, _ := s.doc["security"].([]any)
	callbackScheme := map[string]string{
		"POST /callbacks/approval": "approvalCallbackToken",
		"POST /callbacks/deploy":   "deployCallbackToken",
		"POST /callbacks/gitlab":   "gitlabWebhookToken",
	}
	for p, rt := range served {
		op, ok := ops[p]
		if !ok {
			continue
		}
		responses, _ := op["responses"].(map[string]any)
		has := func(status string) bool { _, ok := responses[status]; return ok }
		sec, own := op["security"].([]any)
		if !own {
			sec = global
		}
		schemes := []string{}
		for _, req := range sec {
			for name := range req.(map[string]any) {
				schemes = append(schemes, name)
			}
		}
		slices.Sort(schemes)
		switch {
		case rt.login || rt.rules != "":
			if !slices.Equal(schemes, []string{"identityHeaders", "oidcBearer"}) {
				t.Errorf("%s needs a login; the document's security is %v", p, schemes)
			}
			if !has("401") {
				t.Errorf("%s needs a login; the document has no 401", p)
			}
			if !has("403") {
				t.Errorf("%s refuses a login the directory does not know (403 UNKNOWN_ACCOUNT); the document has no 403", p)
			}
		case callbackScheme[p] != "":
			if !slices.Equal(schemes, []string{callbackScheme[p]}) {
				t.Errorf("%s is authenticated by %s; the document's security is %v", p, callbackScheme[p], schemes)
			}
			if !has("401") {
				t.Errorf("%s checks a token; the document has no 401", p)
			}
		default:
			if len(schemes) != 0 {
				t.Errorf("%s needs no login; the document's security is %v", p, schemes)
			}
		}
		if rt.rules != "" {
			if op["x-changeflow-route"] != rt.rules {
				t.Errorf("%s checks the rules of %q; x-changeflow-route is %v", p, rt.rules, op["x-changeflow-route"])
			}
			if ref, _ := responses["403"].(map[string]any); ref["$ref"] != "#/components/responses/AccessDenied" {
				t.Errorf("%s checks rule codes; its 403 is %v, want the AccessDenied response", p, responses["403"])
			}
		} else if _, ok := op["x-changeflow-route"]; ok {
			t.Errorf("%s checks no rule codes but has x-changeflow-route", p)
		}
		if rt.rateLimit != nil && !has("429") {
			t.Errorf("%s is rate limited (bucket %s); the document has no 429", p, rt.rateLimit.Bucket)
		}
		if (rt.rules != "" || rt.checks) && !has("429") {
			t.Errorf("%s asks the permission service (bucket %s); the document has no 429", p, config.BucketAuthz)
		}
		for _, status := range []string{"421", "500"} {
			if !has(status) {
				t.Errorf("%s: every route can answer %s; the document does not say so", p, status)
			}
		}
	}
}

// TestOpenAPIDocumentIsValid: the document is valid OpenAPI 3.1 by the
// specification's own JSON Schema (testdata/openapi), every $ref resolves,
// every schema compiles as JSON Schema 2020-12, every operation has a
// unique operationId and responses, and each path's template parameters
// are exactly its declared path parameters.
func TestOpenAPIDocumentIsValid(t *testing.T) {
	s := loadSpec(t)

	t.Run("the OpenAPI 3.1 schema accepts it", func(t *testing.T) {
		raw, err := os.ReadFile(filepath.Join("testdata", "openapi", "oas-3.1-schema.json"))
		if err != nil {
			t.Fatal(err)
		}
		meta, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		c := jsonschema.NewCompiler()
		const metaURL = "https://spec.openapis.org/oas/3.1/schema/2021-04-15"
		if err := c.AddResource(metaURL, meta); err != nil {
			t.Fatal(err)
		}
		sch, err := c.Compile(metaURL)
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(s.doc); err != nil {
			t.Fatalf("docs/openapi.yaml is not valid OpenAPI 3.1: %v", err)
		}
		// The schema has teeth: a document without info, of another
		// version, or with a response keyed by something other than a
		// status fails it.
		for name, breakIt := range map[string]func(d map[string]any){
			"no info":       func(d map[string]any) { delete(d, "info") },
			"OpenAPI 3.0":   func(d map[string]any) { d["openapi"] = "3.0.3" },
			"a status typo": func(d map[string]any) { responsesOf(d, "/healthz", "get")["20O"] = map[string]any{"description": "x"} },
			"a parameter without in": func(d map[string]any) {
				delete(d["components"].(map[string]any)["parameters"].(map[string]any)["Cursor"].(map[string]any), "in")
			},
		} {
			broken := decodeJSONValue(t, mustMarshal(t, s.doc)).(map[string]any)
			breakIt(broken)
			if err := sch.Validate(broken); err == nil {
				t.Errorf("the OpenAPI schema accepted a document with %s", name)
			}
		}
	})

	t.Run("every $ref resolves", func(t *testing.T) {
		n := 0
		walk(s.doc, "", func(ptr string, m map[string]any) {
			ref, ok := m["$ref"].(string)
			if !ok {
				return
			}
			n++
			if !strings.HasPrefix(ref, "#/") {
				t.Errorf("%s: $ref %q is not local", ptr, ref)
				return
			}
			if _, ok := s.at(strings.TrimPrefix(ref, "#")); !ok {
				t.Errorf("%s: $ref %q resolves to nothing", ptr, ref)
			}
		})
		if n < 50 {
			t.Fatalf("found only %d $refs: the walk is broken", n)
		}
	})

	t.Run("every schema compiles", func(t *testing.T) {
		schemas := s.doc["components"].(map[string]any)["schemas"].(map[string]any)
		for name := range schemas {
			if _, err := s.schema("/components/schemas/" + pointer(name)); err != nil {
				t.Errorf("schema %s: %v", name, err)
			}
		}
		walk(s.doc, "", func(ptr string, m map[string]any) {
			if _, ok := m["schema"].(map[string]any); ok && !strings.HasPrefix(ptr, "/components/schemas/") {
				if _, err := s.schema(ptr + "/schema"); err != nil {
					t.Errorf("%s/schema: %v", ptr, err)
				}
			}
		})
	})

	t.Run("operations: unique ids, responses, path parameters", func(t *testing.T) {
		ids := map[string]string{}
		param := regexp.MustCompile(`\{([^}]+)\}`)
		for key, op := range docOperations(t, s) {
			id, _ := op["operationId"].(string)
			if id == "" {
				t.Errorf("%s has no operationId", key)
			} else if other, dup := ids[id]; dup {
				t.Errorf("operationId %q is used by %s and %s", id, other, key)
			}
			ids[id] = key
			if rs, _ := op["responses"].(map[string]any); len(rs) == 0 {
				t.Errorf("%s has no responses", key)
			}
			path := strings.SplitN(key, " ", 2)[1]
			want := []string{}
			for _, m := range param.FindAllStringSubmatch(path, -1) {
				want = append(want, m[1])
			}
			got := []string{}
			ps, _ := op["parameters"].([]any)
			for i := range ps {
				p, _, err := s.deref(fmt.Sprintf("/paths/%s/%s/parameters/%d", pointer(path), strings.ToLower(strings.SplitN(key, " ", 2)[0]), i))
				if err != nil {
					t.Fatal(err)
				}
				if p["in"] == "path" {
					got = append(got, p["name"].(string))
					if p["required"] != true {
						t.Errorf("%s: path parameter %v is not required", key, p["name"])
					}
				}
			}
			slices.Sort(want)
			slices.Sort(got)
			if !slices.Equal(want, got) {
				t.Errorf("%s: template parameters %v, declared path parameters %v", key, want, got)
			}
		}
	})
}

// TestOpenAPIEnumsMatchTheCode: the closed sets the document lists are the
// code's — a status, code or disposition added in the code fails here
// until the document names it too.
func TestOpenAPIEnumsMatchTheCode(t *testing.T) {
	s := loadSpec(t)
	enum := func(name string) []string {
		t.Helper()
		v, ok := s.at("/components/schemas/" + name + "/enum")
		if !ok {
			t.Fatalf("schema %s has no enum", name)
		}
		out := []string{}
		for _, e := range v.([]any) {
			out = append(out, e.(string))
		}
		slices.Sort(out)
		return out
	}
	sorted := func(in []string) []string { slices.Sort(in); return in }

	var errorCodes, successCodes []string
	for code, status := range statusOf {
		if status >= 400 {
			errorCodes = append(errorCodes, string(code))
		} else {
			successCodes = append(successCodes, string(code))
		}
	}
	successCodes = append(successCodes, string(codeDuplicate), string(codeIgnoredStale))
	var bindings []string
	for _, b := range domain.BindingStatuses {
		bindings = append(bindings, string(b))
	}
	var reasons []string
	for _, r := range domain.RevokeReasons {
		reasons = append(reasons, string(r))
	}
	var refusals []string
	for _, r := range domain.Reasons() {
		refusals = append(refusals, string(r))
	}
	var kinds []string
	for _, k := range domain.OperationKinds {
		kinds = append(kinds, string(k))
	}
	var dispositions []string
	for d := range deployDispositions {
		dispositions = append(dispositions, d)
	}
	for _, c := range []struct {
		schema string
		code   []string
	}{
		{"ErrorCode", sorted(errorCodes)},
		{"SuccessCode", sorted(successCodes)},
		{"BindingStatus", sorted(bindings)},
		{"DeployDisposition", sorted(dispositions)},
		{"Hint", sorted([]string{string(domain.HintNone), string(domain.HintKeepWaiting), string(domain.HintContactMaintainers)})},
		{"OperationKind", sorted(kinds)},
		{"RevokeReason", sorted(reasons)},
		{"RefusalReason", sorted(refusals)},
	} {
		if got := enum(c.schema); !slices.Equal(got, c.code) {
			t.Errorf("docs/openapi.yaml %s lists %v; the code has %v", c.schema, got, c.code)
		}
	}
	// Each error answer's schema pins the status's code: the code a
	// component response allows must map to that response's status.
	for status, ref := range map[int]string{
		400: "InvalidArgumentAnswer", 401: "UnauthenticatedAnswer", 403: "AccessDeniedAnswer", 404: "NotFoundAnswer",
		405: "MethodNotAllowedAnswer", 409: "InProgressAnswer", 421: "MisdirectedAnswer", 422: "IdempotencyReusedAnswer",
		429: "RateLimitedAnswer", 500: "InternalAnswer", 503: "RetryLaterAnswer",
	} {
		c, ok := s.at("/components/schemas/" + ref + "/properties/code/const")
		if !ok {
			t.Errorf("%s pins no code", ref)
			continue
		}
		if got := StatusOf(domain.Code(c.(string))); got != status {
			t.Errorf("%s pins %v, which is %d, not %d", ref, c, got, status)
		}
	}
	if m, _ := s.at("/components/schemas/InternalAnswer/properties/message/const"); m != domain.GenericMessage {
		t.Errorf("InternalAnswer's message %q is not domain.GenericMessage", m)
	}
	if m, _ := s.at("/components/schemas/AccessDeniedAnswer/properties/message/const"); m != domain.AccessDeniedMessage {
		t.Errorf("AccessDeniedAnswer's message %q is not domain.AccessDeniedMessage", m)
	}
}

// TestRunbookServed: GET /api/runbook serves docs/runbook.md as built in,
// as Markdown with no login, an ETag and 304 on a match.
func TestRunbookServed(t *testing.T) {
	h, _ := newTestServer(t, fakeReady{})
	rec, _ := do(t, h, "GET", "/api/runbook", nil)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body.String())
	}
	if !bytes.Equal(rec.Body.Bytes(), docs.Runbook()) || !bytes.HasPrefix(rec.Body.Bytes(), []byte("# Runbook")) {
		t.Fatalf("the served runbook is not docs/runbook.md: %.80q", rec.Body.String())
	}
	if ct := rec.Header().Get("Content-Type"); ct != "text/markdown; charset=utf-8" {
		t.Fatalf("Content-Type %q", ct)
	}
	etag := rec.Header().Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	req := httptest.NewRequest("GET", "/api/runbook", nil)
	req.Header.Set("If-None-Match", etag)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	conformRecorded(t, req, nil, rec.Code, rec.Header(), rec.Body.Bytes())
	if rec.Code != http.StatusNotModified || rec.Body.Len() != 0 {
		t.Fatalf("If-None-Match with the ETag: %d %q", rec.Code, rec.Body.String())
	}
}

// TestOpenAPIServed: GET /api/openapi.json serves the embedded YAML as
// JSON, with no login, an ETag and 304 on a match.
func TestOpenAPIServed(t *testing.T) {
	h, _ := newTestServer(t, fakeReady{})
	rec, _ := do(t, h, "GET", "/api/openapi.json", nil)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body.String())
	}
	want, err := openAPIJSON(docs.OpenAPIYAML())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rec.Body.Bytes(), want) {
		t.Fatal("the served document is not docs/openapi.yaml converted")
	}
	doc := decodeJSONValue(t, rec.Body.Bytes()).(map[string]any)
	if doc["openapi"] != "3.1.0" {
		t.Fatalf("openapi %v", doc["openapi"])
	}
	etag := rec.Header().Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	req := httptest.NewRequest("GET", "/api/openapi.json", nil)
	req.Header.Set("If-None-Match", `"other", `+etag)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	conformRecorded(t, req, nil, rec.Code, rec.Header(), rec.Body.Bytes())
	if rec.Code != http.StatusNotModified || rec.Body.Len() != 0 {
		t.Fatalf("If-None-Match with the ETag: %d %q", rec.Code, rec.Body.String())
	}
	req.Header.Set("If-None-Match", `"other"`)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("If-None-Match with another ETag: %d", rec.Code)
	}
}

// TestOpenAPIJSONRefusesWhatJSONCannotSay: the conversion refuses YAML
// that has no JSON meaning instead of guessing one, naming where.
func TestOpenAPIJSONRefusesWhatJSONCannotSay(t *testing.T) {
	for name, c := range map[string]struct{ yaml, where string }{
		"an unquoted status code as a key": {"paths:\n  /x:\n    get:\n      responses:\n        200: {description: ok}\n", "$.paths./x.get.responses"},
		"a timestamp":                      {"info:\n  date: 2026-12-01T10:00:00Z\n", "$.info.date"},
		"not YAML":                         {"a: [\n", "parse YAML"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := openAPIJSON([]byte(c.yaml))
			if err == nil || !strings.Contains(err.Error(), c.where) {
				t.Fatalf("err %v, want one naming %q", err, c.where)
			}
		})
	}
	got, err := openAPIJSON([]byte("a: '200'\nb: [1, 2.5, true, null]\n"))
	if err != nil || string(got) != `{"a":"200","b":[1,2.5,true,null]}` {
		t.Fatalf("%s %v", got, err)
	}
}

// TestConformCatchesMismatches: the conformance check is not a rubber
// stamp — each kind of drift between an answer and the document is
// reported.
func TestConformCatchesMismatches(t *testing.T) {
	s := loadSpec(t)
	jsonHdr := func(kv ...string) http.Header {
		h := http.Header{"Content-Type": {"application/json; charset=utf-8"}}
		for i := 0; i < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	const health = `{"code":"OK","message":"","data":{"status":"up","version":"v"}}`
	tests := []struct {
		name string
		ex   exchange
		want string // "" = conforms
	}{
		{"a conforming answer", exchange{method: "GET", path: "/healthz", status: 200, header: jsonHdr(), body: []byte(health)}, ""},
		{"a field the document does not have", exchange{method: "GET", path: "/healthz", status: 200, header: jsonHdr(),
			body: []byte(`{"code":"OK","message":"","data":{"status":"up","version":"v","extra":1}}`)}, "additional properties"},
		{"an undocumented status", exchange{method: "GET", path: "/healthz", status: 418, header: jsonHdr(), body: []byte(health)}, "not documented"},
		{"another media type", exchange{method: "GET", path: "/healthz", status: 200, header: http.Header{"Content-Type": {"text/html"}}, body: []byte("<p>")}, "media type"},
		{"a code that does not belong to the status", exchange{method: "GET", path: "/api/targets", status: 401, header: jsonHdr("WWW-Authenticate", `Bearer realm="changeflow"`),
			body: []byte(`{"code":"ACCESS_DENIED","message":"Access denied","data":null}`)}, "UNAUTHENTICATED"},
		{"a required header missing", exchange{method: "POST", path: "/api/requests", status: 429, header: jsonHdr(),
			body: []byte(`{"code":"RATE_LIMITED","message":"Too many","data":null}`)}, "Retry-After"},
		{"a generic 500 with another message", exchange{method: "GET", path: "/healthz", status: 500, header: jsonHdr(),
			body: []byte(`{"code":"INTERNAL_ERROR","message":"sql: no rows","data":null}`)}, "message"},
		{"a bad date-time", exchange{method: "GET", path: "/api/requests/x", status: 200, header: jsonHdr(),
			body: []byte(`{"code":"OK","message":"","data":{"operationId":"x","subject":"a","targetKey":"t","status":"MERGED","step":{"code":1,"name":"a"},"hint":"NONE","createdAt":"2026-01-01T00:00:00Z","updatedAt":"yesterday"}}`)}, "date-time"},
		{"a binding status the document does not know", exchange{method: "GET", path: "/api/requests/x", status: 200, header: jsonHdr(),
			body: []byte(`{"code":"OK","message":"","data":{"operationId":"x","subject":"a","targetKey":"t","status":"LIMBO","step":{"code":1,"name":"a"},"hint":"NONE","createdAt":"2026-01-01T00:00:00Z","updatedAt":"2026-01-01T00:00:00Z"}}`)}, "must be one of"},
		{"an accepted request body the document forbids", exchange{method: "POST", path: "/api/requests", status: 202, header: jsonHdr(),
			reqBody: []byte(`{"targetKey":"t","reason":"r","days":"3"}`), body: []byte(`{"code":"ACCEPTED","message":"","data":{"operationId":"x"}}`)}, "days"},
		{"a method the path does not have, answered other than 405", exchange{method: "DELETE", path: "/healthz", status: 200, header: jsonHdr(), body: []byte(health)}, "not 405"},
		{"405 conforms", exchange{method: "DELETE", path: "/healthz", status: 405, header: jsonHdr("Allow", "GET, HEAD"),
			body: []byte(`{"code":"METHOD_NOT_ALLOWED","message":"No.","data":null}`)}, ""},
		{"a body where the document has none", exchange{method: "GET", path: "/api/openapi.json", status: 304, header: http.Header{}, body: []byte("{}")}, "no body"},
		{"a path the document does not describe is not this check's", exchange{method: "GET", path: "/t/x", status: 418, header: jsonHdr(), body: []byte("{}")}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			problems := strings.Join(s.check(tt.ex), "\n")
			switch {
			case tt.want == "" && problems != "":
				t.Fatalf("reported %s", problems)
			case tt.want != "" && !strings.Contains(problems, tt.want):
				t.Fatalf("want a problem naming %q, got %q", tt.want, problems)
			}
		})
	}
}

// TestOpenAPIConformanceTable makes real calls against a server with
// every dependency real (a database, the simulators, the workflow's ops
// actions): a success and an error of every operation, each with the
// status it must have. bizWorld.do validates every answer against the
// document; the table then checks it reached every documented operation
// both ways, so an operation added to the document without a call here
// fails.
func TestOpenAPIConformanceTable(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		sink := &recordingSink{out: SinkApplied}
		var feed *EventFeed
		w := newBizWorld(t, st, withOpsActions(), withBatchActions(), withSink(sink), withWithdraw(), withRevoker(), withChecks(),
			withEventFeed(&feed, func(st *store.Store) VersionReader { return st }),
			withAuditChain(st, ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32))), withReviews(), withPreferences(), withNotifications())
		ctx := t.Context()
		stoppedFixture(t, st, "oa-stopped", "alice")
		submitApproveFirst(t, st, "oa-withdraw", "alice", tRace)
		validatedFixture(t, st, "oa-in-effect", "adam")
		validatedFixture(t, st, "oa-ops-revoke", "dave")
		if _, err := st.BatchAdmit(ctx, "oa-waiting", 1); err != nil {
			t.Fatal(err)
		}
		untilClaimable(t, st, "oa-waiting")
		// A batch claimed as a round would, so the round below finds the
		// slot taken and the batch routes have one to show and settle.
		claim, err := st.BatchClaim(ctx, store.BatchClaimParams{ProjectID: 1, MaxRequests: 10})
		if err != nil || claim.Outcome != store.ClaimClaimed {
			t.Fatalf("claim %+v %v", claim, err)
		}

		reached := map[string]map[bool]bool{} // operation → 2xx? → seen
		call := func(op string, status int, r req) resp {
			t.Helper()
			got := w.do(r)
			if got.status != status {
				t.Log(w.logs.String())
				t.Fatalf("%s %s: status %d, want %d: %s", r.method, r.path, got.status, status, got.raw)
			}
			if reached[op] == nil {
				reached[op] = map[bool]bool{}
			}
			reached[op][status < 300] = true
			return got
		}
		cb := map[string]string{"X-Callback-Token": cbToken}
		submit := `{"targetKey":"` + tOpen + `","reason":"conformance","days":3}`
		key := map[string]string{"Idempotency-Key": "oa-1"}

		call("GET /healthz", 200, req{method: "GET", path: "/healthz"})
		call("GET /healthz", 405, req{method: "DELETE", path: "/healthz"})
		call("GET /readyz", 200, req{method: "GET", path: "/readyz"})
		call("GET /readyz", 405, req{method: "POST", path: "/readyz"})
		call("GET /metrics", 200, req{method: "GET", path: "/metrics"})
		call("GET /metrics", 405, req{method: "PUT", path: "/metrics"})
		call("GET /api/openapi.json", 200, req{method: "GET", path: "/api/openapi.json"})
		call("GET /api/openapi.json", 405, req{method: "POST", path: "/api/openapi.json"})
		call("GET /api/runbook", 200, req{method: "GET", path: "/api/runbook"})
		call("GET /api/runbook", 405, req{method: "POST", path: "/api/runbook"})
		call("GET /api/me", 200, req{method: "GET", path: "/api/me", user: "olivia"})
		call("GET /api/me", 401, req{method: "GET", path: "/api/me"})
		call("GET /api/app-config", 200, req{method: "GET", path: "/api/app-config"})
		call("GET /api/app-config", 405, req{method: "DELETE", path: "/api/app-config"})

		call("POST /api/requests", 202, req{method: "POST", path: "/api/requests", user: "alice", body: submit, header: key})
		call("POST /api/requests", 202, req{method: "POST", path: "/api/requests", user: "alice", body: submit, header: key})
		call("POST /api/requests", 400, req{method: "POST", path: "/api/requests", user: "alice", body: `{"targetKey":"","reason":""}`})
		call("POST /api/requests", 401, req{method: "POST", path: "/api/requests", body: submit})
		call("POST /api/requests", 403, req{method: "POST", path: "/api/requests", user: "alice", body: `{"targetKey":"` + tClosed + `","reason":"x"}`})
		call("POST /api/requests", 409, req{method: "POST", path: "/api/requests", user: "alice", body: submit})
		call("POST /api/requests", 422, req{method: "POST", path: "/api/requests", user: "alice", header: key,
			body: `{"targetKey":"` + tOpen + `","reason":"another reason"}`})
		call("GET /api/requests", 200, req{method: "GET", path: "/api/requests?limit=5", user: "alice"})
		call("GET /api/requests", 400, req{method: "GET", path: "/api/requests?limit=0", user: "alice"})
		call("GET /api/requests/{operationId}", 200, req{method: "GET", path: "/api/requests/oa-1", user: "alice"})
		call("GET /api/requests/{operationId}", 404, req{method: "GET", path: "/api/requests/oa-1", user: "bob"})
		call("POST /api/requests/{operationId}/withdraw", 200, req{method: "POST", path: "/api/requests/oa-withdraw/withdraw", user: "alice"})
		call("POST /api/requests/{operationId}/withdraw", 404, req{method: "POST", path: "/api/requests/oa-withdraw/withdraw", user: "bob"})
		call("POST /api/requests/{operationId}/withdraw", 409, req{method: "POST", path: "/api/requests/oa-in-effect/withdraw", user: "adam"})
		call("GET /api/requests/{operationId}/events", 200, req{method: "GET", path: "/api/requests/oa-1/events", user: "alice", stream: true})
		call("GET /api/requests/{operationId}/events", 404, req{method: "GET", path: "/api/requests/oa-1/events", user: "bob"})
		call("GET /api/requests/{operationId}/events", 400, req{method: "GET", path: "/api/requests/oa-1/events", user: "alice",
			header: map[string]string{"Last-Event-ID": "x"}})
		call("GET /api/targets", 200, req{method: "GET", path: "/api/targets", user: "alice"})
		call("GET /api/targets", 401, req{method: "GET", path: "/api/targets"})
		call("GET /api/targets/{key}/preview", 200, req{method: "GET", path: "/api/targets/" + tOpen + "/preview?days=2", user: "alice"})
		call("GET /api/targets/{key}/preview", 401, req{method: "GET", path: "/api/targets/" + tOpen + "/preview"})
		call("GET /api/targets/{key}/preview", 404, req{method: "GET", path: "/api/targets/nope/preview", user: "alice"})
		call("GET /api/stats", 200, req{method: "GET", path: "/api/stats", user: "alice"})
		call("GET /api/stats", 401, req{method: "GET", path: "/api/stats"})

		call("POST /callbacks/approval", 200, req{method: "POST", path: "/callbacks/approval", header: cb,
			body: `{"requestId":"oa-d1","approvalId":"ap-1","operationId":"oa-1","result":"APPROVED"}`})
		call("POST /callbacks/approval", 200, req{method: "POST", path: "/callbacks/approval", header: cb,
			body: `{"requestId":"oa-d1","approvalId":"ap-1","operationId":"oa-1","result":"APPROVED"}`})
		call("POST /callbacks/approval", 400, req{method: "POST", path: "/callbacks/approval", header: cb,
			body: `{"requestId":"oa-d2","operationId":"oa-1","result":"MAYBE"}`})
		call("POST /callbacks/approval", 401, req{method: "POST", path: "/callbacks/approval", body: `{}`})
		call("POST /callbacks/deploy", 200, req{method: "POST", path: "/callbacks/deploy", header: cb,
			body: `{"requestId":"oa-dd1","project":1,"mrIid":7,"status":"SUCCESS"}`})
		call("POST /callbacks/deploy", 400, req{method: "POST", path: "/callbacks/deploy", header: cb, body: `{"requestId":"oa-dd2"}`})
		hook := map[string]string{"X-Gitlab-Token": hookToken, "X-Gitlab-Event-UUID": "oa-ev-1"}
		call("POST /callbacks/gitlab", 200, req{method: "POST", path: "/callbacks/gitlab", header: hook, body: `{"object_kind":"pipeline"}`})
		call("POST /callbacks/gitlab", 400, req{method: "POST", path: "/callbacks/gitlab", header: hook, body: `{"object_kind":""}`})
		sink.mu.Lock()
		sink.err = fmt.Errorf("sink down")
		sink.mu.Unlock()
		call("POST /callbacks/deploy", 202, req{method: "POST", path: "/callbacks/deploy", header: cb,
			body: `{"requestId":"oa-dd3","project":1,"mrIid":8,"status":"SUCCESS"}`})

		call("GET /ops/requests/{operationId}", 200, req{method: "GET", path: "/ops/requests/oa-1", user: "olivia"})
		call("GET /ops/requests/{operationId}", 200, req{method: "GET", path: "/ops/requests/oa-stopped", user: "olivia"})
		call("GET /ops/requests/{operationId}", 403, req{method: "GET", path: "/ops/requests/oa-1", user: "alice"})
		call("GET /ops/requests/{operationId}", 404, req{method: "GET", path: "/ops/requests/nope", user: "olivia"})
		call("POST /api/requests/{operationId}/revoke", 202, req{method: "POST", path: "/api/requests/oa-in-effect/revoke", user: "adam"})
		call("POST /api/requests/{operationId}/revoke", 200, req{method: "POST", path: "/api/requests/oa-in-effect/revoke", user: "adam"})
		call("POST /api/requests/{operationId}/revoke", 404, req{method: "POST", path: "/api/requests/oa-in-effect/revoke", user: "bob"})
		call("POST /api/requests/{operationId}/revoke", 401, req{method: "POST", path: "/api/requests/oa-in-effect/revoke"})
		call("POST /ops/requests/{operationId}/revoke", 400, req{method: "POST", path: "/ops/requests/oa-ops-revoke/revoke", user: "olivia", body: `{}`})
		call("POST /ops/requests/{operationId}/revoke", 202, req{method: "POST", path: "/ops/requests/oa-ops-revoke/revoke", user: "olivia", body: `{"reason":"left"}`})
		call("POST /ops/requests/{operationId}/revoke", 200, req{method: "POST", path: "/ops/requests/oa-ops-revoke/revoke", user: "olivia", body: `{"reason":"left"}`})
		call("POST /ops/requests/{operationId}/revoke", 403, req{method: "POST", path: "/ops/requests/oa-ops-revoke/revoke", user: "alice", body: `{"reason":"left"}`})
		call("POST /ops/requests/{operationId}/revoke", 409, req{method: "POST", path: "/ops/requests/oa-stopped/revoke", user: "olivia", body: `{"reason":"left"}`})
		call("POST /ops/requests/{operationId}/close", 400, req{method: "POST", path: "/ops/requests/oa-stopped/close", user: "olivia", body: `{}`})
		call("POST /ops/requests/{operationId}/close", 403, req{method: "POST", path: "/ops/requests/oa-stopped/close", user: "alice", body: `{"reason":"x"}`})
		call("POST /ops/requests/{operationId}/close", 404, req{method: "POST", path: "/ops/requests/nope/close", user: "olivia", body: `{"reason":"x"}`})
		call("POST /ops/requests/{operationId}/close", 200, req{method: "POST", path: "/ops/requests/oa-withdraw/close", user: "olivia", body: `{"reason":"x"}`})
		call("POST /ops/requests/{operationId}/close", 409, req{method: "POST", path: "/ops/requests/oa-1/close", user: "olivia", body: `{"reason":"x"}`})
		call("POST /ops/requests/{operationId}/retrigger", 400, req{method: "POST", path: "/ops/requests/oa-stopped/retrigger", user: "olivia", body: `{"step":5}`})
		call("POST /ops/requests/{operationId}/retrigger", 202, req{method: "POST", path: "/ops/requests/oa-stopped/retrigger", user: "olivia", body: `{"step":"CREATE_FAILED"}`})
		call("POST /ops/requests/{operationId}/retrigger", 409, req{method: "POST", path: "/ops/requests/oa-stopped/retrigger", user: "olivia"})
		call("POST /ops/requests/{operationId}/replay-approval", 200, req{method: "POST", path: "/ops/requests/oa-1/replay-approval", user: "olivia"})
		call("POST /ops/requests/{operationId}/replay-approval", 404, req{method: "POST", path: "/ops/requests/nope/replay-approval", user: "olivia"})
		call("POST /ops/rounds", 200, req{method: "POST", path: "/ops/rounds", user: "olivia", body: `{"projectId":1}`})
		call("POST /ops/rounds", 400, req{method: "POST", path: "/ops/rounds", user: "olivia", body: `{"projectId":"x"}`})
		call("GET /ops/batches", 200, req{method: "GET", path: "/ops/batches?limit=10", user: "olivia"})
		call("GET /ops/batches", 400, req{method: "GET", path: "/ops/batches?cursor=nonsense", user: "olivia"})
		batch := strconv.FormatInt(claim.BatchID, 10)
		call("GET /ops/batches/{id}", 200, req{method: "GET", path: "/ops/batches/" + batch, user: "olivia"})
		call("GET /ops/batches/{id}", 404, req{method: "GET", path: "/ops/batches/999999", user: "olivia"})
		call("POST /ops/batches/{id}/settle", 200, req{method: "POST", path: "/ops/batches/" + batch + "/settle", user: "olivia"})
		call("POST /ops/batches/{id}/settle", 400, req{method: "POST", path: "/ops/batches/x/settle", user: "olivia"})
		call("POST /ops/reconcile", 200, req{method: "POST", path: "/ops/reconcile", user: "adam"})
		call("POST /ops/reconcile", 403, req{method: "POST", path: "/ops/reconcile", user: "alice"})
		call("POST /ops/expiry/scan", 200, req{method: "POST", path: "/ops/expiry/scan", user: "olivia"})
		call("POST /ops/expiry/scan", 401, req{method: "POST", path: "/ops/expiry/scan"})
		call("GET /ops/config", 200, req{method: "GET", path: "/ops/config", user: "olivia"})
		call("GET /ops/config", 401, req{method: "GET", path: "/ops/config"})
		call("GET /ops/checks", 200, req{method: "GET", path: "/ops/checks", user: "olivia"})
		call("GET /ops/checks", 401, req{method: "GET", path: "/ops/checks"})
		call("GET /ops/callbacks/deploy", 200, req{method: "GET", path: "/ops/callbacks/deploy?disposition=recorded", user: "olivia"})
		call("GET /ops/callbacks/deploy", 400, req{method: "GET", path: "/ops/callbacks/deploy?disposition=NOPE", user: "olivia"})
		call("GET /ops/requests", 200, req{method: "GET", path: "/ops/requests?limit=5", user: "olivia"})
		call("GET /ops/requests", 200, req{method: "GET", path: "/ops/requests?attention=true&subject=alice", user: "olivia"})
		call("GET /ops/requests", 400, req{method: "GET", path: "/ops/requests?status=DONE", user: "olivia"})
		call("GET /ops/security-events", 200, req{method: "GET", path: "/ops/security-events?limit=5", user: "olivia"})
		call("GET /ops/security-events", 400, req{method: "GET", path: "/ops/security-events?limit=0", user: "olivia"})
		deadID := deadLetter(t, st, "oa-dead")
		if err := st.OutboxDisableChannel(ctx, "webhook:oa", "410 Gone"); err != nil {
			t.Fatal(err)
		}
		call("GET /ops/notifications", 200, req{method: "GET", path: "/ops/notifications", user: "olivia"})
		call("GET /ops/notifications", 400, req{method: "GET", path: "/ops/notifications?limit=0", user: "olivia"})
		call("POST /ops/notifications/{eventId}/replay", 200, req{method: "POST", path: "/ops/notifications/" + deadID + "/replay", user: "olivia"})
		call("POST /ops/notifications/{eventId}/replay", 404, req{method: "POST", path: "/ops/notifications/" + deadID + "/replay", user: "olivia"})
		call("POST /ops/notifications/channels/{channel}/enable", 200, req{method: "POST", path: "/ops/notifications/channels/webhook:oa/enable", user: "olivia"})
		call("POST /ops/notifications/channels/{channel}/enable", 404, req{method: "POST", path: "/ops/notifications/channels/webhook:oa/enable", user: "olivia"})
		call("GET /ops/targets/unowned-expired", 200, req{method: "GET", path: "/ops/targets/unowned-expired", user: "olivia"})
		call("GET /ops/targets/unowned-expired", 403, req{method: "GET", path: "/ops/targets/unowned-expired", user: "alice"})
		call("GET /ops/audit/export", 200, req{method: "GET", path: exportQuery("jsonl"), user: "olivia"})
		call("GET /ops/audit/export", 200, req{method: "GET", path: exportQuery("csv"), user: "olivia"})
		call("GET /ops/audit/export", 400, req{method: "GET", path: "/ops/audit/export?from=x", user: "olivia"})
		call("GET /ops/audit/key", 200, req{method: "GET", path: "/ops/audit/key", user: "olivia"})
		call("GET /ops/audit/key", 403, req{method: "GET", path: "/ops/audit/key", user: "alice"})
		call("GET /ops/access", 200, req{method: "GET", path: "/ops/access?target=" + tOpen + "&at=2026-03-01T09:30:00Z", user: "olivia"})
		call("GET /ops/access", 200, req{method: "GET", path: "/ops/access?subject=alice&at=2026-03-01T09:30:00Z", user: "olivia"})
		call("GET /ops/access", 400, req{method: "GET", path: "/ops/access?target=" + tOpen, user: "olivia"})
		call("GET /ops/access/history", 200, req{method: "GET", path: "/ops/access/history?target=" + tOpen + "&from=2026-03-01T00:00:00Z&to=2026-04-01T00:00:00Z", user: "olivia"})
		call("GET /ops/access/history", 400, req{method: "GET", path: "/ops/access/history?target=" + tOpen + "&from=2026-04-01T00:00:00Z&to=2026-03-01T00:00:00Z", user: "olivia"})

		// Access reviews, after the revokes above (the campaign holds what
		// is in effect on the reviewed target then: bob's grant).
		validatedFixture(t, st, "oa-review", "bob")
		due := `"dueAt":"` + reviewDue() + `"`
		call("POST /ops/reviews", 400, req{method: "POST", path: "/ops/reviews", user: "olivia", body: `{"targetKey":"nope"}`})
		opened := call("POST /ops/reviews", 200, req{method: "POST", path: "/ops/reviews", user: "olivia",
			body: `{"targetKey":"` + tReplay + `",` + due + `,"defaultDecision":"revoke"}`})
		call("POST /ops/reviews", 409, req{method: "POST", path: "/ops/reviews", user: "olivia",
			body: `{"targetKey":"` + tReplay + `",` + due + `,"defaultDecision":"keep"}`})
		rid := strconv.FormatInt(int64(opened.data["id"].(float64)), 10)
		call("GET /ops/reviews", 200, req{method: "GET", path: "/ops/reviews", user: "olivia"})
		call("GET /ops/reviews", 403, req{method: "GET", path: "/ops/reviews", user: "alice"})
		call("GET /ops/reviews/{id}", 200, req{method: "GET", path: "/ops/reviews/" + rid, user: "olivia"})
		call("GET /ops/reviews/{id}", 404, req{method: "GET", path: "/ops/reviews/999999", user: "olivia"})
		mine := call("GET /api/reviews", 200, req{method: "GET", path: "/api/reviews", user: "alice"})
		call("GET /api/reviews", 401, req{method: "GET", path: "/api/reviews"})
		items := mine.data["items"].([]any)
		if len(items) != 1 {
			t.Fatalf("alice's review items %v", mine.data)
		}
		item := "/api/reviews/" + rid + "/items/" + strconv.FormatInt(int64(items[0].(map[string]any)["id"].(float64)), 10)
		call("POST /api/reviews/{reviewId}/items/{itemId}", 403, req{method: "POST", path: item, user: "bob", body: `{"decision":"keep"}`})
		call("POST /api/reviews/{reviewId}/items/{itemId}", 400, req{method: "POST", path: item, user: "alice", body: `{"decision":"maybe"}`})
		call("POST /api/reviews/{reviewId}/items/{itemId}", 200, req{method: "POST", path: item, user: "alice", body: `{"decision":"keep","comment":"ok"}`})
		call("POST /api/reviews/{reviewId}/items/{itemId}", 409, req{method: "POST", path: item, user: "alice", body: `{"decision":"revoke"}`})
		call("GET /ops/reviews/{id}", 200, req{method: "GET", path: "/ops/reviews/" + rid, user: "olivia"})

		call("GET /api/notifications/preferences", 200, req{method: "GET", path: "/api/notifications/preferences", user: "alice"})
		call("GET /api/notifications/preferences", 401, req{method: "GET", path: "/api/notifications/preferences"})
		call("PUT /api/notifications/preferences", 200, req{method: "PUT", path: "/api/notifications/preferences", user: "alice", body: `{"request.submitted":false}`})
		call("PUT /api/notifications/preferences", 400, req{method: "PUT", path: "/api/notifications/preferences", user: "alice", body: `{"access.removed":false}`})

		for op := range docOperations(t, loadSpec(t)) {
			if !reached[op][true] || !reached[op][false] {
				t.Errorf("the table has no call of %s with a success and an error (%v)", op, reached[op])
			}
		}
	})
}

// TestOpenAPIMisdirectedConforms: the Host check's 421 on a real route is
// the documented answer.
func TestOpenAPIMisdirectedConforms(t *testing.T) {
	w := newAuthzWorld(t, map[string]any{
		"identity.trustedProxies": []any{"127.0.0.1/32", "::1/128"},
		config.KeyServerPublicURL: "https://changeflow.corp.example",
	})
	rec, _, _ := w.do(t, "GET", "/healthz", caller{host: "attacker.example"}, "")
	if rec.Code != http.StatusMisdirectedRequest {
		t.Fatalf("status %d", rec.Code)
	}
}

// walk calls fn on every object in v with its JSON pointer.
func walk(v any, ptr string, fn func(ptr string, m map[string]any)) {
	switch x := v.(type) {
	case map[string]any:
		fn(ptr, x)
		for k, e := range x {
			walk(e, ptr+"/"+pointer(k), fn)
		}
	case []any:
		for i, e := range x {
			walk(e, ptr+"/"+strconv.Itoa(i), fn)
		}
	}
}

func responsesOf(doc map[string]any, path, method string) map[string]any {
	return doc["paths"].(map[string]any)[path].(map[string]any)[method].(map[string]any)["responses"].(map[string]any)
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
