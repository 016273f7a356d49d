package config

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"

	// Zone data is embedded so access.timezone means the same on every
	// host, including minimal containers without /usr/share/zoneinfo
	// (never the host's idea of time). Costs ~450 KB of binary.
	_ "time/tzdata"

	"changeflow/internal/auditchain"
)

// ErrInvalid marks a configuration the program must not run on: an
// unreadable or unparsable file, or an unusable deployment key such as
// database.driver. Load returns it at startup; Reload returns it and keeps
// the last good snapshot.
var ErrInvalid = errors.New("invalid configuration")

// defaultSQLiteDSN is the embedded default database: WAL for concurrent
// readers, a busy timeout instead of SQLITE_BUSY, foreign keys on, and
// BEGIN IMMEDIATE so write transactions take the lock up front.
const defaultSQLiteDSN = "file:var/changeflow.db?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_txlock=immediate"

// Database drivers.
const (
	DriverSQLite = "sqlite"
	DriverMySQL  = "mysql"
)

func resolveDriver(it *item, r raw, _ map[string]any) result {
	if !r.set {
		return result{val: DriverSQLite, text: DriverSQLite, reason: reasonBuiltin}
	}
	if isBlank(r.v) {
		return result{val: DriverSQLite, text: DriverSQLite, fellBack: true, reason: fellBack("empty → default sqlite")}
	}
	s := strings.ToLower(strings.TrimSpace(text(r.v)))
	switch s {
	case DriverSQLite, DriverMySQL:
		return result{val: s, text: s, reason: builtinOr(r)}
	}
	return result{err: fmt.Errorf("%w: %s %s (from %s) is not sqlite or mysql", ErrInvalid, it.key, quoted(text(r.v)), r.source)}
}

func resolveDSN(it *item, r raw, done map[string]any) result {
	driver, _ := done[KeyDatabaseDriver].(string)
	if !r.set || isBlank(r.v) {
		if driver == DriverMySQL {
			return result{err: fmt.Errorf("%w: %s is empty but database.driver is mysql", ErrInvalid, it.key)}
		}
		if !r.set {
			return result{val: defaultSQLiteDSN, text: defaultSQLiteDSN, reason: reasonBuiltin + " (sqlite)"}
		}
		return result{val: defaultSQLiteDSN, text: defaultSQLiteDSN, fellBack: true, reason: fellBack("empty → default sqlite DSN")}
	}
	s := strings.TrimSpace(text(r.v))
	return result{val: s, text: maskDSN(s), reason: builtinOr(r)}
}

func resolveLogLevel(it *item, r raw, _ map[string]any) result {
	ok := func(l slog.Level, reason string, fb bool) result {
		return result{val: l, text: strings.ToLower(l.String()), fellBack: fb, reason: reason}
	}
	if !r.set {
		return ok(slog.LevelInfo, reasonBuiltin, false)
	}
	if isBlank(r.v) {
		return ok(slog.LevelInfo, fellBack("empty → info"), true)
	}
	switch strings.ToLower(strings.TrimSpace(text(r.v))) {
	case "debug":
		return ok(slog.LevelDebug, builtinOr(r), false)
	case "info":
		return ok(slog.LevelInfo, builtinOr(r), false)
	case "warn", "warning":
		return ok(slog.LevelWarn, builtinOr(r), false)
	case "error":
		return ok(slog.LevelError, builtinOr(r), false)
	}
	return ok(slog.LevelInfo, fellBack("value %s unknown → info", quoted(text(r.v))), true)
}

func resolveInstanceID(it *item, r raw, _ map[string]any) result {
	if !r.set || r.source == SourceDefault {
		return result{val: it.def, text: it.def, reason: reasonBuiltin + " (host name + pid)"}
	}
	if isBlank(r.v) {
		return result{val: it.def, text: it.def, fellBack: true, reason: fellBack("empty → default %s", it.def)}
	}
	s := strings.TrimSpace(text(r.v))
	if strings.ContainsFunc(s, func(c rune) bool { return c <= ' ' || c == 0x7f }) {
		return result{val: it.def, text: it.def, fellBack: true, reason: fellBack("value %s contains whitespace → default %s", quoted(s), it.def)}
	}
	return result{val: s, text: s, reason: builtinOr(r)}
}

