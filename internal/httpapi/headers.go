package httpapi

import "net/http"

// apiPolicy is the Content-Security-Policy of every response that is not
// one of the web app's (JSON, /metrics): such a response is never a page,
// so if a browser is tricked into rendering one, nothing in it may run,
// load or be framed. The web app's handler replaces it with its own policy
// (internal/web, csp.go), which allows the app's scripts.
const apiPolicy = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// permissionsPolicy turns off the powerful browser features the app never
// uses, so a script that got in anyway could not ask for them either.
const permissionsPolicy = "camera=(), microphone=(), geolocation=(), payment=(), usb=(), serial=(), " +
	"bluetooth=(), hid=(), midi=(), display-capture=(), screen-wake-lock=(), publickey-credentials-get=()"

// securityHeaders sets the browser-hardening headers on every response
// before the handler runs, so error pages, 404s and panics' 500s carry
// them too:
//   - Content-Security-Policy: apiPolicy (the app's handler overrides it);
//   - X-Frame-Options: DENY, the frame-ancestors 'none' of browsers older
//     than CSP level 2;
//   - Referrer-Policy: no-referrer — the app's URLs carry operationIds and
//     target keys, which must not leave with a click on an MR link;
//   - Permissions-Policy: permissionsPolicy.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h["Content-Security-Policy"] = apiPolicyValue
		h["X-Frame-Options"] = denyValue
		h["Referrer-Policy"] = noReferrerValue
		h["Permissions-Policy"] = permissionsPolicyValue
		next.ServeHTTP(w, r)
	})
}

// The values of the headers every response carries, assigned to the
// header map (canonical keys) instead of Set: Set allocates a one-element
// slice per header and request, six of a status read's allocations
// (docs/benchmarks.md, "Status read"). Sharing one slice between responses
// is safe because nothing writes into a header's slice: Set and Del
// replace it, and Add appends to it, which copies a full slice — and a
// one-element slice literal is full (len 1, cap 1).
// TestSharedHeaderValuesStayUnchanged performs those on one response and
// reads the next.
var (
	apiPolicyValue         = []string{apiPolicy}
	denyValue              = []string{"DENY"}
	noReferrerValue        = []string{"no-referrer"}
	permissionsPolicyValue = []string{permissionsPolicy}
	jsonContentTypeValue   = []string{"application/json; charset=utf-8"}
	nosniffValue           = []string{"nosniff"}
)
