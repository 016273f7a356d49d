package oidc

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"html/template"
	"net/http"
	"net/url"
	"time"

	"changeflow/internal/sim/simhttp"
)

// The login flow: authorization code with PKCE (RFC 6749 §4.1, RFC 7636),
// what a single-page app — a public client, no secret — uses. /authorize
// shows a page where a person picks who to be (there are no passwords: it
// is a simulator); the choice redirects back with a one-time code, and
// /token exchanges the code and the PKCE verifier for an ID token signed
// like those of POST /_control/token, its audience the client ID.
//
// Only S256 challenges are accepted (plain PKCE protects nothing when the
// challenge can be read), a code is good once and for codeTTL, and a
// redirect_uri that is not one of the registered ones
// (Options.RedirectURIs) is never redirected to: the error is shown on the
// page instead. Without the list, any page could start a login for the
// person at the keyboard and receive the code at its own address.

// User is a quick pick on the login page.
type User struct {
	Sub   string
	Email string
	Name  string
}

// LocalUsers are the local directory's accounts
// (cmd/changeflow/local/directory.yaml). The subject is the canonical
// account, because changeflow's default (oidc.accountClaim sub, matched on
// the account field) takes the account from sub alone; the email comes
// verified beside it, for display.
func LocalUsers() []User {
	return []User{
		{Sub: "alice", Email: "alice@corp.example", Name: "Alice Example"},
		{Sub: "bob", Email: "bob@corp.example", Name: "Bob Example"},
		{Sub: "olivia", Email: "olivia@corp.example", Name: "Olivia Operator"},
		{Sub: "adam", Email: "adam@corp.example", Name: "Adam Admin"},
	}
}

// codeTTL is how long an authorization code can be exchanged.
const codeTTL = time.Minute

// grant is an issued authorization code.
type grant struct {
	clientID, redirectURI, challenge, nonce string
	user                                    User
	expires                                 time.Time
}

// authzRequest is /authorize's parameters.
type authzRequest struct {
	ClientID, RedirectURI, State, Challenge, Nonce, Scope string
}

// parseAuthz validates an authorization request; the error is for the page.
func (s *Server) parseAuthz(v url.Values) (authzRequest, string) {
	a := authzRequest{
		ClientID: v.Get("client_id"), RedirectURI: v.Get("redirect_uri"), State: v.Get("state"),
		Challenge: v.Get("code_challenge"), Nonce: v.Get("nonce"), Scope: v.Get("scope"),
	}
	u, err := url.Parse(a.RedirectURI)
	switch {
	case a.RedirectURI == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Fragment != "":
		return a, "redirect_uri must be an absolute http(s) URL without a fragment."
	case !s.registered(a.RedirectURI):
		return a, "redirect_uri is not registered with this issuer (see PUT /_control/redirect_uris in docs/simulators.md)."
	case v.Get("response_type") != "code":
		return a, "response_type must be code (the authorization code flow)."
	case a.ClientID == "":
		return a, "client_id is required."
	case a.Challenge == "" || v.Get("code_challenge_method") != "S256":
		return a, "PKCE is required: code_challenge with code_challenge_method S256."
	}
	return a, ""
}

