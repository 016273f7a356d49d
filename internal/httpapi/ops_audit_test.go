package httpapi

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"changeflow/internal/auditchain"
	"changeflow/internal/auditlog"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// withAuditChain wires the audit chain over the world's store, signing
// with key (nil: no audit.signingKey).
func withAuditChain(st *store.Store, key ed25519.PrivateKey) worldOpt {
	return func(w *bizWorld, d *Deps) {
		d.Business.Audit = auditlog.New(auditlog.Options{Store: st,
			Settings: func() auditlog.Settings { return auditlog.Settings{SigningKey: key, Retention: 400 * 24 * time.Hour} }})
	}
}

// ageRecords moves every step-history and audit record ago into the
// past, past the chainer's grace (the records of a test are seconds old).
func ageRecords(t *testing.T, st *store.Store, ago time.Duration) {
	t.Helper()
	at, arg := st.Dialect().NowMinus(ago)
	for _, table := range []string{"operation_step", "audit_log"} {
		if _, err := st.DB().ExecContext(t.Context(), "UPDATE "+table+" SET created_at = "+at, arg); err != nil {
			t.Fatal(err)
		}
	}
}

// exportQuery is the export of the last day and the next hour by the
// real clock (the database's; the world's own clock is fixed).
func exportQuery(format string) string {
	now := time.Now().UTC()
	q := url.Values{"from": {now.Add(-24 * time.Hour).Format(time.RFC3339)}, "to": {now.Add(time.Hour).Format(time.RFC3339)}}
	if format != "" {
		q.Set("format", format)
	}
	return "/ops/audit/export?" + q.Encode()
}

// verify runs the offline verifier over an export's text.
func verify(text string, pub ed25519.PublicKey) (auditchain.Summary, error) {
	return auditchain.Verify(strings.NewReader(text), pub)
}

// wantVerifyFails checks that text fails verification at line (and seq,
// when non-zero).
func wantVerifyFails(t *testing.T, what, text string, pub ed25519.PublicKey, line int, seq int64, reason string) {
	t.Helper()
	_, err := verify(text, pub)
	var ve *auditchain.VerifyError
	if !errors.As(err, &ve) {
		t.Fatalf("%s: want a verify error, got %v", what, err)
	}
	if ve.Line != line || ve.Seq != seq || !strings.Contains(ve.Reason, reason) {
		t.Fatalf("%s: got %q, want line %d seq %d (%s)", what, ve.Error(), line, seq, reason)
	}
}

