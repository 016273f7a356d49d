package httpapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"changeflow/internal/config"
	"changeflow/internal/domain"
)

// Submission limits.
const (
	// maxBodyBytes bounds every JSON body this API decodes.
	maxBodyBytes = 64 << 10
	// maxReasonRunes is the longest reason a request may give.
	maxReasonRunes = 500
	// maxOperationIDRunes is the operation table's key length (and below
	// the idempotency key's 128).
	maxOperationIDRunes = 64
	// headerIdempotencyKey is the header alias of operationId.
	headerIdempotencyKey = "Idempotency-Key"
)

// submitBody is POST /api/requests's body. Unknown fields are ignored
// (docs/api.md). Days is a pointer so "absent" and "0" differ: absent means
// the target's maxDays, 0 is out of range.
type submitBody struct {
	OperationID string `json:"operationId"`
	TargetKey   string `json:"targetKey"`
	Reason      string `json:"reason"`
	Days        *int   `json:"days"`
}

// readBody reads a request body of at most maxBodyBytes. Handlers call it
// only after rate limiting and authorization have passed (docs/api.md "Rate limiting").
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, domain.Errorf(domain.CodeInvalidArgument, fmt.Sprintf("The request body is larger than %d bytes.", maxBodyBytes), "read body: %v", err)
		}
		return nil, domain.Errorf(domain.CodeInvalidArgument, "The request body could not be read.", "read body: %v", err)
	}
	return raw, nil
}

// decodeJSON is the one JSON decoder of the API: exactly one JSON value,
// unknown fields ignored. Every failure is 400 INVALID_ARGUMENT with a
// message that names the problem but not the decoder's internals.
func decodeJSON(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(v); err != nil {
		return domain.Errorf(domain.CodeInvalidArgument, "The request body is not valid JSON of the expected shape.", "decode body: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return domain.Errorf(domain.CodeInvalidArgument, "The request body must be a single JSON value.", "trailing data after the JSON value")
	}
	return nil
}

// decodeSubmit reads a submission: the body, then the Idempotency-Key
// header as an alias of operationId. It checks only what needs no
// configuration — each member's type, the operationId — and returns the
// problems it found for validateSubmit to add to, so that one 400 names
// every bad field. The error is for a body unusable as a whole.
func decodeSubmit(raw []byte, header string) (submitBody, *fieldErrors, error) {
	var b submitBody
	f := &fieldErrors{}
	if err := decodeObject(raw, &b, f); err != nil {
		return submitBody{}, nil, err
	}
	header = strings.TrimSpace(header)
	b.OperationID = strings.TrimSpace(b.OperationID)
	field := "operationId"
	switch {
	case f.has(field):
		return b, f, nil
	case header != "" && b.OperationID != "" && header != b.OperationID:
		f.addMessage(field, "differs from the Idempotency-Key header; send one, or the same value in both",
			"The Idempotency-Key header and operationId differ; send one, or the same value in both.")
		return b, f, nil
	case b.OperationID == "" && header != "":
		b.OperationID, field = header, headerIdempotencyKey
	}
	if b.OperationID != "" {
		if p := operationIDProblem(b.OperationID); p != "" {
			f.add(field, p)
		}
	}
	return b, f, nil
}

// operationIDProblem accepts 1..64 printable, non-space characters: the id
// appears in URLs, logs and a VARCHAR(64).
func operationIDProblem(id string) string {
	if !utf8.ValidString(id) || utf8.RuneCountInString(id) > maxOperationIDRunes {
		return fmt.Sprintf("must be at most %d characters", maxOperationIDRunes)
	}
	for _, r := range id {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) || r == '/' {
			return "may contain only printable characters without spaces or '/'"
		}
	}
	if domain.IsRevocationID(id) {
		// Reserved: a revocation's id is derived from its grant's (a repo
		// entry removal's from its review item), and a request holding it
		// would block that removal forever.
		return "may not end with \"~revoke\" or \"~remove\": changeflow names removals so"
	}
	return ""
}

// submission is a validated request, ready for idempotency and storage.
type submission struct {
	submitBody
	target config.Target
	days   int
}

// validateSubmit checks a decoded submission against the configuration in
// force — the target exists, the reason is there, one line and not too
// long, days is within 1..target.maxDays (absent → maxDays) — adding to
// the problems decoding found (f may be nil), and answers one 400 naming
// them all. A field that already has a problem (the wrong type) is not
// checked again; days is checked against its range only when the target
// is known, since the range is the target's.
func validateSubmit(b submitBody, f *fieldErrors, snap *config.Snapshot) (submission, error) {
	if f == nil {
		f = &fieldErrors{}
	}
	key := strings.TrimSpace(b.TargetKey)
	var t config.Target
	known := false
	switch {
	case f.has("targetKey"):
	case key == "":
		f.add("targetKey", "is required")
	default:
		if t, known = snap.Target(key); !known {
			f.addMessage("targetKey", "is not a configured target", "Unknown target.")
		}
	}
	reason := strings.TrimSpace(b.Reason)
	if !f.has("reason") {
		// The reason ends up in the MR description, the console and
		// logs; a newline, a terminal escape or a bidi override there
		// changes what others read (domain.UnsafeTextRune). Refused, not
		// stripped: the caller learns what was wrong, and nothing they
		// sent is silently altered.
		r, pos, unsafe := domain.FirstUnsafeTextRune(reason)
		switch n := utf8.RuneCountInString(reason); {
		case n == 0:
			f.add("reason", "is required")
		case n > maxReasonRunes || !utf8.ValidString(reason):
			f.add("reason", fmt.Sprintf("must be at most %d characters of text", maxReasonRunes))
		case unsafe:
			f.add("reason", fmt.Sprintf(
				"must be one line of text without control or bidirectional-formatting characters (U+%04X at character %d)", r, pos+1))
		}
	}
	if b.Days != nil && !f.has("days") {
		switch d := *b.Days; {
		case known && (d < 1 || d > t.MaxDays):
			f.add("days", fmt.Sprintf("must be between 1 and %d for this target", t.MaxDays))
		case !known && d < 1:
			f.add("days", "must be at least 1")
		}
	}
	if err := f.err(); err != nil {
		return submission{}, err
	}
	days := t.MaxDays
	if b.Days != nil {
		days = *b.Days
	}
	b.TargetKey, b.Reason = key, reason
	return submission{submitBody: b, target: t, days: days}, nil
}

// requestHash identifies a submission for idempotency: SHA-256 over a
// canonical JSON of the subject and the validated fields (key order fixed,
// whitespace and field order of the original body irrelevant; days as
// given, -1 when absent, so a change of the target's maxDays does not
// turn a retry into a different request). The operationId is the key
// itself, so it is not hashed.
func requestHash(subject string, s submission) string {
	days := -1
	if s.Days != nil {
		days = *s.Days
	}
	canon, _ := json.Marshal(struct {
		Subject   string `json:"subject"`
		TargetKey string `json:"targetKey"`
		Reason    string `json:"reason"`
		Days      int    `json:"days"`
	}{subject, s.TargetKey, s.Reason, days})
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:])
}
