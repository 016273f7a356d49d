package identity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"golang.org/x/sync/singleflight"
)

// signingAlgs are the JWS algorithms a token may be signed with: the
// asymmetric ones only. An HMAC "key" taken from a public JWKS would let
// anyone who read it sign tokens.
func signingAlgs() []jose.SignatureAlgorithm {
	return []jose.SignatureAlgorithm{
		jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
		jose.ES256, jose.ES384, jose.ES512, jose.EdDSA,
	}
}

// keySet is the issuer's JWKS, cached, and re-read at most once per
// minRefresh — and then only for a token whose key id is not in the
// cache. go-oidc's own RemoteKeySet re-reads the JWKS on every signature
// that fails, so each forged token cost an outbound call: fifty forged
// tokens, fifty-one downloads. Here a token naming a cached key id whose
// signature does not verify is simply refused, and an unknown key id
// (which is how a rotation shows up) triggers a refresh only when the last
// one is older than minRefresh. The cost: a key the issuer publishes
// within minRefresh of our last refresh is usable only after that
// interval — issuers publish new keys ahead of signing with them, so this
// costs nothing with a well-behaved issuer.
//
// It implements go-oidc's KeySet.
type keySet struct {
	url        string
	client     *http.Client
	minRefresh func() time.Duration
	timeout    func() time.Duration
	now        func() time.Time

	mu sync.Mutex // guards keys, refreshed and lastErr
	// keys is the last JWKS read; refreshed is when the last read
	// finished, successful or not — a failing issuer is not asked again
	// sooner either; lastErr is that read's failure, if it failed.
	// refreshed is stamped when the read ends, not when it starts: a
	// token arriving while a read is in flight must join that read (the
	// singleflight), not be refused because "the keys were just read"
	// while they are not there yet. It was stamped at the start, and the
	// web app's first two calls after a sign-in (same new token, at once)
	// saw one of them refused and the person signed out again.
	keys      []jose.JSONWebKey
	refreshed time.Time
	lastErr   error
	flight    singleflight.Group
}

// errUnknownKey and errBadSignature are the keySet's refusals; the
// verifier wraps them, so they end up inside ErrInvalidToken.
var (
	errUnknownKey   = errors.New("token names a key the issuer does not publish")
	errBadSignature = errors.New("signature does not verify")
)

// VerifySignature checks jwt's signature against the cached keys,
// refreshing them as the type's comment describes.
func (k *keySet) VerifySignature(ctx context.Context, jwt string) ([]byte, error) {
	jws, err := jose.ParseSigned(jwt, signingAlgs())
	if err != nil {
		return nil, fmt.Errorf("malformed jwt: %w", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("a token must carry exactly one signature")
	}
	kid := jws.Signatures[0].Header.KeyID

	keys, refreshed, lastErr := k.cached()
	if payload, known := verifyWith(jws, kid, keys); payload != nil {
		return payload, nil
	} else if known {
		// The key is one we hold and the signature is wrong: forged or
		// damaged. Re-reading the JWKS could not change that.
		return nil, errBadSignature
	}
	if !refreshed.IsZero() && k.now().Sub(refreshed) < k.minRefresh() {
		if lastErr != nil {
			return nil, lastErr
		}
		return nil, fmt.Errorf("%w (kid %q; keys last read %s ago, re-read at most every %s)",
			errUnknownKey, kid, k.now().Sub(refreshed).Round(time.Second), k.minRefresh())
	}
	if keys, err = k.refresh(ctx); err != nil {
		return nil, err
	}
	if payload, _ := verifyWith(jws, kid, keys); payload != nil {
		return payload, nil
	}
	return nil, fmt.Errorf("%w (kid %q)", errUnknownKey, kid)
}

// verifyWith tries the keys kid names (every key when the token names
// none); known reports whether kid named a key in keys at all.
func verifyWith(jws *jose.JSONWebSignature, kid string, keys []jose.JSONWebKey) (payload []byte, known bool) {
	for i := range keys {
		if kid != "" && keys[i].KeyID != kid {
			continue
		}
		known = kid != ""
		if p, err := jws.Verify(&keys[i]); err == nil {
			return p, true
		}
	}
	return nil, known
}

func (k *keySet) cached() ([]jose.JSONWebKey, time.Time, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.keys, k.refreshed, k.lastErr
}

// refresh reads the JWKS once for all concurrent callers. The time gate is
// checked again inside the flight: callers that queued behind a refresh
// that just finished get its keys instead of starting another.
func (k *keySet) refresh(ctx context.Context) ([]jose.JSONWebKey, error) {
	ch := k.flight.DoChan("jwks", func() (any, error) {
		k.mu.Lock()
		if !k.refreshed.IsZero() && k.now().Sub(k.refreshed) < k.minRefresh() {
			keys, err := k.keys, k.lastErr
			k.mu.Unlock()
			return keys, err
		}
		k.mu.Unlock()
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), k.timeout())
		defer cancel()
		keys, err := k.fetch(fctx)
		k.mu.Lock()
		defer k.mu.Unlock()
		k.refreshed = k.now()
		if err != nil {
			// The keys held stay: a JWKS that fails to load says nothing
			// about the keys already known.
			k.lastErr = fmt.Errorf("%w: jwks: %w", ErrIssuerUnavailable, err)
			return nil, k.lastErr
		}
		k.keys, k.lastErr = keys, nil
		return keys, nil
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.([]jose.JSONWebKey), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: jwks: %w", ErrIssuerUnavailable, ctx.Err())
	}
}

// fetch downloads and decodes the JWKS. Keys of a type or algorithm
// go-jose does not support are skipped (RFC 7517 §5: "SHOULD ignore"), and
// so are keys meant for encryption, not signatures.
func (k *keySet) fetch(ctx context.Context) ([]jose.JSONWebKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("answered %d", resp.StatusCode)
	}
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&doc); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	keys := make([]jose.JSONWebKey, 0, len(doc.Keys))
	for _, raw := range doc.Keys {
		var jwk jose.JSONWebKey
		if err := json.Unmarshal(raw, &jwk); err != nil || !jwk.Valid() || !jwk.IsPublic() || (jwk.Use != "" && jwk.Use != "sig") {
			continue
		}
		keys = append(keys, jwk)
	}
	return keys, nil
}
