package main

import (
	"crypto/ed25519"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"changeflow/internal/auditchain"
	"changeflow/internal/auditlog"
	"changeflow/internal/config"
	"changeflow/internal/store"
)

// newAuditChain builds the audit chain's chainer, retention and export
// from audit.* (read before every pass and export, so a reload applies).
// Without audit.signingKey exports are refused, and serve says so at
// start; the local profile signs with the published development key
// instead (auditchain.LocalDevSeed), so `make run` can export and verify.
func newAuditChain(cfg *config.Manager, st *store.Store, local bool, logger *slog.Logger) *auditlog.Chain {
	devKey := ed25519.NewKeyFromSeed(auditchain.LocalDevSeed())
	switch {
	case cfg.Current().Audit().SigningKey != nil:
	case local:
		logger.Warn("audit.signingKey is not set: the local profile signs audit exports with the published development key (not evidence)",
			"key", config.KeyAuditSigningKey, "keyId", auditchain.KeyID(devKey.Public().(ed25519.PublicKey)))
	default:
		logger.Warn("audit.signingKey is not set: GET /ops/audit/export is refused until it is (docs/configuration.md)",
			"key", config.KeyAuditSigningKey)
	}
	return auditlog.New(auditlog.Options{
		Store: st, Logger: logger,
		Settings: func() auditlog.Settings {
			a := cfg.Current().Audit()
			s := auditlog.Settings{SigningKey: a.SigningKey, Retention: a.Retention, ChainInterval: a.ChainInterval}
			if s.SigningKey == nil && local {
				s.SigningKey = devKey
			}
			return s
		},
	})
}

const auditUsage = `Usage: changeflow audit verify FILE --key PUBKEY

Verifies an export of GET /ops/audit/export (JSONL or CSV) offline: every
record's hash, the seq and prevHash links, and the manifest's counts,
last hash and Ed25519 signature. PUBKEY is a file holding the public key
(PEM, as GET /ops/audit/key serves it in "pem") or the key itself (PEM or
the base64 of its 32 bytes, its "publicKey"). Exit 0 when the export
verifies; otherwise the first line that does not match is named and the
exit status is 1.
`

// runAudit is `changeflow audit verify FILE --key PUBKEY`.
func runAudit(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "verify" {
		fmt.Fprint(stderr, auditUsage)
		return fmt.Errorf("%w: audit takes the subcommand verify", errUsage)
	}
	fs := flag.NewFlagSet("audit verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, auditUsage) }
	keyArg := fs.String("key", "", "the public key: a file, or the key as PEM or base64")
	// FILE may come before or after --key: parse, take the file, parse
	// the rest.
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	var file string
	if fs.NArg() > 0 {
		file = fs.Arg(0)
		if err := fs.Parse(fs.Args()[1:]); err != nil {
			return err
		}
	}
	if file == "" || *keyArg == "" || fs.NArg() > 0 {
		fmt.Fprint(stderr, auditUsage)
		return fmt.Errorf("%w: audit verify needs one FILE and --key PUBKEY", errUsage)
	}
	pub, err := readPublicKey(*keyArg)
	if err != nil {
		return err
	}
	f, err := os.Open(file)
	if err != nil {
		return fmt.Errorf("audit verify: %w", err)
	}
	defer f.Close()
	sum, err := auditchain.Verify(f, pub)
	if err != nil {
		return fmt.Errorf("audit verify %s: FAILED: %w", file, err)
	}
	seqs := "no records"
	if sum.Count > 0 {
		seqs = fmt.Sprintf("seq %d..%d, last hash %s", sum.FirstSeq, sum.LastSeq, sum.LastHash)
	}
	fmt.Fprintf(stdout, "OK: %s export of %d records (%s) for [%s, %s), exported at %s, signed by key %s\n",
		sum.Format, sum.Count, seqs, sum.From, sum.To, sum.ExportedAt, sum.KeyID)
	return nil
}

// readPublicKey reads --key: a file's content when it names a readable
// file, else the argument itself.
func readPublicKey(arg string) (ed25519.PublicKey, error) {
	text, source := arg, "the argument"
	if b, err := os.ReadFile(arg); err == nil {
		text, source = string(b), "file "+arg
	}
	pub, err := auditchain.ParsePublicKey(text)
	if err != nil {
		return nil, fmt.Errorf("audit verify: --key (%s): %w", source, err)
	}
	return pub, nil
}
