package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// raw is one key's merged value before resolution: what the winning layer
// said (any YAML type, or a string from env/etcd) and which layer that was.
type raw struct {
	v      any
	set    bool
	source string
}

// result is what a resolver makes of a raw value. err is only ever set for
// deployment keys the program must not start on (database.driver/dsn).
type result struct {
	val      any
	text     string
	fellBack bool
	reason   string
	err      error
}

// Source names, as they appear in Resolution.Source.
const (
	SourceDefault = "default"
	SourceFile    = "file"
	SourceEnv     = "env"
	SourceEtcd    = "etcd"
	SourceOverlay = "overlay"
)

// reasonBuiltin is the Reason of an item nobody configured: not a fall-back,
// but /ops/config still says where the value came from.
const reasonBuiltin = "built-in default"

// fellBack formats a Reason in the one shape the docs and tests use:
// "fell back: value 'OPNE' unknown → CLOSED".
func fellBack(format string, args ...any) string {
	return "fell back: " + fmt.Sprintf(format, args...)
}

// quoted shows an operator's value in a reason, cut short so one huge value
// cannot flood the log. Never call it with a secret.
func quoted(s string) string {
	const max = 64
	if len(s) > max {
		s = s[:max] + "…"
	}
	return "'" + s + "'"
}

// text turns any layer value into the string an operator would have typed.
// Scalar items reject what is not a scalar by failing to parse this text.
// YAML gives ints, floats, bools, lists and timestamps; env and etcd give
// strings; all go through the same parsers as text.
func text(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case uint64:
		return strconv.FormatUint(x, 10)
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e15 {
			return strconv.FormatInt(int64(x), 10)
		}
		return strconv.FormatFloat(x, 'f', -1, 64)
	case time.Time:
		return x.Format(time.RFC3339)
	case []any:
		parts := make([]string, 0, len(x))
		for _, e := range x {
			parts = append(parts, text(e))
		}
		// Brackets keep a list from passing as the scalar inside it:
		// accessMode: [OPEN] is malformed (→ CLOSED), not OPEN.
		return "[" + strings.Join(parts, ", ") + "]"
	case map[string]any:
		return "{…}"
	default:
		return fmt.Sprint(x)
	}
}

// isBlank reports whether a raw value carries nothing: missing, YAML null,
// "" or only whitespace. Blank values fall back to the item's default.
func isBlank(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return strings.TrimSpace(x) == ""
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

// parseInt reads a whole number from YAML or text. why is set when it is
// not one ("not a number", "not a whole number").
func parseInt(v any) (n int64, why string) {
	switch x := v.(type) {
	case int:
		return int64(x), ""
	case int64:
		return x, ""
	case uint64:
		if x > math.MaxInt64 {
			return 0, "too large"
		}
		return int64(x), ""
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1<<62 {
			return 0, "not a whole number"
		}
		return int64(x), ""
	case bool, []any, map[string]any, time.Time:
		return 0, "not a number"
	}
	s := strings.TrimSpace(text(v))
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, ""
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if f == math.Trunc(f) && math.Abs(f) < 1<<62 {
			return int64(f), ""
		}
		return 0, "not a whole number"
	}
	return 0, "not a number"
}

// parseDuration reads a Go duration string ("90s", "1h30m"), a whole number
// of days ("7d") or a bare integer counted in unit. Units are matched
// case-insensitively ("5S" is five seconds) because nobody means anything
// else by it.
func parseDuration(v any, unit time.Duration) (time.Duration, string) {
	switch x := v.(type) {
	case int, int64, uint64, float64:
		n, why := parseInt(x)
		if why != "" {
			return 0, "not a duration"
		}
		return scale(n, unit)
	case bool, []any, map[string]any, time.Time:
		return 0, "not a duration"
	}
	s := strings.ToLower(strings.TrimSpace(text(v)))
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return scale(n, unit)
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.ParseInt(days, 10, 64); err == nil {
			return scale(n, 24*time.Hour)
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, "not a duration"
	}
	return d, ""
}

// scale multiplies n by unit, refusing values that would overflow.
func scale(n int64, unit time.Duration) (time.Duration, string) {
	if n != 0 && (n > math.MaxInt64/int64(unit) || n < math.MinInt64/int64(unit)) {
		return 0, "out of range"
	}
	return time.Duration(n) * unit, ""
}

// parseBool accepts true/false, yes/no, on/off, 1/0 in any case. YAML 1.2
// only knows true/false, but env and etcd values are typed by people.
func parseBool(v any) (bool, string) {
	switch x := v.(type) {
	case bool:
		return x, ""
	case int:
		switch x {
		case 0:
			return false, ""
		case 1:
			return true, ""
		}
		return false, "not a boolean"
	}
	switch strings.ToLower(strings.TrimSpace(text(v))) {
	case "true", "yes", "on", "1", "t", "y":
		return true, ""
	case "false", "no", "off", "0", "f", "n":
		return false, ""
	}
	return false, "not a boolean"
}

// parseList reads a YAML list, or a comma-separated string (env, etcd)
// optionally wrapped in [ ]. A single YAML scalar is a list of one. Entries
// are trimmed; blank entries are reported in dropped so the caller can say
// so.
func parseList(v any) (items []string, blanks int) {
	var parts []string
	switch x := v.(type) {
	case nil:
		return nil, 0
	case []any:
		for _, e := range x {
			parts = append(parts, text(e))
		}
	default:
		s := strings.TrimSpace(text(v))
		if s == "" {
			return nil, 0
		}
		if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
			s = s[1 : len(s)-1]
		}
		parts = strings.Split(s, ",")
	}
	for _, p := range parts {
		p = strings.Trim(strings.TrimSpace(p), `"'`)
		if p == "" {
			blanks++
			continue
		}
		items = append(items, p)
	}
	return items, blanks
}

// fmtDur prints a duration the way an operator writes one: "1m", "1h30m",
// "500ms" rather than "1m0s".
func fmtDur(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}
