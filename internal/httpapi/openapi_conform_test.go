package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"changeflow/docs"
)

// The API description's conformance machinery: docs/openapi.yaml loaded
// once per test binary, and a check that holds one real exchange (request
// and answer) to it. bizWorld.do and do (server_test.go) run every answer
// the handler tests produce through conform, so each of those tests is
// also a test of the description; openapi_test.go adds the route
// coverage, the document's own validity and a table of calls that reaches
// every operation.

// specURL is the document's base URI inside the schema compiler: any
// absolute URI does, and JSON pointers into it name the schemas.
const specURL = "file:///openapi.json"

// apiSpec is the loaded document with a compiler over it.
type apiSpec struct {
	doc map[string]any
	mu  sync.Mutex
	c   *jsonschema.Compiler
	// compiled caches schemas by JSON pointer.
	compiled map[string]*jsonschema.Schema
}

var (
	specOnce sync.Once
	specVal  *apiSpec
	specErr  error
)

// loadSpec converts the embedded document exactly as the server does and
// prepares a compiler over it (JSON Schema 2020-12, as OpenAPI 3.1
// specifies, with formats asserted so a date-time is checked too).
func loadSpec(t testing.TB) *apiSpec {
	t.Helper()
	specOnce.Do(func() {
		raw, err := openAPIJSON(docs.OpenAPIYAML())
		if err != nil {
			specErr = err
			return
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			specErr = err
			return
		}
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		c.AssertFormat()
		if err := c.AddResource(specURL, doc); err != nil {
			specErr = err
			return
		}
		specVal = &apiSpec{doc: doc.(map[string]any), c: c, compiled: map[string]*jsonschema.Schema{}}
	})
	if specErr != nil {
		t.Fatalf("docs/openapi.yaml: %v", specErr)
	}
	return specVal
}

// pointer escapes one JSON pointer token.
func pointer(tok string) string {
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
}

// schema compiles (once) the schema at a JSON pointer into the document.
func (s *apiSpec) schema(ptr string) (*jsonschema.Schema, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sch, ok := s.compiled[ptr]; ok {
		return sch, nil
	}
	sch, err := s.c.Compile(specURL + "#" + ptr)
	if err != nil {
		return nil, err
	}
	s.compiled[ptr] = sch
	return sch, nil
}

