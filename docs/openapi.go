// Package docs carries the one document the binary serves from this
// directory: the API description, docs/openapi.yaml. It lives next to the
// prose it belongs with, so it is reviewed like the rest of docs/, and is
// embedded from here because go:embed cannot reach outside a package's
// directory.
package docs

import (
	"bytes"
	_ "embed"
)

//go:embed openapi.yaml
var openAPIYAML []byte

// OpenAPIYAML returns a copy of docs/openapi.yaml as built into the binary.
func OpenAPIYAML() []byte { return bytes.Clone(openAPIYAML) }
