package hooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// This is the receiver's own reading of the Standard Webhooks scheme,
// written from the specification and not shared with the sender
// (internal/notify/webhook), so a mistake on one side shows up as a
// failed verification instead of agreeing with itself.

// Tolerance is how far webhook-timestamp may be from the receiver's clock
// either way; the specification's recommended five minutes.
const Tolerance = 5 * time.Minute

// secretKey is the HMAC key of a secret: a "whsec_" secret's base64 text
// decoded, any other secret's bytes.
func secretKey(secret string) ([]byte, error) {
	if rest, ok := strings.CutPrefix(secret, "whsec_"); ok {
		k, err := base64.StdEncoding.DecodeString(rest)
		if err != nil {
			return nil, errors.New("whsec_ secret is not base64")
		}
		return k, nil
	}
	return []byte(secret), nil
}

// verify checks the three headers against body with secret at now. It
// answers why a delivery is refused, in words the deliveries list shows.
func verify(h http.Header, body []byte, secret string, now time.Time) error {
	id, tsText, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || tsText == "" || sigs == "" {
		return errors.New("missing webhook-id, webhook-timestamp or webhook-signature")
	}
	ts, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil {
		return errors.New("webhook-timestamp is not unix seconds")
	}
	if d := now.Sub(time.Unix(ts, 0)); d > Tolerance || d < -Tolerance {
		return errors.New("webhook-timestamp is outside the 5 minute tolerance")
	}
	key, err := secretKey(secret)
	if err != nil {
		return err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write([]byte(tsText))
	mac.Write([]byte{'.'})
	mac.Write(body)
	want := mac.Sum(nil)
	// The header is a space-separated list of "version,signature"; any
	// one v1 match verifies (a sender rotating its secret signs twice).
	for _, s := range strings.Fields(sigs) {
		version, b64, ok := strings.Cut(s, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(b64)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return errors.New("no v1 signature matches")
}
