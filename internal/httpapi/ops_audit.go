package httpapi

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/google/uuid"

	"changeflow/internal/auditchain"
	"changeflow/internal/auditlog"
	"changeflow/internal/domain"
	"changeflow/internal/identity"
)

// AuditChain backs GET /ops/audit/export and GET /ops/audit/key
// (*auditlog.Chain).
type AuditChain interface {
	Export(ctx context.Context, w io.Writer, p auditlog.ExportParams) error
	SigningKey() ed25519.PrivateKey
}

// auditExportWriteWindow is how long each page of an export may take to
// write: the deadline moves on after every page, so server.writeTimeout
// bounds a stalled client, not the length of a large export.
const auditExportWriteWindow = time.Minute

// noSigningKeyMessage answers an export while audit.signingKey is unset.
const noSigningKeyMessage = "The audit export is not available: audit.signingKey is not set, so an export could not be signed (docs/configuration.md)."

// auditExportQuery is GET /ops/audit/export's query, checked.
type auditExportQuery struct {
	from, to time.Time
	format   string
}

// parseAuditExportQuery checks from and to (RFC 3339, from before to) and
// format (jsonl, the default, or csv), naming every bad one.
func parseAuditExportQuery(r *http.Request) (auditExportQuery, error) {
	q := r.URL.Query()
	f := &fieldErrors{}
	var out auditExportQuery
	for _, p := range []struct {
		name string
		dst  *time.Time
	}{{"from", &out.from}, {"to", &out.to}} {
		v := q.Get(p.name)
		if v == "" {
			f.add(p.name, "is required (an RFC 3339 time, e.g. 2026-01-01T00:00:00Z)")
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			f.add(p.name, "must be an RFC 3339 time with a zone, e.g. 2026-01-01T00:00:00Z")
			continue
		}
		*p.dst = t.UTC()
	}
	if !f.has("from") && !f.has("to") && !out.to.After(out.from) {
		f.add("to", "must be after from")
	}
	switch out.format = q.Get("format"); out.format {
	case "":
		out.format = auditchain.FormatJSONL
	case auditchain.FormatJSONL, auditchain.FormatCSV:
	default:
		f.add("format", "must be jsonl or csv")
	}
	return out, f.err()
}

// countingWriter knows whether anything reached the client yet.
type countingWriter struct {
	w http.ResponseWriter
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.n == 0 && len(p) > 0 {
		c.w.WriteHeader(http.StatusOK)
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// handleOpsAuditExport is GET /ops/audit/export?from=&to=&format=: the
// audit chain's records in [from, to) as JSONL or CSV, streamed, ending
// with the signed manifest (docs/audit.md). Refusals before the first
// byte are the usual envelopes; a failure after it cuts the connection,
// so the client sees an incomplete transfer and verify reports the
// missing manifest, never a complete-looking export.
func (s *Server) handleOpsAuditExport() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, _ := identity.FromContext(r.Context())
		q, err := parseAuditExportQuery(r)
		if err == nil {
			err = s.auditExport(w, r, q)
		}
		outcome := domain.CodeOK
		if err != nil {
			outcome = domain.ErrorCode(err)
		}
		params := opsParams(map[string]any{"from": r.URL.Query().Get("from"), "to": r.URL.Query().Get("to"), "format": q.format}, res.Identity)
		s.audit(context.WithoutCancel(r.Context()), res.Identity, "ops-audit-export", "audit-chain", "ops-"+uuid.NewString(), params, string(outcome))
		if err != nil {
			var started *exportStartedError
			if errors.As(err, &started) {
				s.deps.Logger.Error("audit export cut short after it started", "err", started.err)
				panic(http.ErrAbortHandler)
			}
			writeError(w, r, s.deps.Logger, err)
		}
	})
}

// exportStartedError is a failure after the export's first byte.
type exportStartedError struct{ err error }

func (e *exportStartedError) Error() string { return e.err.Error() }

func (s *Server) auditExport(w http.ResponseWriter, r *http.Request, q auditExportQuery) error {
	chain := s.deps.Business.Audit
	if chain == nil {
		return domain.Internal("ops: no audit chain wired", nil)
	}
	if chain.SigningKey() == nil {
		return domain.E(domain.CodeRetryLater, noSigningKeyMessage)
	}
	ctype := "application/x-ndjson"
	if q.format == auditchain.FormatCSV {
		ctype = "text/csv; charset=utf-8"
	}
	h := w.Header()
	h.Set("Content-Type", ctype)
	h.Set("Content-Disposition", `attachment; filename="changeflow-audit-`+q.from.Format("20060102T150405Z")+"-"+q.to.Format("20060102T150405Z")+"."+q.format+`"`)
	h.Set("Cache-Control", "no-store")
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Now().Add(auditExportWriteWindow))
	cw := &countingWriter{w: w}
	err := chain.Export(r.Context(), cw, auditlog.ExportParams{From: q.from, To: q.to, Format: q.format, Page: func() error {
		if err := rc.Flush(); err != nil {
			return err
		}
		// A writer without deadlines (a test recorder) is fine.
		_ = rc.SetWriteDeadline(time.Now().Add(auditExportWriteWindow))
		return nil
	}})
	switch {
	case err == nil:
		return nil
	case cw.n > 0:
		return &exportStartedError{err}
	}
	// Nothing was sent: the refusal is an ordinary envelope.
	h.Del("Content-Type")
	h.Del("Content-Disposition")
	if errors.Is(err, auditlog.ErrNoSigningKey) {
		return domain.E(domain.CodeRetryLater, noSigningKeyMessage)
	}
	return domain.Internal("audit export", err)
}

// auditKeyView is GET /ops/audit/key's data.
type auditKeyView struct {
	Algorithm string `json:"algorithm"`
	KeyID     string `json:"keyId"`
	// PublicKey is the standard base64 of the 32 raw bytes; PEM the same
	// key as a PEM PUBLIC KEY block. Either is what `changeflow audit
	// verify --key` takes.
	PublicKey string `json:"publicKey"`
	PEM       string `json:"pem"`
}

// handleOpsAuditKey is GET /ops/audit/key: the public half of
// audit.signingKey, to verify exports with.
func (s *Server) handleOpsAuditKey() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chain := s.deps.Business.Audit
		if chain == nil {
			writeError(w, r, s.deps.Logger, domain.Internal("ops: no audit chain wired", nil))
			return
		}
		key := chain.SigningKey()
		if key == nil {
			writeError(w, r, s.deps.Logger, domain.E(domain.CodeRetryLater, noSigningKeyMessage))
			return
		}
		pub, _ := key.Public().(ed25519.PublicKey)
		pemText, err := auditchain.PublicKeyPEM(pub)
		if err != nil {
			writeError(w, r, s.deps.Logger, domain.Internal("audit key", err))
			return
		}
		respond(w, s.deps.Logger, domain.CodeOK, auditKeyView{Algorithm: "Ed25519", KeyID: auditchain.KeyID(pub),
			PublicKey: base64.StdEncoding.EncodeToString(pub), PEM: pemText})
	})
}
