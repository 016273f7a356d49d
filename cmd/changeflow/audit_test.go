package main

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"changeflow/internal/auditchain"
	"changeflow/internal/config"
)

// writeExport writes an export of three records signed with key to a
// file and returns its path and lines.
func writeExport(t *testing.T, key ed25519.PrivateKey, format string) (string, []string) {
	t.Helper()
	var b bytes.Buffer
	w, err := auditchain.NewWriter(&b, format)
	if err != nil {
		t.Fatal(err)
	}
	m := auditchain.Manifest{From: time.Unix(0, 0), To: time.Unix(1e9, 0), ExportedAt: time.Unix(1e9, 0), AnchorHash: auditchain.GenesisHash}
	prev := auditchain.GenesisHash
	for seq := int64(1); seq <= 3; seq++ {
		rec, err := auditchain.Canonical(auditchain.Fields{"source": "step", "sourceId": seq, "kind": "grant.submitted", "occurredAt": "2026-01-01T00:00:00Z"})
		if err != nil {
			t.Fatal(err)
		}
		e := auditchain.Entry{Seq: seq, PrevHash: prev, Hash: auditchain.Hash(prev, seq, rec), Record: rec}
		if err := w.Record(e); err != nil {
			t.Fatal(err)
		}
		if seq == 1 {
			m.FirstSeq, m.StartPrevHash = 1, prev
		}
		m.Count, m.LastSeq, m.LastHash, prev = m.Count+1, seq, e.Hash, e.Hash
	}
	if err := m.Sign(key); err != nil {
		t.Fatal(err)
	}
	if err := w.Manifest(m); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "export."+format)
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
}

// TestAuditVerifyCommand: `changeflow audit verify FILE --key PUBKEY`
// prints OK and exits 0 for an intact export, with the key as a PEM file
// or as base64, FILE before or after --key; a swapped pair of lines or a
// wrong key fails naming the line; a missing argument is a usage error.
func TestAuditVerifyCommand(t *testing.T) {
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, 32))
	pub := key.Public().(ed25519.PublicKey)
	pemText, err := auditchain.PublicKeyPEM(pub)
	if err != nil {
		t.Fatal(err)
	}
	pemFile := filepath.Join(t.TempDir(), "audit.pub")
	if err := os.WriteFile(pemFile, []byte(pemText), 0o600); err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString(pub)
	getenv := func(string) string { return "" }
	for _, format := range []string{"jsonl", "csv"} {
		path, lines := writeExport(t, key, format)
		for _, args := range [][]string{{path, "--key", pemFile}, {"--key", b64, path}} {
			var out bytes.Buffer
			err := run(t.Context(), append([]string{"changeflow", "audit", "verify"}, args...), getenv, &out, &out)
			if err != nil || !strings.HasPrefix(out.String(), "OK: "+format+" export of 3 records (seq 1..3") {
				t.Fatalf("%v: %v\n%s", args, err, out.String())
			}
		}

		first := 0
		if format == "csv" {
			first = 1
		}
		swapped := append([]string(nil), lines...)
		swapped[first], swapped[first+1] = swapped[first+1], swapped[first]
		bad := filepath.Join(t.TempDir(), "swapped."+format)
		if err := os.WriteFile(bad, []byte(strings.Join(swapped, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		wantLine := "line " + string(rune('1'+first)) + " (seq 2)"
		err := run(t.Context(), []string{"changeflow", "audit", "verify", bad, "--key", pemFile}, getenv, &bytes.Buffer{}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "FAILED: "+wantLine) {
			t.Fatalf("swapped lines: %v, want %s", err, wantLine)
		}

		other := base64.StdEncoding.EncodeToString(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, 32)).Public().(ed25519.PublicKey))
		err = run(t.Context(), []string{"changeflow", "audit", "verify", path, "--key", other}, getenv, &bytes.Buffer{}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "signature does not verify") {
			t.Fatalf("wrong key: %v", err)
		}
	}
	for _, args := range [][]string{{"audit"}, {"audit", "verify"}, {"audit", "verify", "f"}, {"audit", "check", "f", "--key", b64}} {
		err := run(t.Context(), append([]string{"changeflow"}, args...), getenv, &bytes.Buffer{}, &bytes.Buffer{})
		if !errors.Is(err, errUsage) {
			t.Fatalf("%v: want a usage error, got %v", args, err)
		}
	}
}

// TestLocalProfileSignsWithTheDevelopmentKey: without audit.signingKey
// the local profile signs exports with the published development key and
// says so; outside it exports are refused and serve warns; a configured
// key wins over both.
func TestLocalProfileSignsWithTheDevelopmentKey(t *testing.T) {
	dev := ed25519.NewKeyFromSeed(auditchain.LocalDevSeed())
	for _, tc := range []struct {
		name    string
		local   bool
		overlay map[string]any
		want    ed25519.PrivateKey
		warns   string
	}{
		{"local, unset", true, nil, dev, "development key"},
		{"production, unset", false, nil, nil, "export is refused"},
		{"configured", false, map[string]any{config.KeyAuditSigningKey: procAuditSigningKey},
			ed25519.NewKeyFromSeed([]byte("proc-test-audit-signing-key-32b!")), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Load(t.Context(), config.Options{Overlay: tc.overlay})
			if err != nil {
				t.Fatal(err)
			}
			defer cfg.Close()
			var logs bytes.Buffer
			chain := newAuditChain(cfg, nil, tc.local, slog.New(slog.NewJSONHandler(&logs, nil)))
			if got := chain.SigningKey(); !got.Equal(tc.want) && (got != nil || tc.want != nil) {
				t.Fatalf("signing key %x, want %x", got, tc.want)
			}
			if tc.warns == "" && logs.Len() > 0 || tc.warns != "" && !strings.Contains(logs.String(), tc.warns) {
				t.Fatalf("log %q, want %q", logs.String(), tc.warns)
			}
		})
	}
}
