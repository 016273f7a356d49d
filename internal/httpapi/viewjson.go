package httpapi

import (
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"changeflow/internal/domain"
)

// The status read's answer is encoded by hand (appendJSON below) rather
// than by encoding/json, because it is the one answer every person's
// browser repeats: encoding/json walks the view by reflection, boxes the
// envelope and the view, and allocates a buffer per time.Time
// (MarshalJSON), about a tenth of the read's allocations
// (docs/benchmarks.md, "Status read"). The bytes are encoding/json's to
// the last one — field order, omitempty, HTML-safe string escaping,
// RFC 3339 times — which TestRequestViewJSONIsEncodingJSONs checks for a
// view with every field set (found by reflection, so a field added to the
// view and not here fails it), for every field's omission, and for
// arbitrary strings (FuzzAppendJSONString). The trade-off is that a new
// field of requestView must be added here too; the test says so.

// viewBuffers holds the buffers answers are encoded into, so an answer
// costs no allocation once the pool is warm.
var viewBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// maxPooledViewBuffer bounds what goes back to the pool: a rare huge
// answer (a long reason, a long MR URL) must not stay held by it.
const maxPooledViewBuffer = 16 << 10

// respondView writes the success envelope of v, as respond(w, logger,
// domain.CodeOK, v) does, byte for byte. A view encoding/json could not
// encode either (a time outside years 0–9999) goes through respond, which
// answers it as it always did.
func respondView(w http.ResponseWriter, logger *slog.Logger, v *requestView) {
	bp := viewBuffers.Get().(*[]byte)
	b := append((*bp)[:0], `{"code":`...)
	b = appendJSONString(b, string(domain.CodeOK))
	b = append(b, `,"message":"","data":`...)
	b, err := v.appendJSON(b)
	if err != nil {
		respond(w, logger, domain.CodeOK, v)
	} else {
		b = append(b, "}\n"...)
		h := w.Header()
		h["Content-Type"] = jsonContentTypeValue
		h["X-Content-Type-Options"] = nosniffValue
		w.WriteHeader(StatusOf(domain.CodeOK))
		if _, err := w.Write(b); err != nil {
			logger.Warn("write response", "err", err)
		}
	}
	if cap(b) <= maxPooledViewBuffer {
		*bp = b
		viewBuffers.Put(bp)
	}
}

// appendJSON appends v as encoding/json encodes it (its struct tags, in
// field order). Each part below writes a run of fields in that order.
func (v *requestView) appendJSON(b []byte) ([]byte, error) {
	var err error
	b = v.appendAsked(b)
	if b, err = v.appendState(b); err != nil {
		return b, err
	}
	if b, err = v.appendTimes(b); err != nil {
		return b, err
	}
	if b, err = v.appendLinks(b); err != nil {
		return b, err
	}
	b = appendProgress(b, v.Progress)
	return append(b, '}'), nil
}

// appendAsked opens the object and writes who asked for what: operationId
// to approverComment.
func (v *requestView) appendAsked(b []byte) []byte {
	b = append(b, `{"operationId":`...)
	b = appendJSONString(b, v.OperationID)
	b = append(b, `,"subject":`...)
	b = appendJSONString(b, v.Subject)
	b = append(b, `,"targetKey":`...)
	b = appendJSONString(b, v.TargetKey)
	b = appendOptString(b, `,"targetTitle":`, v.TargetTitle)
	b = append(b, `,"reason":`...)
	b = appendJSONString(b, v.Reason)
	b = append(b, `,"days":`...)
	b = strconv.AppendInt(b, int64(v.Days), 10)
	return appendOptString(b, `,"approverComment":`, v.ApproverComment)
}

// appendState writes where the request is: status to batchId.
func (v *requestView) appendState(b []byte) ([]byte, error) {
	var err error
	b = append(b, `,"status":`...)
	b = appendJSONString(b, string(v.Status))
	b = append(b, `,"step":{"code":`...)
	b = strconv.AppendInt(b, int64(v.Step.Code), 10)
	b = append(b, `,"name":`...)
	b = appendJSONString(b, v.Step.Name)
	b = append(b, `},"hint":`...)
	b = appendJSONString(b, string(v.Hint))
	if v.Blocker != nil {
		b = append(b, `,"blocker":{"kind":`...)
		b = appendJSONString(b, v.Blocker.Kind)
		b = append(b, `,"detail":`...)
		b = appendJSONString(b, v.Blocker.Detail)
		b = append(b, `,"since":`...)
		if b, err = appendJSONTime(b, v.Blocker.Since); err != nil {
			return b, err
		}
		b = append(b, '}')
	}
	if v.MR != nil {
		b = append(b, `,"mr":{"iid":`...)
		b = strconv.AppendInt(b, v.MR.IID, 10)
		b = append(b, `,"url":`...)
		b = appendJSONString(b, v.MR.URL)
		b = append(b, '}')
	}
	if v.BatchID != 0 {
		b = append(b, `,"batchId":`...)
		b = strconv.AppendInt(b, v.BatchID, 10)
	}
	return b, nil
}