// seqOf is the seq a JSONL line or CSV row carries.
func seqOf(t *testing.T, line string) int64 {
	t.Helper()
	var n int64
	if strings.HasPrefix(line, "{") {
		i := strings.Index(line, `"seq":`)
		_, err := fmt.Sscanf(line[i+len(`"seq":`):], "%d", &n)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if _, err := fmt.Sscanf(strings.TrimPrefix(line, "record,"), "%d", &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestOpsAuditExportVerifiesAndEveryTamperingIsNamed: requests and
// operator reads recorded, exported (JSONL and CSV) with the key served
// at /ops/audit/key; the export verifies, and a changed, removed or
// reordered line, a removed first line or manifest, and a wrong key each
// fail naming the first line that does not match. After retention the
// export starts at the anchor and still verifies.
func TestOpsAuditExportVerifiesAndEveryTamperingIsNamed(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32))
		w := newBizWorld(t, st, withAuditChain(st, key))
		for user, id := range map[string]string{"alice": "ae-alice", "bob": "ae-bob"} {
			w.do(req{method: "POST", path: "/api/requests", user: user, body: submitBodyFor(tOpen, "audit", ""),
				header: map[string]string{"Idempotency-Key": id}}).want(t, 202, "ACCEPTED")
		}
		w.do(req{method: "GET", path: "/ops/security-events", user: "olivia"}).want(t, 200, "OK")
		w.do(req{method: "GET", path: "/ops/requests", user: "olivia"}).want(t, 200, "OK")
		ageRecords(t, st, time.Minute)

		r := w.do(req{method: "GET", path: "/ops/audit/key", user: "olivia"})
		r.want(t, 200, "OK")
		raw, _ := base64.StdEncoding.DecodeString(r.data["publicKey"].(string))
		pub := ed25519.PublicKey(raw)
		if !pub.Equal(key.Public()) || r.data["keyId"] != auditchain.KeyID(pub) {
			t.Fatalf("the served key is the signing key's public half: %s", r.raw)
		}
		if pemPub, err := auditchain.ParsePublicKey(r.data["pem"].(string)); err != nil || !pemPub.Equal(pub) {
			t.Fatalf("pem: %v", err)
		}

		for _, format := range []string{"jsonl", "csv"} {
			t.Run(format, func(t *testing.T) {
				r := w.do(req{method: "GET", path: exportQuery(format), user: "olivia"})
				if r.status != 200 {
					t.Fatalf("export: %d %s", r.status, r.raw)
				}
				sum, err := verify(r.raw, pub)
				if err != nil {
					t.Fatalf("the export verifies: %v\n%s", err, r.raw)
				}
				// The 2 submissions' first steps and the 2 ops reads, in
				// seq order from 1 (the exports' own audit records are
				// younger than the grace).
				if sum.Count != 4 || sum.FirstSeq != 1 || sum.Format != format {
					t.Fatalf("summary %+v", sum)
				}
				for _, want := range []string{`grant.submitted`, `"subject":"alice"`, `ops-request-get`} {
					if !strings.Contains(r.raw, want) && !strings.Contains(r.raw, strings.ReplaceAll(want, `"`, `""`)) {
						t.Fatalf("the export holds %s:\n%s", want, r.raw)
					}
				}
				lines := strings.Split(strings.TrimSuffix(r.raw, "\n"), "\n")
				first := 0 // index of the first record line
				if format == "csv" {
					first = 1
				}
				n := func(i int) int { return i + 1 } // line number of index i
				join := func(ls []string) string { return strings.Join(ls, "\n") + "\n" }
				edit := func(f func(ls []string) []string) string {
					return join(f(append([]string(nil), lines...)))
				}

				i := first + 2
				changed := edit(func(ls []string) []string {
					ls[i] = strings.Replace(ls[i], `"source":"`, `"source":"x`, 1)
					if format == "csv" {
						// The hashed record column and the column that
						// repeats its source, so the two still agree.
						ls[i] = strings.Replace(ls[i], `""source"":""`, `""source"":""x`, 1)
						ls[i] = strings.Replace(ls[i], ",step,", ",xstep,", 1)
						ls[i] = strings.Replace(ls[i], ",audit,", ",xaudit,", 1)
					}
					return ls
				})
				if changed == join(lines) {
					t.Fatalf("the edit changed nothing: %s", lines[i])
				}
				wantVerifyFails(t, "a changed line", changed, pub, n(i), seqOf(t, lines[i]), "hash does not match")
				if format == "csv" {
					// A spreadsheet column that no longer says what the
					// hashed record says.
					view := edit(func(ls []string) []string {
						ls[i] = strings.Replace(strings.Replace(ls[i], ",step,", ",xstep,", 1), ",audit,", ",xaudit,", 1)
						return ls
					})
					wantVerifyFails(t, "a changed column", view, pub, n(i), seqOf(t, lines[i]), "column source does not match")
				}

				removed := edit(func(ls []string) []string { return append(ls[:i], ls[i+1:]...) })
				wantVerifyFails(t, "a removed line", removed, pub, n(i), seqOf(t, lines[i+1]), "expected seq")

				swapped := edit(func(ls []string) []string { ls[i], ls[i+1] = ls[i+1], ls[i]; return ls })
				wantVerifyFails(t, "two lines swapped", swapped, pub, n(i), seqOf(t, lines[i+1]), "expected seq")

				noFirst := edit(func(ls []string) []string { return append(ls[:first], ls[first+1:]...) })
				wantVerifyFails(t, "the first record removed", noFirst, pub, n(first), seqOf(t, lines[first+1]), "starts at seq 1")

				noManifest := edit(func(ls []string) []string { return ls[:len(ls)-1] })
				wantVerifyFails(t, "the manifest removed", noManifest, pub, 1, 0, "no manifest")

				other := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{8}, 32)).Public().(ed25519.PublicKey)
				wantVerifyFails(t, "a wrong key", r.raw, other, len(lines), 0, "does not verify")
			})
		}

		// Retention: the first three records are old (their sources too,
		// as a record past retention is far outside the lookback).
		at, arg := st.Dialect().NowMinus(500 * 24 * time.Hour)
		if _, err := st.DB().ExecContext(t.Context(), "UPDATE audit_chain SET occurred_at = "+at+" WHERE seq <= 3", arg); err != nil {
			t.Fatal(err)
		}
		ageRecords(t, st, 500*24*time.Hour)
		chain := auditlog.New(auditlog.Options{Store: st, Settings: func() auditlog.Settings {
			return auditlog.Settings{SigningKey: key, Retention: 400 * 24 * time.Hour}
		}})
		if n, err := chain.Retain(t.Context()); err != nil || n != 3 {
			t.Fatalf("retention removed %d (%v), want 3", n, err)
		}
		state, err := st.AuditChainState(t.Context())
		if err != nil || state.AnchorSeq != 3 {
			t.Fatalf("anchor %+v (%v)", state, err)
		}
		// An export from long before the anchor starts right after it.
		q := url.Values{"from": {"2000-01-01T00:00:00Z"}, "to": {time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}, "format": {"csv"}}
		r = w.do(req{method: "GET", path: "/ops/audit/export?" + q.Encode(), user: "olivia"})
		sum, err := verify(r.raw, pub)
		if err != nil || sum.FirstSeq != 4 {
			t.Fatalf("after retention the export starts at seq 4 and verifies: %+v %v\n%s", sum, err, r.raw)
		}
		if !strings.Contains(r.raw, state.AnchorHash) {
			t.Fatalf("the manifest carries the anchor's hash %s", state.AnchorHash)
		}
	})
}

