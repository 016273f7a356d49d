package config

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// item is one known configuration key: its default, bounds, how a raw value
// is resolved, and the documentation row that explains the fallback. The
// docs table in docs/configuration.md is generated from these rows, so the
// code and the guide cannot drift apart.
type item struct {
	key      string
	typ      string        // docs: type and unit
	def      string        // default as text, parsed by resolve; "" = none
	min, max int64         // ints: bounds; durations: bounds in nanoseconds; max 0 = none
	unit     time.Duration // durations: what a bare integer counts
	restart  bool          // read once at startup: a change logs "restart required"
	secret   bool          // value masked everywhere
	noLayer  bool          // default is not put in the defaults layer (computed by the resolver)
	fallback string        // docs: what missing/empty/malformed resolves to
	why      string        // docs: the consequence of misconfiguration that chose it
	resolve  func(it *item, r raw, done map[string]any) result
}

// builtinOr returns the Reason for a value that was configured and valid:
// empty, unless nobody configured it and it is the built-in default.
func builtinOr(r raw) string {
	if !r.set || r.source == SourceDefault {
		return reasonBuiltin
	}
	return ""
}

func durItem(key string, def, minimum time.Duration, unit time.Duration, restart bool, why string) item {
	unitName := "seconds"
	if unit == time.Millisecond {
		unitName = "milliseconds"
	}
	clamp := fmt.Sprintf("negative or below %s → %s", fmtDur(minimum), fmtDur(minimum))
	if minimum == 0 {
		clamp = "negative → 0"
	}
	return item{
		key: key, typ: "duration (bare integer = " + unitName + ")", def: fmtDur(def),
		min: int64(minimum), unit: unit, restart: restart,
		fallback: fmt.Sprintf("missing/empty/malformed → %s; %s", fmtDur(def), clamp),
		why:      why, resolve: resolveDuration,
	}
}

func resolveDuration(it *item, r raw, _ map[string]any) result {
	def, _ := parseDuration(it.def, time.Second)
	ok := func(d time.Duration, reason string, fb bool) result {
		return result{val: d, text: fmtDur(d), fellBack: fb, reason: reason}
	}
	if !r.set {
		return ok(def, reasonBuiltin, false)
	}
	if isBlank(r.v) {
		return ok(def, fellBack("empty → default %s", fmtDur(def)), true)
	}
	d, why := parseDuration(r.v, it.unit)
	if why != "" {
		return ok(def, fellBack("value %s %s → default %s", quoted(text(r.v)), why, fmtDur(def)), true)
	}
	minimum := time.Duration(it.min)
	switch {
	case d < 0:
		return ok(minimum, fellBack("value %s negative → clamped to %s", quoted(text(r.v)), fmtDur(minimum)), true)
	case d < minimum:
		return ok(minimum, fellBack("value %s below minimum %s → clamped to %s", quoted(text(r.v)), fmtDur(minimum), fmtDur(minimum)), true)
	case it.max > 0 && d > time.Duration(it.max):
		maximum := time.Duration(it.max)
		return ok(maximum, fellBack("value %s above maximum %s → clamped to %s", quoted(text(r.v)), fmtDur(maximum), fmtDur(maximum)), true)
	}
	return ok(d, builtinOr(r), false)
}

func intItem(key string, def, minimum, maximum int64, restart bool, why string) item {
	fb := fmt.Sprintf("missing/empty/non-numeric → %d; negative or below %d → %d", def, minimum, minimum)
	if minimum == 0 {
		fb = fmt.Sprintf("missing/empty/non-numeric → %d; negative → 0", def)
	}
	if maximum > 0 {
		fb += fmt.Sprintf("; above %d → %d", maximum, maximum)
	}
	return item{
		key: key, typ: "integer", def: strconv.FormatInt(def, 10),
		min: minimum, max: maximum, restart: restart,
		fallback: fb, why: why, resolve: resolveInt,
	}
}

func resolveInt(it *item, r raw, _ map[string]any) result {
	def, _ := strconv.Atoi(it.def)
	ok := func(n int, reason string, fb bool) result {
		return result{val: n, text: strconv.Itoa(n), fellBack: fb, reason: reason}
	}
	if !r.set {
		return ok(def, reasonBuiltin, false)
	}
	if isBlank(r.v) {
		return ok(def, fellBack("empty → default %d", def), true)
	}
	n, why := parseInt(r.v)
	if why != "" {
		return ok(def, fellBack("value %s %s → default %d", quoted(text(r.v)), why, def), true)
	}
	switch {
	case n < 0 && n < it.min:
		return ok(int(it.min), fellBack("value %s negative → clamped to %d", quoted(text(r.v)), it.min), true)
	case n < it.min:
		return ok(int(it.min), fellBack("value %s below minimum %d → clamped to %d", quoted(text(r.v)), it.min, it.min), true)
	case it.max > 0 && n > it.max:
		return ok(int(it.max), fellBack("value %s above maximum %d → clamped to %d", quoted(text(r.v)), it.max, it.max), true)
	}
	return ok(int(n), builtinOr(r), false)
}

func boolItem(key string, def bool, restart bool, why string) item {
	d := strconv.FormatBool(def)
	return item{
		key: key, typ: "boolean", def: d, restart: restart,
		fallback: "missing/empty/malformed → " + d,
		why:      why, resolve: resolveBool,
	}
}

