package auditchain

import (
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
)

// ParseSigningKey reads audit.signingKey: the standard base64 of a 32-byte
// Ed25519 seed (openssl rand -base64 32), or a PEM "PRIVATE KEY" block
// (PKCS #8, openssl genpkey -algorithm ed25519). The error never quotes
// the value: it is a secret.
func ParseSigningKey(s string) (ed25519.PrivateKey, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "-----BEGIN") {
		block, _ := pem.Decode([]byte(s))
		if block == nil || block.Type != "PRIVATE KEY" {
			return nil, errors.New("not a PEM PRIVATE KEY block (PKCS #8)")
		}
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("not a PKCS #8 key: %w", err)
		}
		priv, ok := k.(ed25519.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("a %T key, not Ed25519", k)
		}
		return priv, nil
	}
	seed, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, errors.New("neither a PEM PRIVATE KEY nor standard base64")
	}
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("decodes to %d bytes, not the %d of an Ed25519 seed", len(seed), ed25519.SeedSize)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// ParsePublicKey reads a verifier's key: a PEM "PUBLIC KEY" block (PKIX,
// what GET /ops/audit/key serves as pem) or the standard base64 of the 32
// raw bytes (its publicKey).
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "-----BEGIN") {
		block, _ := pem.Decode([]byte(s))
		if block == nil || block.Type != "PUBLIC KEY" {
			return nil, errors.New("public key: not a PEM PUBLIC KEY block")
		}
		k, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("public key: %w", err)
		}
		pub, ok := k.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("public key: a %T key, not Ed25519", k)
		}
		return pub, nil
	}
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(raw) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("public key: neither a PEM PUBLIC KEY nor the base64 of %d bytes", ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(raw), nil
}

// KeyID names a public key in a manifest: the first 16 hex characters of
// SHA-256 over its 32 raw bytes. It tells which key signed (after a
// rotation); it proves nothing, the signature does.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// PublicKeyPEM is pub as a PEM "PUBLIC KEY" block (PKIX).
func PublicKeyPEM(pub ed25519.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("public key: %w", err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})), nil
}

// LocalDevSeed is the local profile's fixed signing seed (the SHA-256 of a
// published phrase): `make run` can export and verify, and since everyone
// can compute it, nothing it signs is evidence.
func LocalDevSeed() []byte {
	sum := sha256.Sum256([]byte("changeflow local profile audit key — not a secret"))
	return sum[:]
}