// appendTimes writes when: expiresAt to updatedAt.
func (v *requestView) appendTimes(b []byte) ([]byte, error) {
	var err error
	if b, err = appendOptTime(b, `,"expiresAt":`, v.ExpiresAt); err != nil {
		return b, err
	}
	if v.ExpiresFromApproval {
		b = append(b, `,"expiresFromApproval":true`...)
	}
	if b, err = appendOptTime(b, `,"renewFrom":`, v.RenewFrom); err != nil {
		return b, err
	}
	b = append(b, `,"createdAt":`...)
	if b, err = appendJSONTime(b, v.CreatedAt); err != nil {
		return b, err
	}
	b = append(b, `,"updatedAt":`...)
	return appendJSONTime(b, v.UpdatedAt)
}

// appendLinks writes the kind and the requests this one is linked to:
// kind to renews.
func (v *requestView) appendLinks(b []byte) ([]byte, error) {
	var err error
	b = append(b, `,"kind":`...)
	b = appendJSONString(b, string(v.Kind))
	b = appendOptString(b, `,"grantOperationId":`, v.GrantOperationID)
	b = appendOptString(b, `,"revokeReason":`, string(v.RevokeReason))
	b = appendOptString(b, `,"revocationId":`, v.RevocationID)
	if v.Renewal != nil {
		b = append(b, `,"renewal":{"operationId":`...)
		b = appendJSONString(b, v.Renewal.OperationID)
		b = append(b, `,"status":`...)
		b = appendJSONString(b, string(v.Renewal.Status))
		if b, err = appendOptTime(b, `,"expiresAt":`, v.Renewal.ExpiresAt); err != nil {
			return b, err
		}
		b = append(b, '}')
	}
	return appendOptString(b, `,"renews":`, v.Renews), nil
}

// appendProgress writes the step bar, null when there is none (as
// encoding/json writes a nil slice).
func appendProgress(b []byte, progress []domain.ProgressStep) []byte {
	b = append(b, `,"progress":`...)
	if progress == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, p := range progress {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"key":`...)
		b = appendJSONString(b, string(p.Key))
		b = append(b, `,"state":`...)
		b = appendJSONString(b, string(p.State))
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendOptString writes an omitempty string field: key (with its comma
// and colon) and s, nothing when s is empty.
func appendOptString(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	b = append(b, key...)
	return appendJSONString(b, s)
}

// appendOptTime writes an omitempty time field: key and *t, nothing when
// t is nil.
func appendOptTime(b []byte, key string, t *time.Time) ([]byte, error) {
	if t == nil {
		return b, nil
	}
	b = append(b, key...)
	return appendJSONTime(b, *t)
}

// errJSONTime is time.Time.MarshalJSON's refusal, for which encoding/json
// fails the whole answer.
var errJSONTime = errors.New("a time outside what RFC 3339 can write")

// appendJSONTime appends t as time.Time.MarshalJSON writes it: RFC 3339
// with nanoseconds, quoted; a year outside 0–9999 or a zone offset of a
// day or more is refused, as it refuses them.
func appendJSONTime(b []byte, t time.Time) ([]byte, error) {
	if y := t.Year(); y < 0 || y > 9999 {
		return b, errJSONTime
	}
	if _, off := t.Zone(); off <= -24*3600 || off >= 24*3600 {
		return b, errJSONTime
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), nil
}

// appendJSONString appends s quoted as encoding/json writes a string with
// HTML escaping on (its default, and respond's): '"' and '\\' escaped,
// \b \f \n \r \t by name, other control characters and < > & as \u00XX,
// U+2028 and U+2029 as \u2028 and \u2029, invalid UTF-8 as \ufffd.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
