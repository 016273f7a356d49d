package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
)

// runbookDoc is docs/runbook.md as served, with its ETag, fixed when the
// server is built.
type runbookDoc struct {
	md   []byte
	etag string
}

func newRunbookDoc(md []byte) runbookDoc {
	sum := sha256.Sum256(md)
	return runbookDoc{md: md, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
}

// handleRunbook is GET /api/runbook (docs/api.md): the operators' runbook,
// docs/runbook.md as built into this binary, as Markdown. The console's
// Runbook page renders it, so an operator reads the runbook of the
// version they run without the repository at hand. No login, like the
// API description: it is documentation, with nothing of the deployment in
// it.
func (s *Server) handleRunbook() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeDocument(w, r, s.runbook.etag, "text/markdown; charset=utf-8", s.runbook.md)
	})
}
