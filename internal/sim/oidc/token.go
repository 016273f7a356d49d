package oidc

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// TokenRequest asks for a token for one user.
type TokenRequest struct {
	// Sub is the subject claim: an email-style account or an employee ID.
	Sub   string `json:"sub"`
	Email string `json:"email,omitempty"`
	Name  string `json:"name,omitempty"`
	// Aud is a string or a list; default Options.DefaultAudience.
	Aud Audience `json:"aud,omitempty"`
	// TTL is seconds (a number) or a Go duration ("15m"); default 1 h. A
	// negative TTL mints a token that has already expired.
	TTL TTL `json:"ttl,omitzero"`
	// IssuedIn shifts iat from now (seconds or a Go duration; positive =
	// in the future), to mint the forward-dated tokens a verifier must
	// refuse; nbf stays at the earlier of iat and now.
	IssuedIn TTL `json:"issuedIn,omitzero"`
	// Claims are extra claims; they cannot override iss, sub, aud, exp,
	// iat, nbf.
	Claims map[string]any `json:"claims,omitempty"`
}

// Token is a minted token.
type Token struct {
	Token     string    `json:"token"`
	TokenType string    `json:"tokenType"`
	Kid       string    `json:"kid"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// Audience is one or several audiences.
type Audience []string

// UnmarshalJSON accepts "a" or ["a","b"].
func (a *Audience) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*a = Audience{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("aud must be a string or a list of strings")
	}
	*a = many
	return nil
}

// TTL is a token lifetime given as seconds or a Go duration string.
type TTL struct{ time.Duration }

// UnmarshalJSON accepts 3600 or "1h".
func (t *TTL) UnmarshalJSON(b []byte) error {
	var secs float64
	if err := json.Unmarshal(b, &secs); err == nil {
		t.Duration = time.Duration(secs * float64(time.Second))
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New("ttl must be seconds or a duration string")
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		if n, err2 := strconv.ParseFloat(s, 64); err2 == nil {
			d = time.Duration(n * float64(time.Second))
		} else {
			return fmt.Errorf("ttl: %w", err)
		}
	}
	t.Duration = d
	return nil
}

// Mint signs a token for req with the current signing key.
func (s *Server) Mint(req TokenRequest) (Token, error) {
	if req.Sub == "" {
		return Token{}, errors.New("sub is required")
	}
	ttl := req.TTL.Duration
	if ttl == 0 {
		ttl = time.Hour
	}
	aud := req.Aud
	if len(aud) == 0 {
		aud = Audience{s.opts.DefaultAudience}
	}
	now := time.Now()
	exp := now.Add(ttl)
	iat := now.Add(req.IssuedIn.Duration)
	if ttl < 0 {
		iat = exp.Add(-time.Hour) // an expired token was issued before it expired
	}
	nbf := iat
	if nbf.After(now) {
		nbf = now
	}
	claims := map[string]any{}
	maps.Copy(claims, req.Claims)
	if req.Email != "" {
		claims["email"] = req.Email
		claims["email_verified"] = true
	}
	if req.Name != "" {
		claims["name"] = req.Name
	}
	if _, ok := claims["preferred_username"]; !ok {
		claims["preferred_username"] = req.Sub
	}

	s.mu.Lock()
	if err := s.firstKeyLocked(); err != nil {
		s.mu.Unlock()
		return Token{}, err
	}
	k := s.keys[len(s.keys)-1]
	claims["iss"] = s.issuer
	s.mu.Unlock()
	claims["sub"] = req.Sub
	if len(aud) == 1 {
		claims["aud"] = aud[0]
	} else {
		claims["aud"] = []string(aud)
	}
	claims["iat"] = iat.Unix()
	claims["nbf"] = nbf.Unix()
	claims["exp"] = exp.Unix()

	payload, err := json.Marshal(claims)
	if err != nil {
		return Token{}, fmt.Errorf("claims: %w", err)
	}
	signer, err := jose.NewSigner(
		jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: k.priv, KeyID: k.kid, Algorithm: string(jose.RS256), Use: "sig"}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return Token{}, fmt.Errorf("signer: %w", err)
	}
	obj, err := signer.Sign(payload)
	if err != nil {
		return Token{}, fmt.Errorf("sign: %w", err)
	}
	tok, err := obj.CompactSerialize()
	if err != nil {
		return Token{}, fmt.Errorf("serialize: %w", err)
	}
	return Token{Token: tok, TokenType: "Bearer", Kid: k.kid, ExpiresAt: time.Unix(exp.Unix(), 0).UTC()}, nil
}
