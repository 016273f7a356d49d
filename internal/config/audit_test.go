package config

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestAuditSigningKey: a valid seed is parsed once into the key, unset
// is nil, and an unusable value stops the load naming the item without
// quoting the secret; retention defaults to 400 days and is at least 1d.
func TestAuditSigningKey(t *testing.T) {
	seed := bytes.Repeat([]byte{4}, 32)
	load := func(kv map[string]any) (*Manager, error) { return Load(t.Context(), Options{Overlay: kv}) }

	m, err := load(map[string]any{KeyAuditSigningKey: base64.StdEncoding.EncodeToString(seed)})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Current().Audit().SigningKey; !got.Equal(ed25519.NewKeyFromSeed(seed)) {
		t.Fatal("the base64 value becomes the signing key")
	}
	for _, r := range m.Current().Effective() {
		if r.Key == KeyAuditSigningKey && (r.Value != masked || strings.Contains(r.Reason, base64.StdEncoding.EncodeToString(seed))) {
			t.Fatalf("the effective configuration masks the key: %+v", r)
		}
	}
	if a := m.Current().Audit(); a.Retention != 400*24*time.Hour || a.ChainInterval != 10*time.Second {
		t.Fatalf("defaults: %+v", a)
	}
	_ = m.Close()

	m, err = load(map[string]any{KeyAuditRetention: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	if a := m.Current().Audit(); a.SigningKey != nil || a.Retention != 24*time.Hour {
		t.Fatalf("unset key is nil; retention below 1d is 1d: %+v", a)
	}
	_ = m.Close()

	secret := base64.StdEncoding.EncodeToString([]byte("sixteen byte key"))
	_, err = load(map[string]any{KeyAuditSigningKey: secret})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), KeyAuditSigningKey) || strings.Contains(err.Error(), secret) {
		t.Fatalf("an unusable key stops the load naming the item, never quoting it: %v", err)
	}
}
