package auditchain

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestCanonicalIsJCSForStringsAndIntegers(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Fields
		want string
	}{
		{"keys sorted by bytes, no whitespace", Fields{"b": "2", "a": int64(1), "B": "x"}, `{"B":"x","a":1,"b":"2"}`},
		{"short escapes", Fields{"s": "q\"b\\\b\f\n\r\t"}, `{"s":"q\"b\\\b\f\n\r\t"}`},
		{"other controls as lower-case \\u00xx", Fields{"s": "\x00\x1f"}, `{"s":"\u0000\u001f"}`},
		{"no HTML or U+2028 escaping", Fields{"s": "<&>\u2028é"}, "{\"s\":\"<&>\u2028é\"}"},
		{"invalid UTF-8 becomes U+FFFD", Fields{"s": "a\xffb"}, "{\"s\":\"a\uFFFDb\"}"},
		{"negative integers", Fields{"n": int64(-42)}, `{"n":-42}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Canonical(tc.in)
			if err != nil || string(got) != tc.want {
				t.Fatalf("got %s (%v), want %s", got, err, tc.want)
			}
		})
	}
	if _, err := Canonical(Fields{"f": 1.5}); err == nil {
		t.Fatal("a float is refused")
	}
}

func TestHashCoversPrevHashSeqAndRecord(t *testing.T) {
	rec := []byte(`{"a":1}`)
	h := Hash(GenesisHash, 1, rec)
	for name, other := range map[string]string{
		"another prevHash": Hash(strings.Repeat("1", 64), 1, rec),
		"another seq":      Hash(GenesisHash, 2, rec),
		"another record":   Hash(GenesisHash, 1, []byte(`{"a":2}`)),
	} {
		if other == h {
			t.Fatalf("%s gives the same hash", name)
		}
	}
	// The documented byte layout, spelled out (docs/audit.md).
	sum := sha256.Sum256([]byte(GenesisHash + "\n1\n" + `{"a":1}`))
	if want := hex.EncodeToString(sum[:]); h != want {
		t.Fatalf("hash %s, want %s", h, want)
	}
}

func TestSigningKeyForms(t *testing.T) {
	seed := bytes.Repeat([]byte{3}, 32)
	want := ed25519.NewKeyFromSeed(seed)
	k, err := ParseSigningKey(base64.StdEncoding.EncodeToString(seed))
	if err != nil || !k.Equal(want) {
		t.Fatalf("base64 seed: %v", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(want)
	if err != nil {
		t.Fatal(err)
	}
	k, err = ParseSigningKey(string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})))
	if err != nil || !k.Equal(want) {
		t.Fatalf("PEM: %v", err)
	}
	for _, bad := range []string{"not base64!", base64.StdEncoding.EncodeToString([]byte("short")), "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----"} {
		if _, err := ParseSigningKey(bad); err == nil {
			t.Fatalf("%q is refused", bad)
		} else if strings.Contains(err.Error(), bad) {
			t.Fatalf("the error quotes the secret: %v", err)
		}
	}
}

// sampleExport writes n records and the manifest in format.
func sampleExport(t *testing.T, format string, key ed25519.PrivateKey, n int) string {
	t.Helper()
	var b bytes.Buffer
	w, err := NewWriter(&b, format)
	if err != nil {
		t.Fatal(err)
	}
	m := Manifest{From: time.Unix(0, 0), To: time.Unix(100, 0), ExportedAt: time.Unix(200, 0), AnchorHash: GenesisHash}
	prev := GenesisHash
	for i := range n {
		seq := int64(i + 1)
		rec, err := Canonical(Fields{"source": "audit", "sourceId": seq, "kind": "ops-request-get", "actor": "olivia, \"the\" operator",
			"occurredAt": "2026-01-01T00:00:00Z", "note": "line\nbreak"})
		if err != nil {
			t.Fatal(err)
		}
		e := Entry{Seq: seq, PrevHash: prev, Hash: Hash(prev, seq, rec), Record: rec}
		if err := w.Record(e); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			m.FirstSeq, m.StartPrevHash = seq, prev
		}
		m.Count, m.LastSeq, m.LastHash, prev = m.Count+1, seq, e.Hash, e.Hash
	}
	m.HeadSeq, m.HeadHash = m.LastSeq, m.LastHash
	if err := m.Sign(key); err != nil {
		t.Fatal(err)
	}
	if err := w.Manifest(m); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestVerifyBothFormats(t *testing.T) {
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{5}, 32))
	pub := key.Public().(ed25519.PublicKey)
	for _, format := range []string{FormatJSONL, FormatCSV} {
		t.Run(format, func(t *testing.T) {
			text := sampleExport(t, format, key, 3)
			sum, err := Verify(strings.NewReader(text), pub)
			if err != nil || sum.Count != 3 || sum.LastSeq != 3 || sum.KeyID != KeyID(pub) {
				t.Fatalf("verify: %+v %v\n%s", sum, err, text)
			}
			// A record line with a repeated key is refused even if the
			// hashed value is the last one.
			if format == FormatJSONL {
				lines := strings.SplitN(text, "\n", 2)
				dup := strings.Replace(lines[0], `"actor":`, `"actor":"someone else","actor":`, 1) + "\n" + lines[1]
				_, err := Verify(strings.NewReader(dup), pub)
				var ve *VerifyError
				if !errors.As(err, &ve) || ve.Line != 1 || !strings.Contains(ve.Reason, "appears twice") {
					t.Fatalf("a repeated key: %v", err)
				}
			}
			empty := sampleExport(t, format, key, 0)
			if sum, err := Verify(strings.NewReader(empty), pub); err != nil || sum.Count != 0 {
				t.Fatalf("an empty range verifies: %+v %v", sum, err)
			}
		})
	}
}
