package identity

import "strings"

// Kind says what shape a login value has. The login layer hands over
// whatever it holds — an email-style account, an employee ID or the
// account itself — and the directory is keyed by shape.
type Kind int

// Kinds of login value.
const (
	// KindInvalid is a value no adapter may use: empty, too long, not
	// ASCII, or containing characters no account, email or ID has.
	KindInvalid Kind = iota
	// KindAccount is a canonical-account-shaped value ("alice").
	KindAccount
	// KindEmail is an email-style account ("alice@corp.example").
	KindEmail
	// KindEmployeeID is a value that might be an employee number: an
	// optional letter and at least three digits ("E10023", "10023").
	KindEmployeeID
)

// String names the kind for logs.
func (k Kind) String() string {
	switch k {
	case KindAccount:
		return "account"
	case KindEmail:
		return "email"
	case KindEmployeeID:
		return "employeeId"
	default:
		return "invalid"
	}
}

// Login is a normalized login value.
type Login struct {
	Kind Kind
	// Value is the normalized form: accounts and emails lower-case,
	// employee IDs upper-case, all trimmed; "" when Kind is KindInvalid.
	Value string
}

// Length limits of the normalized forms (RFC 5321 for email).
const (
	maxEmailLen      = 254
	maxEmailLocalLen = 64
	maxAccountLen    = 64
	maxEmployeeIDLen = 16
)

// Normalize classifies and normalizes one login value: trimmed, emails
// and accounts lower-cased (email matching is case-insensitive in
// practice, and accounts are names), employee IDs upper-cased. Only ASCII
// is accepted: Unicode case folding maps look-alikes onto each other (the
// Kelvin sign lower-cases to "k"), and a login that could fold onto
// someone else's account must fail rather than resolve. Normalize is
// idempotent: Normalize(Normalize(x).Value) == Normalize(x) for every
// valid x (FuzzNormalize).
func Normalize(raw string) Login {
	s := strings.TrimSpace(raw)
	if s == "" || len(s) > maxEmailLen {
		return Login{}
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f {
			return Login{}
		}
	}
	if strings.Contains(s, "@") {
		return normalizeEmail(s)
	}
	if isEmployeeID(s) {
		return Login{Kind: KindEmployeeID, Value: strings.ToUpper(s)}
	}
	if a, ok := normalizeAccount(s); ok {
		return Login{Kind: KindAccount, Value: a}
	}
	return Login{}
}

// normalizeEmail accepts local@domain with one "@", a dot-atom local part
// and a dotted domain of letters, digits and hyphens.
func normalizeEmail(s string) Login {
	local, domain, ok := strings.Cut(strings.ToLower(s), "@")
	if !ok || strings.Contains(domain, "@") || local == "" || len(local) > maxEmailLocalLen || domain == "" {
		return Login{}
	}
	if !dotted(local, isLocalChar) || !dotted(domain, isDomainChar) {
		return Login{}
	}
	for label := range strings.SplitSeq(domain, ".") {
		if label[0] == '-' || label[len(label)-1] == '-' {
			return Login{}
		}
	}
	return Login{Kind: KindEmail, Value: local + "@" + domain}
}

// dotted reports whether s is non-empty labels of ok characters joined by
// single dots.
func dotted(s string, ok func(byte) bool) bool {
	for label := range strings.SplitSeq(s, ".") {
		if label == "" {
			return false
		}
		for i := 0; i < len(label); i++ {
			if !ok(label[i]) {
				return false
			}
		}
	}
	return true
}

func isLocalChar(c byte) bool {
	return isLowerAlnum(c) || strings.IndexByte("!#$%&'*+/=?^_`{|}~-", c) >= 0
}

func isDomainChar(c byte) bool { return isLowerAlnum(c) || c == '-' }

func isLowerAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

// isEmployeeID: an optional ASCII letter, then three or more digits.
func isEmployeeID(s string) bool {
	if len(s) > maxEmployeeIDLen {
		return false
	}
	d := s
	if c := s[0]; c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
		d = s[1:]
	}
	if len(d) < 3 {
		return false
	}
	for i := 0; i < len(d); i++ {
		if d[i] < '0' || d[i] > '9' {
			return false
		}
	}
	return true
}

// normalizeAccount lower-cases s and accepts a letter or digit followed by
// letters, digits, ".", "_" and "-". It does not look at the employee-ID
// shape: the directory's own account column goes through it too.
func normalizeAccount(s string) (string, bool) {
	a := strings.ToLower(strings.TrimSpace(s))
	if a == "" || len(a) > maxAccountLen || !isLowerAlnum(a[0]) {
		return "", false
	}
	for i := 1; i < len(a); i++ {
		if c := a[i]; !isLowerAlnum(c) && c != '.' && c != '_' && c != '-' {
			return "", false
		}
	}
	return a, true
}
