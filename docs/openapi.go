// Package docs carries the documents the binary serves from this
// directory: the API description, docs/openapi.yaml, and the operators'
// runbook, docs/runbook.md (the console's Runbook page). They live next to
// the prose they belong with, so they are reviewed like the rest of docs/,
// and are embedded from here because go:embed cannot reach outside a
// package's directory.
package docs

import (
	"bytes"
	_ "embed"
)

//go:embed openapi.yaml
var openAPIYAML []byte

//go:embed runbook.md
var runbookMD []byte

// OpenAPIYAML returns a copy of docs/openapi.yaml as built into the binary.
func OpenAPIYAML() []byte { return bytes.Clone(openAPIYAML) }

// Runbook returns a copy of docs/runbook.md as built into the binary.
func Runbook() []byte { return bytes.Clone(runbookMD) }