// listResult builds the result of a list item whose bad entries are
// dropped: the good ones stay, and the reason names each dropped entry.
func listResult(r raw, good []string, dropped []string, blanks int, val any) result {
	res := result{val: val, text: strings.Join(good, ", "), reason: builtinOr(r)}
	var why []string
	if blanks > 0 {
		why = append(why, fmt.Sprintf("%d blank entr%s", blanks, plural(blanks, "y", "ies")))
	}
	why = append(why, dropped...)
	if len(why) > 0 {
		res.fellBack = true
		res.reason = fellBack("dropped %s", strings.Join(why, "; "))
	}
	return res
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// projectPath is a GitLab namespace/project path: at least one "/", segments
// of letters, digits, _ . -.
func projectPath() *regexp.Regexp {
	return regexp.MustCompile(`^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)+$`)
}

func resolveProjects(it *item, r raw, _ map[string]any) result {
	if !r.set || isBlank(r.v) {
		return emptyList(r, "none", []string{})
	}
	entries, blanks := parseList(r.v)
	re := projectPath()
	good, dropped := []string{}, []string(nil)
	for _, e := range entries {
		if n, err := strconv.ParseInt(e, 10, 64); err == nil {
			if n > 0 {
				good = append(good, strconv.FormatInt(n, 10))
				continue
			}
			dropped = append(dropped, quoted(e)+" (not a positive project id)")
			continue
		}
		if re.MatchString(e) && !strings.Contains(e, "..") {
			good = append(good, e)
			continue
		}
		dropped = append(dropped, quoted(e)+" (not a project id or group/project path)")
	}
	return listResult(r, good, dropped, blanks, good)
}

// emptyList is the result of a list that is missing or empty: the built-in
// default when nobody set it, else a fall-back to "what".
func emptyList(r raw, what string, val any) result {
	if !r.set || r.source == SourceDefault {
		return result{val: val, reason: reasonBuiltin + " (" + what + ")"}
	}
	return result{val: val, fellBack: true, reason: fellBack("empty → %s", what)}
}

func resolveEndpoints(it *item, r raw, _ map[string]any) result {
	if !r.set || isBlank(r.v) {
		return emptyList(r, "no config center", []string{})
	}
	entries, blanks := parseList(r.v)
	if entries == nil {
		entries = []string{}
	}
	return listResult(r, entries, nil, blanks, entries)
}

func resolvePrefix(it *item, r raw, _ map[string]any) result {
	if !r.set {
		return result{val: it.def, text: it.def, reason: reasonBuiltin}
	}
	if isBlank(r.v) {
		return result{val: it.def, text: it.def, fellBack: true, reason: fellBack("empty → default %s", it.def)}
	}
	s := strings.TrimRight(strings.TrimSpace(text(r.v)), "/")
	return result{val: s, text: s, reason: builtinOr(r)}
}

func resolveProxies(it *item, r raw, _ map[string]any) result {
	if l, isList := r.v.([]any); r.set && isList && len(l) == 0 {
		// An explicit [] is a choice (trust no proxy: OIDC only), not a
		// fallback, so a clean start stays clean.
		return result{val: []netip.Prefix{}, reason: builtinOr(r)}
	}
	if !r.set || isBlank(r.v) {
		return emptyList(r, "none: the peer address is the client", []netip.Prefix{})
	}
	entries, blanks := parseList(r.v)
	var good []string
	var dropped []string
	prefixes := []netip.Prefix{}
	for _, e := range entries {
		if p, err := netip.ParsePrefix(e); err == nil {
			p = p.Masked()
			prefixes = append(prefixes, p)
			good = append(good, p.String())
			continue
		}
		if a, err := netip.ParseAddr(e); err == nil {
			a = a.Unmap()
			p := netip.PrefixFrom(a, a.BitLen())
			prefixes = append(prefixes, p)
			good = append(good, p.String())
			continue
		}
		dropped = append(dropped, quoted(e)+" (not an IP or CIDR)")
	}
	return listResult(r, good, dropped, blanks, prefixes)
}

// resolveTimezone loads the zone windows are read in. "Local" is refused:
// Access windows use one fixed zone, never the host's, so the same file means the
// same hours on every instance. An unknown zone yields a nil location, which
// Target.Open treats as "outside every window".
func resolveTimezone(it *item, r raw, _ map[string]any) result {
	if !r.set {
		return result{val: time.UTC, text: "UTC", reason: reasonBuiltin}
	}
	if isBlank(r.v) {
		return result{val: time.UTC, text: "UTC", fellBack: true, reason: fellBack("empty → default UTC")}
	}
	s := strings.TrimSpace(text(r.v))
	if strings.EqualFold(s, "local") {
		return result{val: (*time.Location)(nil), text: s + " (refused)", fellBack: true,
			reason: fellBack("value %s is the host's zone → every window is outside", quoted(s))}
	}
	if strings.EqualFold(s, "utc") {
		return result{val: time.UTC, text: "UTC", reason: builtinOr(r)}
	}
	loc, err := time.LoadLocation(s)
	if err != nil {
		return result{val: (*time.Location)(nil), text: s + " (unknown)", fellBack: true,
			reason: fellBack("zone %s unknown → every window is outside", quoted(s))}
	}
	return result{val: loc, text: loc.String(), reason: builtinOr(r)}
}

// claimNamesNobody reports the registered JWT/OIDC claims that describe
// the token rather than a person: none of them can be oidc.accountClaim.
func claimNamesNobody(name string) bool {
	switch name {
	case "iss", "aud", "azp", "exp", "iat", "nbf", "jti", "nonce", "auth_time", "at_hash", "c_hash",
		"acr", "amr", "sid", "email_verified", "phone_number_verified":
		return true
	}
	return false
}

// resolveClaimName accepts a claim name of letters, digits and "_-.:/"
// (namespaced claims such as "https://corp.example/employee_id" included).
// Anything else falls back to sub, the one claim OIDC promises is stable.
func resolveClaimName(it *item, r raw, _ map[string]any) result {
	ok := func(s, reason string, fb bool) result { return result{val: s, text: s, fellBack: fb, reason: reason} }
	if !r.set {
		return ok(it.def, reasonBuiltin, false)
	}
	if isBlank(r.v) {
		return ok(it.def, fellBack("empty → sub"), true)
	}
	s := strings.TrimSpace(text(r.v))
	if len(s) > 128 || strings.IndexFunc(s, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("_-.:/", c))
	}) >= 0 {
		return ok(it.def, fellBack("value %s is not a claim name → sub", quoted(s)), true)
	}
	if claimNamesNobody(s) {
		return ok(it.def, fellBack("claim %s describes the token, not a person → sub", quoted(s)), true)
	}
	return ok(s, builtinOr(r), false)
}