// at returns the value at a JSON pointer into the document.
func (s *apiSpec) at(ptr string) (any, bool) {
	var v any = s.doc
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[tok]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// deref follows a local $ref (one level at a time) and returns the object
// and its pointer.
func (s *apiSpec) deref(ptr string) (map[string]any, string, error) {
	for range 10 {
		v, ok := s.at(ptr)
		if !ok {
			return nil, "", fmt.Errorf("%s: not in the document", ptr)
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, "", fmt.Errorf("%s: not an object", ptr)
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return m, ptr, nil
		}
		if !strings.HasPrefix(ref, "#/") {
			return nil, "", fmt.Errorf("%s: $ref %q is not local", ptr, ref)
		}
		ptr = strings.TrimPrefix(ref, "#")
	}
	return nil, "", fmt.Errorf("%s: $ref chain too long", ptr)
}

// matchPath finds the document's path template for a request path: the
// template whose segments all match, literal segments before parameters
// (as the mux prefers the more specific pattern).
func (s *apiSpec) matchPath(p string) (string, bool) {
	paths, _ := s.doc["paths"].(map[string]any)
	segs := strings.Split(p, "/")
	best, bestLiterals := "", -1
	for tmpl := range paths {
		ts := strings.Split(tmpl, "/")
		if len(ts) != len(segs) {
			continue
		}
		literals, ok := 0, true
		for i, t := range ts {
			switch {
			case strings.HasPrefix(t, "{") && strings.HasSuffix(t, "}"):
				ok = ok && segs[i] != ""
			case t == segs[i]:
				literals++
			default:
				ok = false
			}
		}
		if ok && literals > bestLiterals {
			best, bestLiterals = tmpl, literals
		}
	}
	return best, bestLiterals >= 0
}

// exchange is one request and its answer.
type exchange struct {
	method, path string
	reqBody      []byte
	status       int
	header       http.Header
	body         []byte
}

// conform checks one exchange against the document and reports every
// mismatch as a test error (safe from several goroutines). Exchanges the
// document does not describe — a route a test registered itself, the web
// app's pages — are skipped: that every served route is described is
// TestOpenAPIDescribesEveryRoute's job.
func conform(t testing.TB, ex exchange) {
	t.Helper()
	for _, p := range loadSpec(t).check(ex) {
		t.Errorf("docs/openapi.yaml vs %s %s → %d: %s\nbody: %.600s", ex.method, ex.path, ex.status, p, ex.body)
	}
}

// check returns what in ex the document does not allow.
func (s *apiSpec) check(ex exchange) []string {
	if ex.method == http.MethodHead || ex.method == http.MethodOptions {
		return nil
	}
	tmpl, ok := s.matchPath(ex.path)
	if !ok {
		return nil
	}
	opPtr := "/paths/" + pointer(tmpl) + "/" + strings.ToLower(ex.method)
	if _, ok := s.at(opPtr); !ok {
		if ex.status != http.StatusMethodNotAllowed {
			return []string{fmt.Sprintf("%s has no %s operation, and the answer is not 405", tmpl, ex.method)}
		}
		return s.checkResponse("/components/responses/MethodNotAllowed", ex)
	}
	key := ex.method + " " + tmpl
	var problems []string
	respPtr := opPtr + "/responses/" + strconv.Itoa(ex.status)
	if _, ok := s.at(respPtr); !ok {
		return []string{fmt.Sprintf("status %d is not documented for %s", ex.status, key)}
	}
	problems = append(problems, s.checkResponse(respPtr, ex)...)
	if ex.status >= 200 && ex.status < 300 && len(bytes.TrimSpace(ex.reqBody)) > 0 {
		problems = append(problems, s.checkRequestBody(opPtr, ex)...)
	}
	return problems
}

// checkResponse checks headers, media type and body against the response
// object at ptr.
func (s *apiSpec) checkResponse(ptr string, ex exchange) []string {
	resp, ptr, err := s.deref(ptr)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	headers, _ := resp["headers"].(map[string]any)
	for name := range headers {
		h, _, err := s.deref(ptr + "/headers/" + pointer(name))
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		if req, _ := h["required"].(bool); req && ex.header.Get(name) == "" {
			problems = append(problems, "required header "+name+" is missing")
		}
	}
	content, _ := resp["content"].(map[string]any)
	if len(content) == 0 {
		if len(bytes.TrimSpace(ex.body)) > 0 {
			problems = append(problems, "the document says no body, the answer has one")
		}
		return problems
	}
	mt, _, err := mime.ParseMediaType(ex.header.Get("Content-Type"))
	if err != nil {
		return append(problems, fmt.Sprintf("Content-Type %q: %v", ex.header.Get("Content-Type"), err))
	}
	if _, ok := content[mt]; !ok {
		return append(problems, fmt.Sprintf("media type %s is not documented (%v)", mt, keys(content)))
	}
	if mt != "application/json" {
		return problems
	}
	return append(problems, s.validate(ptr+"/content/"+pointer(mt)+"/schema", ex.body)...)
}

// checkRequestBody checks an accepted request's JSON body against the
// operation's request schema: what the server accepted, the document must
// allow.
func (s *apiSpec) checkRequestBody(opPtr string, ex exchange) []string {
	rb, ptr, err := s.deref(opPtr)
	if err != nil {
		return []string{err.Error()}
	}
	if _, ok := rb["requestBody"]; !ok {
		return nil
	}
	if _, ptr, err = s.deref(ptr + "/requestBody"); err != nil {
		return []string{err.Error()}
	}
	return s.validate(ptr+"/content/application~1json/schema", ex.reqBody)
}

// validate checks a JSON text against the schema at ptr.
func (s *apiSpec) validate(ptr string, body []byte) []string {
	sch, err := s.schema(ptr)
	if err != nil {
		return []string{fmt.Sprintf("schema %s does not compile: %v", ptr, err)}
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return []string{fmt.Sprintf("body is not JSON: %v", err)}
	}
	if err := sch.Validate(v); err != nil {
		return []string{fmt.Sprintf("body does not match %s: %v", ptr, err)}
	}
	return nil
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// conformRecorded runs conform on a request served into a recorder.
func conformRecorded(t testing.TB, r *http.Request, reqBody []byte, status int, header http.Header, body []byte) {
	t.Helper()
	p := r.URL.Path
	if u, err := url.PathUnescape(r.URL.EscapedPath()); err == nil {
		p = u
	}
	conform(t, exchange{method: r.Method, path: p, reqBody: reqBody, status: status, header: header, body: body})
}

// decodeJSONValue is json.Unmarshal into any, for assertions on the
// served document.
func decodeJSONValue(t testing.TB, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}
