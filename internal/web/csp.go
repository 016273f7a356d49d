package web

import (
	"crypto/sha256"
	"encoding/base64"
	"regexp"
	"strings"
)

// inlineScript finds the <script> elements of the entry page. A script
// element's text ends at the first "</script", whatever it contains, so a
// non-greedy match ends exactly where the browser's parser ends it.
var inlineScript = regexp.MustCompile(`(?is)<script\b([^>]*)>(.*?)</script`)

// srcAttribute tells an external script (whose content the hash does not
// cover; 'self' allows it) from an inline one.
var srcAttribute = regexp.MustCompile(`(?i)(^|\s)src\s*=`)

// inlineScriptHashes returns the CSP source expression ('sha256-…') of
// every inline script of page, in page order. The browser hashes the
// script's text after it normalized line breaks (CR LF and lone CR become
// LF), so the same is done here; an empty inline script is hashed too
// (the browser would need it as well).
func inlineScriptHashes(page []byte) []string {
	var out []string
	for _, m := range inlineScript.FindAllSubmatch(page, -1) {
		if srcAttribute.Match(m[1]) {
			continue
		}
		text := strings.ReplaceAll(string(m[2]), "\r\n", "\n")
		text = strings.ReplaceAll(text, "\r", "\n")
		sum := sha256.Sum256([]byte(text))
		out = append(out, "'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'")
	}
	return out
}

// pagePolicy is the Content-Security-Policy of the app's responses, built
// once from the embedded entry page so the hash always matches the build
// that is served: no 'unsafe-inline' anywhere; scripts only from our origin
// and the inline release-safety guard by its hash (it must run before any
// asset loads, docs/webapp.md); styles only from our origin (the guard and
// the app style elements through the DOM, which CSP does not restrict);
// API calls only to our origin; no plugins, no <base> rewriting, forms only
// to us, and no framing by anyone (clickjacking).
func pagePolicy(index []byte, connect ...string) string {
	scripts := append([]string{"'self'"}, inlineScriptHashes(index)...)
	return strings.Join([]string{
		"default-src 'self'",
		"script-src " + strings.Join(scripts, " "),
		"style-src 'self'",
		"img-src 'self' data:",
		"connect-src " + strings.Join(append([]string{"'self'"}, connect...), " "),
		"object-src 'none'",
		"base-uri 'none'",
		"form-action 'self'",
		"frame-ancestors 'none'",
	}, "; ")
}

// ContentSecurityPolicy is the policy h sends with every response: the
// entry page's inline scripts allowed by hash, nothing else inline (plus
// the origins of WithConnectSources, when set).
func (h *Handler) ContentSecurityPolicy() string {
	if h.connect == nil {
		return h.csp
	}
	return pagePolicy(h.index.body, h.connect()...)
}

// WithConnectSources returns a copy of h whose policy also lets the app
// call the origins f returns, read per response so a reload applies: the
// OIDC issuer, whose discovery document and token endpoint the app fetches
// itself (sign-in with PKCE). f must return origins only
// ("https://idp.example"), never wildcards.
func (h *Handler) WithConnectSources(f func() []string) *Handler {
	c := *h
	c.connect = f
	return &c
}