// resolveAccountField accepts account, email or employeeId in any case and
// yields that canonical spelling.
func resolveAccountField(it *item, r raw, _ map[string]any) result {
	ok := func(s, reason string, fb bool) result { return result{val: s, text: s, fellBack: fb, reason: reason} }
	if !r.set {
		return ok(it.def, reasonBuiltin, false)
	}
	if isBlank(r.v) {
		return ok(it.def, fellBack("empty → account"), true)
	}
	switch v := strings.TrimSpace(text(r.v)); strings.ToLower(v) {
	case "account":
		return ok("account", builtinOr(r), false)
	case "email":
		return ok("email", builtinOr(r), false)
	case "employeeid":
		return ok("employeeId", builtinOr(r), false)
	default:
		return ok(it.def, fellBack("value %s unknown → account", quoted(v)), true)
	}
}

// resolveSigningKey checks audit.signingKey: the value is parsed here, so a
// key that is set but unusable stops the start (or keeps the old snapshot
// on reload) with the item named, instead of failing at the first export.
// Neither the value nor any part of it ever appears in a reason.
func resolveSigningKey(it *item, r raw, _ map[string]any) result {
	if !r.set {
		return result{val: ed25519.PrivateKey(nil), text: "", reason: reasonBuiltin + " (unset)"}
	}
	if isBlank(r.v) {
		return result{val: ed25519.PrivateKey(nil), text: "", fellBack: true, reason: fellBack("empty → unset")}
	}
	key, err := auditchain.ParseSigningKey(text(r.v))
	if err != nil {
		return result{err: fmt.Errorf("%w: %s (from %s) is not an Ed25519 signing key: %v", ErrInvalid, it.key, r.source, err)}
	}
	return result{val: key, text: maskSecret("set"), reason: builtinOr(r)}
}