var loginTmpl = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in — OIDC simulator</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:15px/1.45 system-ui,sans-serif;margin:40px auto;color:#1d2733;max-width:520px}
.card{border:1px solid #d9dee5;border-radius:6px;padding:20px}
button{font:inherit;padding:6px 14px;border-radius:4px;border:1px solid #2b5d9b;background:#2b5d9b;color:#fff;cursor:pointer;margin:4px 0;width:100%;text-align:left}
input{font:inherit;padding:6px 8px;border:1px solid #d9dee5;border-radius:4px;width:100%;box-sizing:border-box;margin:4px 0}
.muted{color:#5b6673}.error{background:#fbe6e2;border:1px solid #e6b3a8;padding:10px 14px;border-radius:4px}
</style></head><body>
<h1>Sign in</h1>
{{if .Error}}<p class="error" role="alert">{{.Error}}</p>{{else}}
<div class="card">
<p class="muted">The OIDC issuer simulator (docs/simulators.md): no passwords — pick who you are, and <strong>{{.Req.ClientID}}</strong> receives a signed ID token for that person.</p>
{{range .Users}}<form method="post" action="authorize">{{template "hidden" $.Req}}<input type="hidden" name="sub" value="{{.Sub}}"><input type="hidden" name="email" value="{{.Email}}"><input type="hidden" name="name" value="{{.Name}}"><button type="submit" data-sub="{{.Sub}}">{{.Name}} <span>({{.Sub}})</span></button></form>
{{end}}
<form method="post" action="authorize">{{template "hidden" .Req}}
<p class="muted">Or any subject (with changeflow's defaults, the subject is the account):</p>
<input name="sub" placeholder="subject, e.g. alice" required aria-label="subject"><input name="email" placeholder="email (optional)" aria-label="email">
<button type="submit">Sign in</button></form>
</div>{{end}}
</body></html>
{{define "hidden"}}<input type="hidden" name="response_type" value="code"><input type="hidden" name="client_id" value="{{.ClientID}}"><input type="hidden" name="redirect_uri" value="{{.RedirectURI}}"><input type="hidden" name="state" value="{{.State}}"><input type="hidden" name="code_challenge" value="{{.Challenge}}"><input type="hidden" name="code_challenge_method" value="S256"><input type="hidden" name="nonce" value="{{.Nonce}}"><input type="hidden" name="scope" value="{{.Scope}}">{{end}}
`))

// handleAuthorizePage is GET /authorize: the login page.
func (s *Server) handleAuthorizePage(w http.ResponseWriter, r *http.Request) {
	req, problem := s.parseAuthz(r.URL.Query())
	status := http.StatusOK
	if problem != "" {
		status = http.StatusBadRequest
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if err := loginTmpl.Execute(w, struct {
		Req   authzRequest
		Users []User
		Error string
	}{req, s.opts.Users, problem}); err != nil {
		s.logger.Warn("oidc login page", "err", err)
	}
}

// handleAuthorize is POST /authorize: the person picked a subject; issue
// a code and send the browser back to the client.
func (s *Server) handleAuthorize(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "malformed form", http.StatusBadRequest)
		return
	}
	req, problem := s.parseAuthz(r.PostForm)
	if problem == "" && r.PostForm.Get("sub") == "" {
		problem = "Pick a user or enter a subject."
	}
	if problem != "" {
		http.Error(w, problem, http.StatusBadRequest)
		return
	}
	var b [24]byte
	_, _ = rand.Read(b[:])
	code := hex.EncodeToString(b[:])
	s.mu.Lock()
	s.pruneGrantsLocked(time.Now())
	s.grants[code] = grant{
		clientID: req.ClientID, redirectURI: req.RedirectURI, challenge: req.Challenge, nonce: req.Nonce,
		user:    User{Sub: r.PostForm.Get("sub"), Email: r.PostForm.Get("email"), Name: r.PostForm.Get("name")},
		expires: time.Now().Add(codeTTL),
	}
	s.mu.Unlock()
	u, _ := url.Parse(req.RedirectURI) // validated by parseAuthz
	q := u.Query()
	q.Set("code", code)
	if req.State != "" {
		q.Set("state", req.State)
	}
	u.RawQuery = q.Encode()
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
}

func (s *Server) pruneGrantsLocked(now time.Time) {
	for c, g := range s.grants {
		if now.After(g.expires) {
			delete(s.grants, c)
		}
	}
}

// tokenError answers /token's errors in RFC 6749 §5.2's shape.
func tokenError(w http.ResponseWriter, code, description string) {
	w.Header().Set("Cache-Control", "no-store")
	simhttp.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": code, "error_description": description})
}

// handleToken is POST /token (application/x-www-form-urlencoded):
// grant_type=authorization_code, code, redirect_uri, client_id,
// code_verifier. The code is consumed by the first attempt, right or
// wrong, so a stolen code cannot be tried against verifiers.
func (s *Server) handleToken(w http.ResponseWriter, r *http.Request) {
	allowCORS(w)
	if err := r.ParseForm(); err != nil {
		tokenError(w, "invalid_request", "malformed form body")
		return
	}
	f := r.PostForm
	if f.Get("grant_type") != "authorization_code" {
		tokenError(w, "unsupported_grant_type", "only authorization_code is supported")
		return
	}
	s.mu.Lock()
	g, ok := s.grants[f.Get("code")]
	delete(s.grants, f.Get("code"))
	s.mu.Unlock()
	sum := sha256.Sum256([]byte(f.Get("code_verifier")))
	switch {
	case !ok || time.Now().After(g.expires):
		tokenError(w, "invalid_grant", "unknown, used or expired code")
		return
	case f.Get("client_id") != g.clientID || f.Get("redirect_uri") != g.redirectURI:
		tokenError(w, "invalid_grant", "client_id or redirect_uri differ from the authorization request")
		return
	case subtle.ConstantTimeCompare([]byte(base64.RawURLEncoding.EncodeToString(sum[:])), []byte(g.challenge)) != 1:
		tokenError(w, "invalid_grant", "code_verifier does not match the code_challenge")
		return
	}
	claims := map[string]any{}
	if g.nonce != "" {
		claims["nonce"] = g.nonce
	}
	tok, err := s.Mint(TokenRequest{Sub: g.user.Sub, Email: g.user.Email, Name: g.user.Name, Aud: Audience{g.clientID}, Claims: claims})
	if err != nil {
		simhttp.WriteError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	simhttp.WriteJSON(w, http.StatusOK, map[string]any{
		"access_token": tok.Token,
		"id_token":     tok.Token,
		"token_type":   "Bearer",
		"expires_in":   int(time.Until(tok.ExpiresAt).Seconds()),
	})
}

// allowCORS lets a single-page app on another origin read discovery, the
// JWKS and the token answer, as real issuers do for public clients.
func allowCORS(w http.ResponseWriter) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
}

// handlePreflight answers CORS preflights of /token.
func (s *Server) handlePreflight(w http.ResponseWriter, r *http.Request) {
	allowCORS(w)
	w.Header().Set("Access-Control-Allow-Methods", "POST")
	w.Header().Set("Access-Control-Allow-Headers", "Content-Type")
	w.WriteHeader(http.StatusNoContent)
}
