package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"changeflow/internal/identity"
)

// OperatorParam is the reserved parameter that names who called an ops
// endpoint. Only the server sets it (docs/api.md, "Operations endpoints").
const OperatorParam = "__authenticatedOperator"

// opsParams builds an ops call's parameter map. Order matters:
// the client's parameters are copied first and the login identity
// is written over the reserved name afterwards, so a client that sends
// its own __authenticatedOperator cannot forge the operator. Client keys
// that fold to a reserved name, or into the server's "__" namespace
// (reservedParam: NFKC, invisible characters removed, case, Cyrillic and
// Greek look-alikes), are dropped, so no look-alike can sit next to the
// real one in the audit trail.
func opsParams(client map[string]any, operator identity.Identity) map[string]any {
	out := make(map[string]any, len(client)+1)
	for k, v := range client {
		if reservedParam(k) {
			continue
		}
		out[k] = v
	}
	out[OperatorParam] = operator.Account
	return out
}

// AuditEntry is one audit record as the store keeps it. Params is already
// masked and truncated (auditParams); nothing else may reach storage. Its
// fields are those of store.AuditInsertParams, in order, so the
// composition root adapts the store with a plain conversion
// (store.AuditInsertParams(e)) and httpapi does not import the store.
type AuditEntry struct {
	// Key dedupes the record: a retried call is recorded once.
	Key string
	// Actor is the operator's canonical account.
	Actor string
	// Action is the route name (config.RouteOps*).
	Action string
	// Resource is what was acted on: an operationId, a batch id, "".
	Resource string
	// Params is the masked, truncated parameters as a JSON object.
	Params string
	// Outcome is the result, e.g. "OK", "NOT_FOUND".
	Outcome string
}

// Auditor stores audit records; a record with a Key already stored is
// not stored again.
type Auditor interface {
	Audit(ctx context.Context, e AuditEntry) error
}

// Limits of what an audit record keeps of the parameters.
const (
	auditValueMax = 256 // runes per value, after masking
	auditMask     = "****"
	// auditParamsMax bounds the stored JSON object in bytes. Without it
	// 8,000 query parameters made a 247 KB row; an operator's real call
	// has a handful. Parameters past it are left out, and auditCutParam
	// says how many: a record that admits it is incomplete, rather than a
	// row nobody can read or a refused call.
	auditParamsMax = 8 << 10
	// auditCutParam is the server's marker of a cut record, in the
	// reserved namespace so a client cannot forge or hide it.
	auditCutParam = "__truncated"
)

// sensitiveKeyParts mark a parameter whose value is a credential: any key
// containing one of them (case-insensitive) is masked.
var sensitiveKeyParts = []string{"token", "password", "passwd", "secret", "authorization", "cookie", "apikey", "api_key", "credential", "private"}

// auditParams returns params as the audit record stores them: values of
// sensitive keys replaced by "****", every other value rendered as text
// (non-strings as compact JSON, sensitive keys inside masked too) and
// truncated to auditValueMax runes, and the whole encoded as a JSON object
// with sorted keys. Keys are truncated too: a key is client-controlled
// text like any value. The object stays within auditParamsMax bytes: the
// server's own parameters (OperatorParam) always, then the others in key
// order while they fit; when some did not, auditCutParam names how many
// were left out.
func auditParams(params map[string]any) string {
	type kv struct{ k, v string }
	var first, rest []kv
	for _, k := range slices.Sorted(maps.Keys(params)) {
		key := truncateRunes(k, auditValueMax)
		val := auditMask
		if !sensitiveKey(k) {
			val = truncateRunes(auditValue(params[k]), auditValueMax)
		}
		if k == OperatorParam {
			first = append(first, kv{key, val})
		} else {
			rest = append(rest, kv{key, val})
		}
	}
	out := make(map[string]string, len(params))
	// size is the encoded object's length so far: braces, and per member
	// its quoted key and value, a colon and a comma.
	size := 2
	member := func(p kv) int {
		kb, _ := json.Marshal(p.k)
		vb, _ := json.Marshal(p.v)
		return len(kb) + len(vb) + 2
	}
	// Room for the marker, so adding it never breaks the bound.
	reserve := member(kv{auditCutParam, fmt.Sprintf("%d of %d parameters left out", len(params), len(params))})
	for _, p := range first {
		out[p.k] = p.v
		size += member(p)
	}
	cut := 0
	for _, p := range rest {
		if n := member(p); size+n+reserve <= auditParamsMax {
			out[p.k] = p.v
			size += n
			continue
		}
		cut++
	}
	if cut > 0 {
		out[auditCutParam] = fmt.Sprintf("%d of %d parameters left out", cut, len(params))
	}
	b, err := json.Marshal(out)
	if err != nil {
		// A map of strings always encodes; keep the record anyway.
		return `{}`
	}
	return string(b)
}

func sensitiveKey(k string) bool {
	lk := strings.ToLower(k)
	for _, p := range sensitiveKeyParts {
		if strings.Contains(lk, p) {
			return true
		}
	}
	return false
}

func auditValue(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case nil:
		return ""
	}
	b, err := json.Marshal(maskNested(v))
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(b)
}

// maskNested masks sensitive keys inside objects and lists too, so a
// credential nested in a JSON body is not stored in the rendered value.
func maskNested(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			if sensitiveKey(k) {
				out[k] = auditMask
			} else {
				out[k] = maskNested(x)
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = maskNested(x)
		}
		return out
	}
	return v
}

// truncateRunes cuts s to at most n runes, marking the cut with "…" and
// never splitting a UTF-8 sequence (invalid bytes become U+FFFD).
func truncateRunes(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// audit records one ops call. A failure to record is logged, not
// returned: the call has already happened, and refusing to answer it
// would make the client retry an action that took effect.
func (s *Server) audit(ctx context.Context, operator identity.Identity, action, resource, key string, params map[string]any, outcome string) {
	e := AuditEntry{Key: key, Actor: operator.Account, Action: action, Resource: resource, Params: auditParams(params), Outcome: outcome}
	if s.deps.Authz.Auditor == nil {
		s.deps.Logger.Warn("audit: no auditor configured; record not stored", "action", action, "actor", e.Actor, "resource", resource)
		return
	}
	if err := s.deps.Authz.Auditor.Audit(ctx, e); err != nil {
		s.deps.Logger.Error("audit: record not stored", "action", action, "actor", e.Actor, "resource", resource, "err", err)
	}
}
