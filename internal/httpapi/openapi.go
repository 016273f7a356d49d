package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"

	"changeflow/docs"
	"changeflow/internal/domain"
)

// openAPIDoc is the API description as served: docs/openapi.yaml converted
// to JSON once, when the server is built, with its ETag.
//
// Converted at start-up rather than kept pre-converted in the repository:
// the YAML stays the only copy a reviewer reads and edits, with no
// generated twin to fall out of step, for the price of one YAML decode
// per process (embeddedOpenAPI), with the YAML library the binding files and the
// identity directory already use (no new dependency). A document that does not convert is
// a broken build; the tests convert the embedded one, so it cannot ship.
type openAPIDoc struct {
	json []byte
	etag string
	err  error
}

// embeddedOpenAPI is the embedded docs/openapi.yaml as served, converted
// at the first server built in the process and shared by every later one:
// the document cannot change after the build, a server only reads it, and
// the tests build hundreds of servers (converting was a seventh of their
// CPU).
var embeddedOpenAPI = sync.OnceValue(func() openAPIDoc { return newOpenAPIDoc(docs.OpenAPIYAML()) })

func newOpenAPIDoc(yamlDoc []byte) openAPIDoc {
	b, err := openAPIJSON(yamlDoc)
	if err != nil {
		return openAPIDoc{err: err}
	}
	sum := sha256.Sum256(b)
	return openAPIDoc{json: b, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
}

// openAPIJSON converts a YAML document to JSON. Only what JSON can say
// passes: mappings with string keys, sequences, strings, numbers, booleans
// and null. Anything else YAML allows (a mapping key 200 written without
// quotes, a timestamp, a binary) is refused with its path rather than
// converted by a guess.
func openAPIJSON(yamlDoc []byte) ([]byte, error) {
	var v any
	if err := yaml.Unmarshal(yamlDoc, &v); err != nil {
		return nil, fmt.Errorf("openapi: parse YAML: %w", err)
	}
	if err := jsonOnly(v, "$"); err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("openapi: encode JSON: %w", err)
	}
	return b, nil
}

// jsonOnly checks that v, decoded from YAML, holds only JSON values.
func jsonOnly(v any, path string) error {
	switch x := v.(type) {
	case nil, string, bool, int, int64, uint64, float64:
		return nil
	case map[string]any:
		for k, e := range x {
			if err := jsonOnly(e, path+"."+k); err != nil {
				return err
			}
		}
		return nil
	case []any:
		for i, e := range x {
			if err := jsonOnly(e, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	case map[any]any:
		return fmt.Errorf("%s: a mapping key is not a string (quote it)", path)
	}
	return fmt.Errorf("%s: a %T is not a JSON value (quote it)", path, v)
}

// handleOpenAPI is GET /api/openapi.json: the API description. No login:
// it describes what anyone who reaches the service can call anyway, and
// it is the same for every caller. The ETag lets clients and proxies
// revalidate instead of downloading it again.
func (s *Server) handleOpenAPI() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		doc := s.openapi
		if doc.err != nil {
			writeError(w, r, s.deps.Logger, domain.Internal("openapi document", doc.err))
			return
		}
		writeDocument(w, r, doc.etag, "application/json", doc.json)
	})
}

// writeDocument answers with one of the documents built into the binary
// (the API description, the runbook): revalidated by its ETag on every
// use (no-cache), so a client never reads an older version's document,
// and 304 when the client's copy is this one.
func writeDocument(w http.ResponseWriter, r *http.Request, etag, contentType string, body []byte) {
	w.Header().Set("ETag", etag)
	w.Header().Set("Cache-Control", "no-cache")
	if etagMatches(r.Header.Get("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(body)
}

// etagMatches reports whether an If-None-Match value names etag (or is *).
func etagMatches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == etag || t == "*" {
			return true
		}
	}
	return false
}
