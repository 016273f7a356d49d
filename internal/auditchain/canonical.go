// Package auditchain is the tamper-evident audit chain's format
// (docs/audit.md): the canonical form of a record, the hash that links it
// to the one before, the signed manifest that ends an export, the writers
// of the two export formats and the offline verifier. It imports no
// database and no net/http, so `changeflow audit verify` and the server
// compute the same bytes with the same code.
package auditchain

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Fields is one flat record: every value is a string or an int64. No
// floats, booleans, nulls or nesting: with only these two kinds, ASCII
// keys (every key a record has) and integers below 2^53 (ids, seqs), the
// canonical form below is exactly RFC 8785 (JCS), which any language can
// reproduce without a JSON library's quirks. (JCS sorts keys by UTF-16
// code units and writes numbers as doubles; for ASCII keys and such
// integers both agree with the byte order and decimal used here.)
type Fields map[string]any

// GenesisHash is the prevHash of the chain's first record (seq 1).
const GenesisHash = "0000000000000000000000000000000000000000000000000000000000000000"

// Canonical encodes f as its canonical JSON: one object, keys sorted by
// their UTF-8 bytes, no whitespace, integers in decimal, strings with only
// `"`, `\` and the control characters U+0000..U+001F escaped (\b \t \n \f
// \r short, the rest as \u00xx in lower-case hex), everything else as
// literal UTF-8 (invalid bytes become U+FFFD). A value of another type is
// an error: the chain never stores a record it could not verify later.
func Canonical(f Fields) ([]byte, error) {
	keys := make([]string, 0, len(f))
	for k := range f {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		writeString(&b, k)
		b.WriteByte(':')
		switch v := f[k].(type) {
		case string:
			writeString(&b, v)
		case int64:
			b.WriteString(strconv.FormatInt(v, 10))
		case int:
			b.WriteString(strconv.Itoa(v))
		default:
			return nil, fmt.Errorf("canonical record: field %q is %T, not a string or an integer", k, v)
		}
	}
	b.WriteByte('}')
	return []byte(b.String()), nil
}

// writeString writes s as a JCS string.
func writeString(b *strings.Builder, s string) {
	const hexDigits = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\f':
			b.WriteString(`\f`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte(hexDigits[r>>4])
			b.WriteByte(hexDigits[r&0xf])
		default:
			// utf8.RuneError for an invalid byte writes U+FFFD.
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

// Hash is a record's hash: lower-case hex of SHA-256 over the bytes
//
//	prevHash (64 ASCII hex characters) 0x0A seq (ASCII decimal) 0x0A canonical
//
// so a record is bound to its position (seq) and to everything before it
// (prevHash): changing, removing or reordering one record changes every
// hash after it.
func Hash(prevHash string, seq int64, canonical []byte) string {
	h := sha256.New()
	h.Write([]byte(prevHash))
	h.Write([]byte{'\n'})
	h.Write([]byte(strconv.FormatInt(seq, 10)))
	h.Write([]byte{'\n'})
	h.Write(canonical)
	return hex.EncodeToString(h.Sum(nil))
}
