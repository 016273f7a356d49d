package auditchain

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"time"
)

// Manifest ends an export: what range was asked for, which run of the
// chain it holds, the chain's head when it was made, and an Ed25519
// signature over all of that.
type Manifest struct {
	// From and To are the range asked for, [From, To), by occurredAt.
	From, To time.Time
	// FirstSeq, LastSeq and Count describe the records exported (0, 0, 0
	// when none); StartPrevHash is the first record's prevHash (the anchor's
	// hash when retention removed what came before), LastHash the last
	// record's hash ("" when none).
	FirstSeq, LastSeq, Count int64
	StartPrevHash, LastHash  string
	// HeadSeq and HeadHash are the chain's last record when the export was
	// made, whatever the range: two exports that disagree on a seq's hash
	// prove a rewrite in between.
	HeadSeq  int64
	HeadHash string
	// AnchorSeq and AnchorHash are the last record retention removed (0 and
	// GenesisHash while none was).
	AnchorSeq  int64
	AnchorHash string
	ExportedAt time.Time
	// KeyID names the signing key (KeyID); Signature is the standard base64
	// of the Ed25519 signature over SignedBytes.
	KeyID     string
	Signature string
}

// timeText is how every time appears in an export: RFC 3339 in UTC with
// the stored precision (trailing zeros of the fraction dropped).
func timeText(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// Fields is the manifest without its signature, as it is signed.
func (m Manifest) Fields() Fields {
	return Fields{
		"type": "manifest", "from": timeText(m.From), "to": timeText(m.To),
		"firstSeq": m.FirstSeq, "lastSeq": m.LastSeq, "count": m.Count,
		"startPrevHash": m.StartPrevHash, "lastHash": m.LastHash,
		"headSeq": m.HeadSeq, "headHash": m.HeadHash,
		"anchorSeq": m.AnchorSeq, "anchorHash": m.AnchorHash,
		"exportedAt": timeText(m.ExportedAt), "keyId": m.KeyID,
	}
}

// SignedBytes are the bytes the signature covers: the canonical JSON
// (Canonical) of the manifest's fields without "signature".
func (m Manifest) SignedBytes() ([]byte, error) { return Canonical(m.Fields()) }

// Sign sets KeyID and Signature with key.
func (m *Manifest) Sign(key ed25519.PrivateKey) error {
	pub, ok := key.Public().(ed25519.PublicKey)
	if !ok {
		return errors.New("sign manifest: not an Ed25519 key")
	}
	m.KeyID = KeyID(pub)
	msg, err := m.SignedBytes()
	if err != nil {
		return fmt.Errorf("sign manifest: %w", err)
	}
	m.Signature = base64.StdEncoding.EncodeToString(ed25519.Sign(key, msg))
	return nil
}

// Line is the manifest as the JSON object an export carries: its fields
// and "signature", canonical.
func (m Manifest) Line() ([]byte, error) {
	f := m.Fields()
	f["signature"] = m.Signature
	return Canonical(f)
}

// verifySignature checks the signature of a manifest read back as fields
// (without "signature") against pub.
func verifySignature(f Fields, signature string, pub ed25519.PublicKey) error {
	sig, err := base64.StdEncoding.DecodeString(signature)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return errors.New("the manifest's signature is not the base64 of an Ed25519 signature")
	}
	msg, err := Canonical(f)
	if err != nil {
		return err
	}
	if !ed25519.Verify(pub, msg, sig) {
		return fmt.Errorf("the manifest's signature does not verify with key %s (a wrong key, or the manifest was changed)", KeyID(pub))
	}
	return nil
}