// TestOpsAuditExportRefusals: bad parameters are 400 naming each; without
// audit.signingKey the export and the key are 503 saying what to set; a
// caller without ops.read is refused.
func TestOpsAuditExportRefusals(t *testing.T) {
	// Refusals are no journey: one SQLite store, no subtest, so that this
	// package stays out of make test's journeys run (storetest.OnSQLite).
	st := storetest.Open(t, store.DriverSQLite)
	w := newBizWorld(t, st, withAuditChain(st, ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32))))
	for _, tc := range []struct{ query, field string }{
		{"", "from"},
		{"from=2026-01-01T00:00:00Z", "to"},
		{"from=yesterday&to=2026-01-02T00:00:00Z", "from"},
		{"from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z", "to"},
		{"from=2026-01-01&to=2026-01-02T00:00:00Z", "from"},
		{"from=2026-01-01T00:00:00Z&to=2026-01-02T00:00:00Z&format=xml", "format"},
	} {
		r := w.do(req{method: "GET", path: "/ops/audit/export?" + tc.query, user: "olivia"})
		r.want(t, 400, "INVALID_ARGUMENT")
		if !strings.Contains(r.raw, `"field":"`+tc.field+`"`) {
			t.Fatalf("%s: the refusal names %s: %s", tc.query, tc.field, r.raw)
		}
	}
	w.do(req{method: "GET", path: exportQuery(""), user: "bob"}).want(t, 403, "ACCESS_DENIED")

	unsigned := newBizWorld(t, st, withAuditChain(st, nil))
	for _, p := range []string{exportQuery(""), "/ops/audit/key"} {
		r := unsigned.do(req{method: "GET", path: p, user: "olivia"})
		r.want(t, 503, "RETRY_LATER")
		if !strings.Contains(r.raw, "audit.signingKey is not set") {
			t.Fatalf("%s says what to set: %s", p, r.raw)
		}
	}
}