func resolveBool(it *item, r raw, _ map[string]any) result {
	def := it.def == "true"
	ok := func(b bool, reason string, fb bool) result {
		return result{val: b, text: strconv.FormatBool(b), fellBack: fb, reason: reason}
	}
	if !r.set {
		return ok(def, reasonBuiltin, false)
	}
	if isBlank(r.v) {
		return ok(def, fellBack("empty → default %t", def), true)
	}
	b, why := parseBool(r.v)
	if why != "" {
		return ok(def, fellBack("value %s %s → default %t", quoted(text(r.v)), why, def), true)
	}
	return ok(b, builtinOr(r), false)
}

// stringItem is free text: blank → def. Secret strings never echo their
// value in a reason.
func stringItem(key, def string, restart bool, fallback, why string) item {
	return item{key: key, typ: "string", def: def, restart: restart, fallback: fallback, why: why, resolve: resolveString}
}

// withType replaces an item's type column, for an item whose plain type
// ("string") does not say what the value must hold.
func withType(it item, typ string) item {
	it.typ = typ
	return it
}

func resolveString(it *item, r raw, _ map[string]any) result {
	show := func(s string) string {
		if it.secret {
			return maskSecret(s)
		}
		return s
	}
	if !r.set {
		return result{val: it.def, text: show(it.def), reason: reasonBuiltin}
	}
	if isBlank(r.v) {
		if it.def == "" {
			return result{val: "", text: "", fellBack: true, reason: fellBack("empty → unset")}
		}
		return result{val: it.def, text: show(it.def), fellBack: true, reason: fellBack("empty → default %s", show(it.def))}
	}
	s := strings.TrimSpace(text(r.v))
	return result{val: s, text: show(s), reason: builtinOr(r)}
}

// urlItem is the base URL of a dependency. A value that is not an absolute
// http(s) URL is treated as unset: calling a half-parsed URL would fail
// later and less clearly, while "not configured" is an explicit state.
func urlItem(key string, why string) item {
	return item{
		key: key, typ: "URL (absolute http/https)", restart: true,
		fallback: "missing/empty → unset; not an absolute http(s) URL → unset (dependency not configured)",
		why:      why, resolve: resolveURL,
	}
}

func resolveURL(it *item, r raw, _ map[string]any) result {
	if !r.set {
		return result{val: "", text: "", reason: reasonBuiltin + " (unset)"}
	}
	if isBlank(r.v) {
		return result{val: "", fellBack: true, reason: fellBack("empty → unset")}
	}
	s := strings.TrimSpace(text(r.v))
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return result{val: "", fellBack: true, reason: fellBack("value %s not an absolute http(s) URL → unset", quoted(s))}
	}
	if u.User != nil {
		// A password in a URL would be printed by /ops/config; mask it
		// rather than refuse the value.
		return result{val: s, text: maskURL(u), reason: builtinOr(r)}
	}
	return result{val: s, text: s, reason: builtinOr(r)}
}

// simURLItem is a dependency's base URL that the embedded simulators can
// stand in for: with sim.embedded on and the URL not configured (missing,
// empty or malformed), it is derived from sim.listen plus the simulator's
// mount path. One port setting then moves the whole local run; a URL set
// explicitly still wins, so a local run can point one dependency at a
// real system. Without sim.embedded it is a plain urlItem.
func simURLItem(key, mount, why string) item {
	it := urlItem(key, why)
	it.fallback = "missing/empty → unset; not an absolute http(s) URL → unset (dependency not configured); " +
		"either way, with sim.embedded on: http://<sim.listen>" + mount
	it.resolve = func(it *item, r raw, done map[string]any) result {
		res := resolveURL(it, r, done)
		if res.val != "" {
			return res
		}
		embedded, _ := done[KeySimEmbedded].(bool)
		listen, _ := done[KeySimListen].(string)
		base := LocalURL(listen)
		if !embedded || base == "" {
			return res
		}
		u := base + mount
		reason := "derived from sim.listen (sim.embedded on)"
		if res.fellBack {
			reason = res.reason + "; " + reason
		}
		return result{val: u, text: u, fellBack: res.fellBack, reason: reason}
	}
	return it
}

// LocalURL is the base URL a client on this machine uses to reach a
// listener on listen (host:port) — the embedded simulators, or the service
// itself for `changeflow healthcheck`: a wildcard or empty host is reached
// over loopback. It is "" when the address is malformed or its
// port is chosen at start (":0"), which the configuration cannot know; the
// dependency URLs must then be set explicitly.
func LocalURL(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil || port == "" || port == "0" {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// resolveListen accepts host:port (host may be empty for all interfaces).
// A malformed address falls back to the loopback default, which never
// exposes more than intended; the service is then visibly unreachable from
// outside rather than listening somewhere surprising.
func resolveListen(it *item, r raw, _ map[string]any) result {
	if !r.set {
		return result{val: it.def, text: it.def, reason: reasonBuiltin}
	}
	if isBlank(r.v) {
		return result{val: it.def, text: it.def, fellBack: true, reason: fellBack("empty → default %s", it.def)}
	}
	s := strings.TrimSpace(text(r.v))
	_, port, err := net.SplitHostPort(s)
	if err == nil {
		var p int
		p, err = strconv.Atoi(port)
		if err == nil && (p < 0 || p > 65535) {
			err = fmt.Errorf("port out of range")
		}
	}
	if err != nil {
		return result{val: it.def, text: it.def, fellBack: true, reason: fellBack("value %s not host:port → default %s", quoted(s), it.def)}
	}
	return result{val: s, text: s, reason: builtinOr(r)}
}
